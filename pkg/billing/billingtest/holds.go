package billingtest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

// Ledger is what RunHolds needs: a Ledger that reconciles.
type Ledger interface {
	billing.Ledger
	billing.Reconciler
}

// HoldOf is the hold of e's request, due at deadline.
func HoldOf(e billing.Entry, deadline time.Time) billing.Hold {
	return billing.Hold{RequestID: e.RequestID, Project: e.Project, KeyID: e.KeyID, Model: e.Model, At: e.At, Deadline: deadline}
}

// mine keeps what a Reconcile found of one project (the stores may be
// shared with other tests).
func mine(r billing.Reconciliation, project string) (settled, writtenOff []string) {
	for _, e := range r.Settled {
		if e.Project == project {
			settled = append(settled, e.RequestID)
		}
	}
	for _, h := range r.WrittenOff {
		if h.Project == project {
			writtenOff = append(writtenOff, h.RequestID)
		}
	}
	return settled, writtenOff
}

// RunHolds runs the contract of Hold, Price, Unhold and Reconcile.
func RunHolds(t *testing.T, newLedger func(t *testing.T) Ledger) {
	due := Base.Add(time.Minute)
	after := Base.Add(time.Hour)

	t.Run("HoldPriceBill", func(t *testing.T) {
		l := newLedger(t)
		e := NewEntry(ID("p"), ID("k"), 14_000)
		for range 2 {
			if err := l.Hold(t.Context(), HoldOf(e, due)); err != nil {
				t.Fatalf("Hold: %v", err)
			}
			if err := l.Price(t.Context(), e); err != nil {
				t.Fatalf("Price: %v", err)
			}
		}
		ExpectSpent(t, l, e.Project, e.KeyID, 0, 0)
		MustBill(t, l, e)
		MustBill(t, l, e)
		ExpectBilledOnce(t, l, e)
		if err := l.Hold(t.Context(), HoldOf(e, due)); err != nil {
			t.Fatalf("Hold after Bill: %v", err)
		}
		r, err := l.Reconcile(t.Context(), after, true)
		if s, w := mine(r, e.Project); err != nil || len(s)+len(w) > 0 {
			t.Fatalf("Reconcile after Bill: %v %v %v", s, w, err)
		}
		ExpectBilledOnce(t, l, e)
	})

	t.Run("Collisions", func(t *testing.T) {
		l := newLedger(t)
		e := NewEntry(ID("p"), ID("k"), 14_000)
		if err := l.Hold(t.Context(), HoldOf(e, due)); err != nil {
			t.Fatal(err)
		}
		other := HoldOf(e, due)
		other.KeyID = ID("k")
		if err := l.Hold(t.Context(), other); err != billing.ErrLedgerCollision {
			t.Errorf("Hold of another request: %v, want ErrLedgerCollision", err)
		}
		o := e
		o.KeyID = other.KeyID
		if err := l.Price(t.Context(), o); err != billing.ErrLedgerCollision {
			t.Errorf("Price of another request: %v, want ErrLedgerCollision", err)
		}
		if err := l.Price(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		o = e
		o.CostNanos++
		if err := l.Bill(t.Context(), o); err != billing.ErrLedgerCollision {
			t.Errorf("Bill of another price: %v, want ErrLedgerCollision", err)
		}
	})

	t.Run("Reconcile", func(t *testing.T) {
		l := newLedger(t)
		project := ID("p")
		priced := NewEntry(project, ID("k"), 1_000)
		lost := NewEntry(project, ID("k"), 2_000)
		running := NewEntry(project, ID("k"), 3_000)
		unheld := NewEntry(project, ID("k"), 4_000)
		for _, e := range []billing.Entry{priced, lost, unheld} {
			if err := l.Hold(t.Context(), HoldOf(e, due)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Hold(t.Context(), HoldOf(running, after.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		if err := l.Price(t.Context(), priced); err != nil {
			t.Fatal(err)
		}
		if err := l.Unhold(t.Context(), project, unheld.RequestID); err != nil {
			t.Fatal(err)
		}
		// Unhold of a priced hold leaves it alone.
		if err := l.Unhold(t.Context(), project, priced.RequestID); err != nil {
			t.Fatal(err)
		}
		r, err := l.Reconcile(t.Context(), after, false)
		s, w := mine(r, project)
		if err != nil || !slices.Equal(s, []string{priced.RequestID}) || !slices.Equal(w, []string{lost.RequestID}) {
			t.Fatalf("Reconcile report: settled %v written off %v, %v; want %s and %s", s, w, err, priced.RequestID, lost.RequestID)
		}
		if a := MustAccount(t, l, project, priced.KeyID); a.SpentNanos != 0 {
			t.Fatalf("a report applied: %+v", a)
		}
		// Twice at once: settled once.
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, err := l.Reconcile(t.Context(), after, true); err != nil {
					t.Errorf("Reconcile: %v", err)
				}
			})
		}
		wg.Wait()
		ExpectSpent(t, l, project, priced.KeyID, priced.CostNanos, priced.CostNanos)
		r, err = l.Reconcile(t.Context(), after, true)
		if s, w := mine(r, project); err != nil || len(s)+len(w) > 0 {
			t.Fatalf("Reconcile again: %v %v %v", s, w, err)
		}
		// A late Bill of the written-off request bills normally, once.
		MustBill(t, l, lost)
		MustBill(t, l, lost)
		ExpectSpent(t, l, project, lost.KeyID, priced.CostNanos+lost.CostNanos, lost.CostNanos)
		// The running hold is due later.
		r, err = l.Reconcile(t.Context(), after.Add(2*time.Hour), false)
		if _, w := mine(r, project); err != nil || !slices.Equal(w, []string{running.RequestID}) {
			t.Fatalf("later: written off %v, %v", w, err)
		}
	})

	t.Run("PriceWithoutHold", func(t *testing.T) {
		l := newLedger(t)
		e := NewEntry(ID("p"), ID("k"), 5_000)
		if err := l.Price(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		r, err := l.Reconcile(t.Context(), time.Now().Add(time.Minute), true)
		if s, _ := mine(r, e.Project); err != nil || !slices.Equal(s, []string{e.RequestID}) {
			t.Fatalf("Reconcile: %v %v", s, err)
		}
		ExpectBilledOnce(t, l, e)
	})
}
