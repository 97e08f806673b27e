// Package billingtest is the contract every billing.Ledger and
// billing.KeyStore passes (Run, RunKeyStore), with helpers for the tests of
// each implementation. It is imported by tests only.
package billingtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// Base is the time of the suite's entries.
var Base = time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)

// ID returns a unique id with a prefix (the tests of a DynamoDB table share
// it).
func ID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// NewEntry returns an entry of project and key with a fresh request id.
func NewEntry(project, keyID string, cost int64) billing.Entry {
	return billing.Entry{
		RequestID:        ID("req"),
		Project:          project,
		KeyID:            keyID,
		Model:            "demo/chat",
		Provider:         "alpha",
		PromptTokens:     12,
		CompletionTokens: 34,
		CostNanos:        cost,
		At:               Base,
	}
}

// MustBill bills e and fails the test on an error.
func MustBill(t testing.TB, l billing.Ledger, e billing.Entry) {
	t.Helper()
	if err := l.Bill(t.Context(), e); err != nil {
		t.Fatalf("Bill(%s): %v", e.RequestID, err)
	}
}

// MustAccount reads an account and fails the test on an error.
func MustAccount(t testing.TB, l billing.Ledger, project, keyID string) billing.Account {
	t.Helper()
	a, err := l.Account(t.Context(), project, keyID)
	if err != nil {
		t.Fatalf("Account(%s, %s): %v", project, keyID, err)
	}
	return a
}

// ExpectSpent checks the project's and the key's spend.
func ExpectSpent(t testing.TB, l billing.Ledger, project, keyID string, projectSpent, keySpent int64) {
	t.Helper()
	a := MustAccount(t, l, project, keyID)
	if a.SpentNanos != projectSpent || a.KeySpentNanos != keySpent {
		t.Fatalf("spent: project %d key %d, want project %d key %d", a.SpentNanos, a.KeySpentNanos, projectSpent, keySpent)
	}
}

// ExpectBilledOnce checks that e is in the ledger (Entry and Totals) once
// and is the only spend of its project and key.
func ExpectBilledOnce(t testing.TB, l billing.Ledger, e billing.Entry) {
	t.Helper()
	got, err := l.Entry(t.Context(), e.RequestID)
	if err != nil {
		t.Fatalf("Entry(%s): %v", e.RequestID, err)
	}
	if diff := cmp.Diff(billing.NormalizeEntry(e), got); diff != "" {
		t.Fatalf("Entry(%s) (-want +got):\n%s", e.RequestID, diff)
	}
	ExpectSpent(t, l, e.Project, e.KeyID, e.CostNanos, e.CostNanos)
	tot := MustTotals(t, l, e.Project, e.At, e.At.Add(time.Nanosecond))
	if tot.Total.Requests != 1 || tot.Total.CostNanos != e.CostNanos {
		t.Fatalf("Totals: %+v, want one request of %d", tot.Total, e.CostNanos)
	}
}

// MustTotals reads totals and fails the test on an error.
func MustTotals(t testing.TB, l billing.Ledger, project string, from, to time.Time) billing.Totals {
	t.Helper()
	tot, err := l.Totals(t.Context(), project, from, to)
	if err != nil {
		t.Fatalf("Totals: %v", err)
	}
	return tot
}

func ptr[T any](v T) *T { return &v }

// Run runs the Ledger contract; newLedger returns a ledger for one test
// (it may share its storage with others: the suite uses fresh ids).
func Run(t *testing.T, newLedger func(t *testing.T) billing.Ledger) {
	for _, c := range ledgerCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newLedger(t)) })
	}
	t.Run("Overshoot", func(t *testing.T) { testOvershoot(t, newLedger) })
}

// ledgerCases are the tests of Run that need one ledger each.
var ledgerCases = []struct {
	name string
	run  func(t *testing.T, l billing.Ledger)
}{
	{"BillOnce", testBillOnce},
	{"BillTwice", testBillTwice},
	{"Collision", testCollision},
	{"ZeroCost", testZeroCost},
	{"Invalid", testInvalid},
	{"Totals", testTotals},
	{"TotalsPage", testTotalsPage},
	{"Feedback", testFeedback},
	{"Accounts", testAccounts},
	{"ConcurrentDistinct", testConcurrentDistinct},
	{"ConcurrentSame", testConcurrentSame},
	{"ConcurrentCollisions", testConcurrentCollisions},
	{"PeriodSpend", testPeriodSpend},
}

// testPeriodSpend: a bill counts in the day, week and month of its entry's
// At; Account reports the current ones (the ledger's clock is the real
// one), for the project and for each key, and a bill billed twice counts
// once there too.
func testPeriodSpend(t *testing.T, l billing.Ledger) {
	project, k1, k2 := ID("p"), ID("k"), ID("k")
	now := time.Now().UTC()
	today := NewEntry(project, k1, 1_000)
	today.At = now
	alsoToday := NewEntry(project, k2, 20_000)
	alsoToday.At = now
	old := NewEntry(project, k1, 300_000) // two months ago: no current period
	old.At = now.AddDate(0, -2, 0)
	for _, e := range []billing.Entry{today, alsoToday, old, today} {
		MustBill(t, l, e)
	}
	a := MustAccount(t, l, project, k1)
	want := [billing.NumPeriods]int64{21_000, 21_000, 21_000}
	if a.PeriodSpent != want || a.KeyPeriodSpent != [billing.NumPeriods]int64{1_000, 1_000, 1_000} || a.SpentNanos != 321_000 {
		t.Fatalf("account %+v: want the project's day, week and month at 21000 and key k1's at 1000, 321000 in all", a)
	}
	if a := MustAccount(t, l, project, k2); a.KeyPeriodSpent != [billing.NumPeriods]int64{20_000, 20_000, 20_000} {
		t.Fatalf("key k2: %+v", a)
	}
}

func testBillOnce(t *testing.T, l billing.Ledger) {
	e := NewEntry(ID("p"), ID("k"), 14_000)
	MustBill(t, l, e)
	ExpectBilledOnce(t, l, e)
}

func testBillTwice(t *testing.T, l billing.Ledger) {
	e := NewEntry(ID("p"), ID("k"), 14_000)
	MustBill(t, l, e)
	MustBill(t, l, e)
	// The same instant in another zone is the same payload.
	again := e
	again.At = e.At.In(time.FixedZone("X", 3600))
	MustBill(t, l, again)
	ExpectBilledOnce(t, l, e)
}

func testCollision(t *testing.T, l billing.Ledger) {
	e := NewEntry(ID("p"), ID("k"), 14_000)
	MustBill(t, l, e)
	other := NewEntry(ID("p"), ID("k"), 1)
	for name, change := range map[string]func(*billing.Entry){
		"cost":     func(x *billing.Entry) { x.CostNanos++ },
		"project":  func(x *billing.Entry) { x.Project = other.Project },
		"key":      func(x *billing.Entry) { x.KeyID = other.KeyID },
		"model":    func(x *billing.Entry) { x.Model = "other/model" },
		"provider": func(x *billing.Entry) { x.Provider = "" },
		"tokens":   func(x *billing.Entry) { x.CompletionTokens++ },
		"at":       func(x *billing.Entry) { x.At = x.At.Add(time.Nanosecond) },
	} {
		c := e
		change(&c)
		if err := l.Bill(t.Context(), c); !errors.Is(err, billing.ErrLedgerCollision) {
			t.Errorf("Bill with another %s: %v, want ErrLedgerCollision", name, err)
		}
	}
	ExpectBilledOnce(t, l, e)
	ExpectSpent(t, l, other.Project, other.KeyID, 0, 0)
	ExpectSpent(t, l, e.Project, other.KeyID, e.CostNanos, 0)
}

func testZeroCost(t *testing.T, l billing.Ledger) {
	e := NewEntry(ID("p"), ID("k"), 0)
	MustBill(t, l, e)
	MustBill(t, l, e)
	ExpectBilledOnce(t, l, e)
}

func testInvalid(t *testing.T, l billing.Ledger) {
	good := NewEntry(ID("p"), ID("k"), 1)
	for name, change := range map[string]func(*billing.Entry){
		"no request id": func(x *billing.Entry) { x.RequestID = "" },
		"no project":    func(x *billing.Entry) { x.Project = "" },
		"no key":        func(x *billing.Entry) { x.KeyID = "" },
		"negative cost": func(x *billing.Entry) { x.CostNanos = -1 },
		"negative tokens": func(x *billing.Entry) {
			x.PromptTokens = -1
		},
		"no time":      func(x *billing.Entry) { x.At = time.Time{} },
		"long project": func(x *billing.Entry) { x.Project = strings.Repeat("p", billing.MaxIDBytes+1) },
	} {
		e := good
		change(&e)
		if err := l.Bill(t.Context(), e); !errors.Is(err, billing.ErrInvalid) {
			t.Errorf("Bill with %s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := l.Entry(t.Context(), good.RequestID); !errors.Is(err, billing.ErrNotFound) {
		t.Errorf("Entry of an unbilled request: %v, want ErrNotFound", err)
	}
}

func testTotals(t *testing.T, l billing.Ledger) {
	project, k1, k2 := ID("p"), ID("k1"), ID("k2")
	at := func(d time.Duration, key, model string, cost int64) billing.Entry {
		e := NewEntry(project, key, cost)
		e.At, e.Model = Base.Add(d), model
		return e
	}
	entries := []billing.Entry{
		at(-time.Nanosecond, k1, "m1", 1), // before the range
		at(0, k1, "m1", 10),               // the first instant of the range
		at(time.Minute, k2, "m1", 100),
		at(time.Hour, k1, "m2", 1000),
		at(2*time.Hour-time.Nanosecond, k2, "m2", 10_000), // the last instant
		at(2*time.Hour, k1, "m1", 100_000),                // the end: excluded
	}
	// Another project in the same range is not counted.
	entries = append(entries, NewEntry(ID("p"), k1, 7))
	for _, e := range entries {
		MustBill(t, l, e)
	}
	got := MustTotals(t, l, project, Base, Base.Add(2*time.Hour))
	u := func(n, cost int64) billing.Usage {
		return billing.Usage{Requests: n, PromptTokens: 12 * n, CompletionTokens: 34 * n, CostNanos: cost}
	}
	want := billing.Totals{
		Total:   u(4, 11_110),
		ByModel: map[string]billing.Usage{"m1": u(2, 110), "m2": u(2, 11_000)},
		ByKey:   map[string]billing.Usage{k1: u(2, 1010), k2: u(2, 10_100)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Totals (-want +got):\n%s", diff)
	}
	all := MustTotals(t, l, project, time.Time{}, Base.Add(24*time.Hour))
	if all.Total.Requests != 6 || all.Total.CostNanos != 111_111 {
		t.Errorf("Totals over everything: %+v, want 6 requests of 111111", all.Total)
	}
	empty := MustTotals(t, l, project, Base.Add(time.Hour), Base.Add(time.Hour))
	if diff := cmp.Diff(billing.NewTotals(), empty); diff != "" {
		t.Errorf("Totals over an empty range (-want +got):\n%s", diff)
	}
	ExpectSpent(t, l, project, k1, 111_111, 101_011)
}

// testTotalsPage: pages of every size sum to Totals, each holds at most
// its limit, and the last says done; a cursor from outside the range is
// ErrInvalid.
func testTotalsPage(t *testing.T, l billing.Ledger) {
	ctx := t.Context()
	project := ID("p")
	from, to := Base, Base.Add(time.Hour)
	for i := range 7 {
		e := NewEntry(project, ID("k"), int64(1+i))
		e.At, e.Model = Base.Add(time.Duration(i-1)*10*time.Minute), fmt.Sprintf("m%d", i%2) // the first before the range
		MustBill(t, l, e)
	}
	e := NewEntry(project, ID("k"), 1000)
	e.At = to // the end: excluded
	MustBill(t, l, e)
	want := MustTotals(t, l, project, from, to)
	if want.Total.Requests != 6 {
		t.Fatalf("Totals: %+v, want 6 requests", want.Total)
	}
	for limit := 1; limit <= 7; limit++ {
		sum := billing.NewTotals()
		var cur billing.TotalsCursor
		for pages := 0; ; pages++ {
			if pages > 7 { // at most one page an entry, and a last empty one
				t.Fatalf("limit %d: more pages than entries", limit)
			}
			tot, next, done, err := l.TotalsPage(ctx, project, from, to, limit, cur)
			if err != nil {
				t.Fatalf("limit %d, page %d: %v", limit, pages, err)
			}
			if tot.Total.Requests > int64(limit) {
				t.Errorf("limit %d, page %d: %d entries", limit, pages, tot.Total.Requests)
			}
			sum.Total.Requests += tot.Total.Requests
			sum.Total.PromptTokens += tot.Total.PromptTokens
			sum.Total.CompletionTokens += tot.Total.CompletionTokens
			sum.Total.CostNanos += tot.Total.CostNanos
			for m, u := range tot.ByModel {
				v := sum.ByModel[m]
				v.Requests, v.PromptTokens, v.CompletionTokens, v.CostNanos = v.Requests+u.Requests, v.PromptTokens+u.PromptTokens, v.CompletionTokens+u.CompletionTokens, v.CostNanos+u.CostNanos
				sum.ByModel[m] = v
			}
			for k, u := range tot.ByKey {
				v := sum.ByKey[k]
				v.Requests, v.PromptTokens, v.CompletionTokens, v.CostNanos = v.Requests+u.Requests, v.PromptTokens+u.PromptTokens, v.CompletionTokens+u.CompletionTokens, v.CostNanos+u.CostNanos
				sum.ByKey[k] = v
			}
			if done {
				break
			}
			cur = next
		}
		if diff := cmp.Diff(want, sum); diff != "" {
			t.Errorf("limit %d: the pages' sum differs from Totals (-want +got):\n%s", limit, diff)
		}
	}
	for _, bad := range []billing.TotalsCursor{{Shard: -1}, {Shard: 1 << 20}, {After: "garbage"}, {After: "9999-01-01T00:00:00.000000000Z#x"}} {
		if _, _, _, err := l.TotalsPage(ctx, project, from, to, 1, bad); !errors.Is(err, billing.ErrInvalid) {
			t.Errorf("cursor %+v: %v, want ErrInvalid", bad, err)
		}
	}
	if _, _, _, err := l.TotalsPage(ctx, project, from, to, 0, billing.TotalsCursor{}); !errors.Is(err, billing.ErrInvalid) {
		t.Errorf("limit 0: %v, want ErrInvalid", err)
	}
}

func testFeedback(t *testing.T, l billing.Ledger) {
	rid := ID("req")
	t0 := Base.Add(time.Minute)
	first := billing.Feedback{RequestID: rid, EndUser: "alice", Score: ptr(1.0), Label: "good", Comment: "nice", UpdatedAt: t0}
	second := billing.Feedback{RequestID: rid, EndUser: "alice", Score: ptr(-0.5), Label: "bad", UpdatedAt: t0.Add(time.Second)}
	for _, f := range []billing.Feedback{first, second, second} {
		if err := l.Feedback(t.Context(), f); err != nil {
			t.Fatalf("Feedback: %v", err)
		}
	}
	bob := billing.Feedback{RequestID: rid, EndUser: "", Comment: strings.Repeat("x", billing.MaxCommentBytes), UpdatedAt: t0}
	if err := l.Feedback(t.Context(), bob); err != nil {
		t.Fatalf("Feedback: %v", err)
	}
	got, err := l.Feedbacks(t.Context(), rid)
	if err != nil {
		t.Fatalf("Feedbacks: %v", err)
	}
	wantSecond := second
	wantSecond.CreatedAt = t0
	wantBob := bob
	wantBob.CreatedAt = t0
	if diff := cmp.Diff([]billing.Feedback{wantBob, wantSecond}, got); diff != "" {
		t.Errorf("Feedbacks (-want +got):\n%s", diff)
	}
	if got, err := l.Feedbacks(t.Context(), ID("req")); err != nil || len(got) != 0 {
		t.Errorf("Feedbacks of another request: %v, %v; want none", got, err)
	}
	for name, f := range map[string]billing.Feedback{
		"no request id": {EndUser: "a"},
		"long comment":  {RequestID: rid, Comment: strings.Repeat("x", billing.MaxCommentBytes+1)},
		"long label":    {RequestID: rid, Label: strings.Repeat("x", billing.MaxLabelBytes+1)},
		"NaN score":     {RequestID: rid, Score: ptr(nan())},
	} {
		if err := l.Feedback(t.Context(), f); !errors.Is(err, billing.ErrInvalid) {
			t.Errorf("Feedback with %s: %v, want ErrInvalid", name, err)
		}
	}
}

func testAccounts(t *testing.T, l billing.Ledger) {
	ctx := t.Context()
	project, k1, k2, k3 := ID("p"), ID("k1"), ID("k2"), ID("k3")
	expect := func(keyID string, want billing.Account) {
		t.Helper()
		want.Project, want.KeyID = project, keyID
		if diff := cmp.Diff(want, MustAccount(t, l, project, keyID)); diff != "" {
			t.Fatalf("Account(%s) (-want +got):\n%s", keyID, diff)
		}
	}
	// Never seen: unlimited, nothing spent.
	expect(k1, billing.Account{})
	if err := MustAccount(t, l, project, k1).Check(); err != nil {
		t.Fatalf("Check of a new account: %v", err)
	}

	if err := l.Seed(ctx, project, ptr[int64](10_000), map[string]*int64{k1: ptr[int64](5000), k2: nil}); err != nil {
		t.Fatalf("Seed: %v", err)
	}
	expect(k1, billing.Account{BalanceNanos: ptr[int64](10_000), KeyLimitNanos: ptr[int64](5000)})
	// Seeding again changes nothing seeded, and seeds what is new.
	if err := l.Seed(ctx, project, ptr[int64](1), map[string]*int64{k1: ptr[int64](1), k2: ptr[int64](1), k3: ptr[int64](3000)}); err != nil {
		t.Fatalf("Seed: %v", err)
	}
	expect(k1, billing.Account{BalanceNanos: ptr[int64](10_000), KeyLimitNanos: ptr[int64](5000)})
	expect(k2, billing.Account{BalanceNanos: ptr[int64](10_000)})
	expect(k3, billing.Account{BalanceNanos: ptr[int64](10_000), KeyLimitNanos: ptr[int64](3000)})

	MustBill(t, l, NewEntry(project, k1, 4000))
	expect(k1, billing.Account{BalanceNanos: ptr[int64](6000), SpentNanos: 4000, KeySpentNanos: 4000, KeyLimitNanos: ptr[int64](5000)})
	MustBill(t, l, NewEntry(project, k1, 1000))
	if err := MustAccount(t, l, project, k1).Check(); !errors.Is(err, billing.ErrKeyLimitReached) {
		t.Fatalf("Check at the key's limit: %v, want ErrKeyLimitReached", err)
	}
	if err := MustAccount(t, l, project, k2).Check(); err != nil {
		t.Fatalf("Check of another key: %v", err)
	}
	if err := l.SetKeyLimit(ctx, project, k1, ptr[int64](8000)); err != nil {
		t.Fatalf("SetKeyLimit: %v", err)
	}
	if err := MustAccount(t, l, project, k1).Check(); err != nil {
		t.Fatalf("Check under a raised limit: %v", err)
	}
	MustBill(t, l, NewEntry(project, k2, 5000))
	expect(k2, billing.Account{BalanceNanos: ptr[int64](0), SpentNanos: 10_000, KeySpentNanos: 5000})
	if err := MustAccount(t, l, project, k2).Check(); !errors.Is(err, billing.ErrInsufficientBalance) {
		t.Fatalf("Check of a spent balance: %v, want ErrInsufficientBalance", err)
	}

	// SetBalance sets what remains, whatever was spent.
	if err := l.SetBalance(ctx, project, ptr[int64](2500)); err != nil {
		t.Fatalf("SetBalance: %v", err)
	}
	expect(k2, billing.Account{BalanceNanos: ptr[int64](2500), SpentNanos: 10_000, KeySpentNanos: 5000})
	MustBill(t, l, NewEntry(project, k2, 3000))
	expect(k2, billing.Account{BalanceNanos: ptr[int64](-500), SpentNanos: 13_000, KeySpentNanos: 8000})
	if err := l.SetBalance(ctx, project, nil); err != nil {
		t.Fatalf("SetBalance(nil): %v", err)
	}
	if err := l.SetKeyLimit(ctx, project, k1, nil); err != nil {
		t.Fatalf("SetKeyLimit(nil): %v", err)
	}
	expect(k1, billing.Account{SpentNanos: 13_000, KeySpentNanos: 5000})
	// A limit set to none is not seeded again, nor a balance.
	if err := l.Seed(ctx, project, ptr[int64](1), map[string]*int64{k1: ptr[int64](1)}); err != nil {
		t.Fatalf("Seed: %v", err)
	}
	expect(k1, billing.Account{SpentNanos: 13_000, KeySpentNanos: 5000})

	// SetBalance of a project that never spent.
	fresh := ID("p")
	if err := l.SetBalance(ctx, fresh, ptr[int64](7)); err != nil {
		t.Fatalf("SetBalance: %v", err)
	}
	if a := MustAccount(t, l, fresh, k1); a.BalanceNanos == nil || *a.BalanceNanos != 7 || a.SpentNanos != 0 {
		t.Fatalf("Account after SetBalance of a new project: %+v", a)
	}
	if _, err := l.Account(ctx, "", k1); !errors.Is(err, billing.ErrInvalid) {
		t.Fatalf("Account of an empty project: %v, want ErrInvalid", err)
	}

	// A zero balance is spent from the start.
	empty := ID("p")
	if err := l.Seed(ctx, empty, ptr[int64](0), nil); err != nil {
		t.Fatalf("Seed: %v", err)
	}
	if err := MustAccount(t, l, empty, k1).Check(); !errors.Is(err, billing.ErrInsufficientBalance) {
		t.Fatalf("Check of a zero balance: %v, want ErrInsufficientBalance", err)
	}
}

func testConcurrentDistinct(t *testing.T, l billing.Ledger) {
	project, k1, k2 := ID("p"), ID("k1"), ID("k2")
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var sum, sum1 int64
	for i := range n {
		key := k1
		if i%2 == 1 {
			key = k2
		}
		e := NewEntry(project, key, int64(1000+i))
		sum += e.CostNanos
		if key == k1 {
			sum1 += e.CostNanos
		}
		wg.Go(func() { errs <- l.Bill(context.WithoutCancel(t.Context()), e) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Bill: %v", err)
		}
	}
	ExpectSpent(t, l, project, k1, sum, sum1)
	tot := MustTotals(t, l, project, Base, Base.Add(time.Second))
	if tot.Total.Requests != n || tot.Total.CostNanos != sum {
		t.Fatalf("Totals: %+v, want %d requests of %d", tot.Total, n, sum)
	}
}

func testConcurrentSame(t *testing.T, l billing.Ledger) {
	for range 5 {
		e := NewEntry(ID("p"), ID("k"), 14_000)
		var wg sync.WaitGroup
		var failed atomic.Int32
		start := make(chan struct{})
		for range 20 {
			wg.Go(func() {
				<-start
				if err := l.Bill(context.WithoutCancel(t.Context()), e); err != nil {
					t.Errorf("Bill: %v", err)
					failed.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if failed.Load() > 0 {
			t.FailNow()
		}
		ExpectBilledOnce(t, l, e)
	}
}

func testConcurrentCollisions(t *testing.T, l billing.Ledger) {
	rid := ID("req")
	var wg sync.WaitGroup
	var won, collided atomic.Int32
	start := make(chan struct{})
	entries := make([]billing.Entry, 20)
	for i := range entries {
		entries[i] = NewEntry(ID("p"), "k", int64(1000+i))
		entries[i].RequestID = rid
		wg.Go(func() {
			<-start
			switch err := l.Bill(context.WithoutCancel(t.Context()), entries[i]); {
			case err == nil:
				won.Add(1)
			case errors.Is(err, billing.ErrLedgerCollision):
				collided.Add(1)
			default:
				t.Errorf("Bill: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if won.Load() != 1 || collided.Load() != 19 {
		t.Fatalf("%d Bills won and %d collided, want 1 and 19", won.Load(), collided.Load())
	}
	got, err := l.Entry(t.Context(), rid)
	if err != nil {
		t.Fatalf("Entry: %v", err)
	}
	for _, e := range entries {
		want := int64(0)
		if e.Project == got.Project {
			want = e.CostNanos
		}
		ExpectSpent(t, l, e.Project, "k", want, want)
	}
}

// testOvershoot: 50 requests check the balance, then bill, against a
// balance for 10: the spend is the ledger's sum exactly, and the balance
// goes negative by at most the cost of the requests in flight.
func testOvershoot(t *testing.T, newLedger func(t *testing.T) billing.Ledger) {
	for _, together := range []bool{true, false} {
		t.Run(fmt.Sprintf("together=%v", together), func(t *testing.T) {
			l := newLedger(t)
			const n, fits, cost = 50, 10, 1000
			project, keyID := ID("p"), ID("k")
			if err := l.Seed(t.Context(), project, ptr[int64](fits*cost), nil); err != nil {
				t.Fatalf("Seed: %v", err)
			}
			var checked sync.WaitGroup
			checked.Add(n)
			var inFlight, maxInFlight, billed atomic.Int64
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					ctx := context.WithoutCancel(t.Context())
					a, err := l.Account(ctx, project, keyID)
					if err != nil {
						t.Errorf("Account: %v", err)
						checked.Done()
						return
					}
					ok := a.Check() == nil
					if ok {
						cur := inFlight.Add(1)
						for m := maxInFlight.Load(); cur > m && !maxInFlight.CompareAndSwap(m, cur); m = maxInFlight.Load() {
						}
					}
					checked.Done()
					if together {
						checked.Wait() // every check before any bill
					}
					if !ok {
						return
					}
					if err := l.Bill(ctx, NewEntry(project, keyID, cost)); err != nil {
						t.Errorf("Bill: %v", err)
					}
					inFlight.Add(-1)
					billed.Add(1)
				})
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			a := MustAccount(t, l, project, keyID)
			tot := MustTotals(t, l, project, Base, Base.Add(time.Second))
			if a.SpentNanos != tot.Total.CostNanos || a.KeySpentNanos != tot.Total.CostNanos || tot.Total.Requests != billed.Load() {
				t.Fatalf("spent %d (key %d), ledger %d requests of %d, billed %d: want the ledger's sum", a.SpentNanos, a.KeySpentNanos, tot.Total.Requests, tot.Total.CostNanos, billed.Load())
			}
			if billed.Load() < fits {
				t.Fatalf("%d requests billed, want at least %d", billed.Load(), fits)
			}
			overshoot := -*a.BalanceNanos
			if overshoot > maxInFlight.Load()*cost {
				t.Fatalf("overshoot %d over the %d requests in flight at most (%d)", overshoot, maxInFlight.Load(), maxInFlight.Load()*cost)
			}
			if together && (billed.Load() != n || overshoot != (n-fits)*cost) {
				t.Fatalf("all checked together: %d billed, overshoot %d; want %d and %d", billed.Load(), overshoot, n, (n-fits)*cost)
			}
			if err := a.Check(); !errors.Is(err, billing.ErrInsufficientBalance) {
				t.Fatalf("Check after: %v, want ErrInsufficientBalance", err)
			}
			t.Logf("billed %d of %d, overshoot %d nano-USD, at most %d in flight", billed.Load(), n, overshoot, maxInFlight.Load())
		})
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}

// RunKeyStore runs the KeyStore contract; newStore returns a store for one
// test whose Issue hashes with pepper. When the store is also a
// billing.Ledger, SeedConfig is tested on it too.
func RunKeyStore(t *testing.T, pepper []byte, newStore func(t *testing.T) billing.KeyStore) {
	for _, c := range keyStoreCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, pepper, newStore(t)) })
	}
}

// keyStoreCases are the tests of RunKeyStore.
var keyStoreCases = []struct {
	name string
	run  func(t *testing.T, pepper []byte, ks billing.KeyStore)
}{
	{"Projects", testProjects},
	{"IssueLookupRevoke", testIssueLookupRevoke},
	{"ImportKey", testImportKey},
	{"SeedConfig", testSeedConfig},
	{"ProjectRates", func(t *testing.T, _ []byte, ks billing.KeyStore) { testProjectRates(t, ks) }},
	{"KeyRates", testKeyRates},
}

// testProjectRates is the contract of SetProjectRates, for a store that is
// also a Ledger (Account returns the rates).
func testProjectRates(t *testing.T, ks billing.KeyStore) {
	ctx := t.Context()
	project := ID("p")
	if err := ks.SetProjectRates(ctx, project, billing.Rates{RPM: 1}); !errors.Is(err, billing.ErrUnknownProject) {
		t.Fatalf("an unknown project: %v, want ErrUnknownProject", err)
	}
	if err := ks.CreateProject(ctx, project, nil); err != nil {
		t.Fatal(err)
	}
	want := billing.Rates{RPM: 100, TPM: 5000, Budget: &catalog.Budget{Amount: 20, Period: "month"}}
	if err := ks.SetProjectRates(ctx, project, want); err != nil {
		t.Fatal(err)
	}
	l, ok := ks.(billing.Ledger)
	if !ok {
		return
	}
	a := MustAccount(t, l, project, "")
	if a.ProjectRates.RPM != 100 || a.ProjectRates.TPM != 5000 || a.ProjectRates.Budget == nil || *a.ProjectRates.Budget != *want.Budget {
		t.Fatalf("Account after SetProjectRates: %+v", a.ProjectRates)
	}
	if err := ks.SetProjectRates(ctx, project, billing.Rates{}); err != nil {
		t.Fatal(err)
	}
	if a := MustAccount(t, l, project, ""); a.ProjectRates != (billing.Rates{}) {
		t.Fatalf("after clearing: %+v", a.ProjectRates)
	}
}

// testKeyRates: an issued key's rates and budget are set by its id and
// come back with Lookup; a budget set to none is gone; an unknown id is
// ErrUnknownKey and bad rates are refused.
func testKeyRates(t *testing.T, pepper []byte, ks billing.KeyStore) {
	ctx := t.Context()
	project := ID("p")
	if err := ks.CreateProject(ctx, project, nil); err != nil {
		t.Fatal(err)
	}
	raw, rec, err := ks.Issue(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Rates != (billing.Rates{}) {
		t.Fatalf("a new key's rates: %+v, want none", rec.Rates)
	}
	want := billing.Rates{RPM: 60, TPM: 100_000, Budget: &catalog.Budget{Amount: 1.5, Period: "week"}}
	if err := ks.SetKeyRates(ctx, rec.KeyID, want); err != nil {
		t.Fatal(err)
	}
	got, err := ks.Lookup(ctx, billing.HashKey(pepper, raw))
	if err != nil || got.Rates.RPM != 60 || got.Rates.TPM != 100_000 || got.Rates.Budget == nil || *got.Rates.Budget != *want.Budget {
		t.Fatalf("Lookup after SetKeyRates: %+v, %v", got.Rates, err)
	}
	if err := ks.SetKeyRates(ctx, rec.KeyID, billing.Rates{RPM: 5}); err != nil {
		t.Fatal(err)
	}
	if got, err := ks.Lookup(ctx, billing.HashKey(pepper, raw)); err != nil || got.Rates != (billing.Rates{RPM: 5}) {
		t.Fatalf("after clearing the budget: %+v, %v", got.Rates, err)
	}
	if err := ks.SetKeyRates(ctx, ID("key"), billing.Rates{RPM: 1}); !errors.Is(err, billing.ErrUnknownKey) {
		t.Fatalf("an unknown key id: %v, want ErrUnknownKey", err)
	}
	if err := ks.SetKeyRates(ctx, rec.KeyID, billing.Rates{Budget: &catalog.Budget{Amount: 1, Period: "year"}}); !errors.Is(err, billing.ErrInvalid) {
		t.Fatalf("a budget per year: %v, want ErrInvalid", err)
	}
}

func testProjects(t *testing.T, pepper []byte, ks billing.KeyStore) {
	project := ID("p")
	if _, _, err := ks.Issue(t.Context(), project); !errors.Is(err, billing.ErrUnknownProject) {
		t.Fatalf("Issue for an unknown project: %v, want ErrUnknownProject", err)
	}
	if err := ks.CreateProject(t.Context(), project, ptr[int64](5000)); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	if err := ks.CreateProject(t.Context(), project, nil); !errors.Is(err, billing.ErrProjectExists) {
		t.Fatalf("CreateProject again: %v, want ErrProjectExists", err)
	}
	if l, ok := ks.(billing.Ledger); ok {
		a := MustAccount(t, l, project, "k")
		if a.BalanceNanos == nil || *a.BalanceNanos != 5000 {
			t.Fatalf("balance of a created project: %v, want 5000", a.BalanceNanos)
		}
	}
}

func testIssueLookupRevoke(t *testing.T, pepper []byte, ks billing.KeyStore) {
	ctx := t.Context()
	project := ID("p")
	if err := ks.CreateProject(ctx, project, nil); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	raw, rec, err := ks.Issue(ctx, project)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	rest, ok := strings.CutPrefix(raw, billing.RawKeyPrefix)
	if !ok || len(rest) != 32 || strings.Trim(rest, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") != "" {
		t.Fatalf("raw key %q: want %s and 32 base62 characters", raw, billing.RawKeyPrefix)
	}
	if rec.Hash != billing.HashKey(pepper, raw) || rec.Project != project || rec.KeyID == "" || rec.Revoked || rec.CreatedAt.IsZero() {
		t.Fatalf("record %+v", rec)
	}
	got, err := ks.Lookup(ctx, billing.HashKey(pepper, raw))
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Fatalf("Lookup (-want +got):\n%s", diff)
	}
	raw2, rec2, err := ks.Issue(ctx, project)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	if raw2 == raw || rec2.KeyID == rec.KeyID || rec2.Hash == rec.Hash {
		t.Fatalf("two issued keys are alike: %+v, %+v", rec, rec2)
	}
	if _, err := ks.Lookup(ctx, billing.HashKey(pepper, raw+"x")); !errors.Is(err, billing.ErrUnknownKey) {
		t.Fatalf("Lookup of an unknown key: %v, want ErrUnknownKey", err)
	}
	if _, err := ks.Lookup(ctx, billing.HashKey([]byte("other pepper"), raw)); !errors.Is(err, billing.ErrUnknownKey) {
		t.Fatalf("Lookup under another pepper: %v, want ErrUnknownKey", err)
	}

	for range 2 {
		if err := ks.Revoke(ctx, rec.KeyID); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
	}
	got, err = ks.Lookup(ctx, rec.Hash)
	if !errors.Is(err, billing.ErrKeyRevoked) || !got.Revoked || got.KeyID != rec.KeyID || got.Project != project {
		t.Fatalf("Lookup of a revoked key: %+v, %v; want its record and ErrKeyRevoked", got, err)
	}
	if _, err := ks.Lookup(ctx, rec2.Hash); err != nil {
		t.Fatalf("Lookup of the other key: %v", err)
	}
	if err := ks.Revoke(ctx, ID("key")); !errors.Is(err, billing.ErrUnknownKey) {
		t.Fatalf("Revoke of an unknown key: %v, want ErrUnknownKey", err)
	}
}

func testImportKey(t *testing.T, pepper []byte, ks billing.KeyStore) {
	ctx := t.Context()
	project, other := ID("p"), ID("p")
	raw := ID("sk-config")
	hash, id := billing.HashKey(pepper, raw), billing.ConfigKeyID(pepper, raw)
	for range 2 {
		if err := ks.ImportKey(ctx, project, hash, id); err != nil {
			t.Fatalf("ImportKey: %v", err)
		}
	}
	got, err := ks.Lookup(ctx, hash)
	if err != nil || got.Project != project || got.KeyID != id || got.Hash != hash {
		t.Fatalf("Lookup of an imported key: %+v, %v", got, err)
	}
	if err := ks.ImportKey(ctx, other, hash, id); !errors.Is(err, billing.ErrKeyConflict) {
		t.Fatalf("ImportKey into another project: %v, want ErrKeyConflict", err)
	}
	if err := ks.ImportKey(ctx, project, hash, ID("cfg")); !errors.Is(err, billing.ErrKeyConflict) {
		t.Fatalf("ImportKey under another id: %v, want ErrKeyConflict", err)
	}
	if err := ks.Revoke(ctx, id); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if err := ks.ImportKey(ctx, project, hash, id); err != nil {
		t.Fatalf("ImportKey of a revoked key: %v", err)
	}
	if _, err := ks.Lookup(ctx, hash); !errors.Is(err, billing.ErrKeyRevoked) {
		t.Fatalf("Lookup of a revoked config key imported again: %v, want ErrKeyRevoked", err)
	}
}

func testSeedConfig(t *testing.T, pepper []byte, ks billing.KeyStore) {
	l, ok := ks.(billing.Ledger)
	if !ok {
		t.Skip("the KeyStore is not a Ledger") // nothing to seed into
	}
	ctx := t.Context()
	p1, p2 := ID("p"), ID("p")
	k1, k2 := ID("sk-one"), ID("sk-two")
	projects := []catalog.Project{
		{ID: p1, Balance: ptr(10.0), Keys: []catalog.Key{{Key: k1, Limit: ptr(5.0)}, {Key: k2}}},
		{ID: p2},
	}
	for range 2 {
		if err := seedConfig(ctx, l, ks, pepper, projects); err != nil {
			t.Fatalf("SeedConfig: %v", err)
		}
	}
	rec, err := ks.Lookup(ctx, billing.HashKey(pepper, k1))
	if err != nil || rec.Project != p1 || rec.KeyID != billing.ConfigKeyID(pepper, k1) {
		t.Fatalf("Lookup of a config key: %+v, %v", rec, err)
	}
	want := billing.Account{Project: p1, KeyID: rec.KeyID, BalanceNanos: ptr[int64](10 * billing.NanosPerUSD), KeyLimitNanos: ptr[int64](5 * billing.NanosPerUSD)}
	if diff := cmp.Diff(want, MustAccount(t, l, p1, rec.KeyID)); diff != "" {
		t.Fatalf("Account of a seeded key (-want +got):\n%s", diff)
	}
	// Seeded projects exist: they get keys, and are not created again.
	if _, _, err := ks.Issue(ctx, p2); err != nil {
		t.Fatalf("Issue for a seeded project: %v", err)
	}
	if err := ks.CreateProject(ctx, p1, nil); !errors.Is(err, billing.ErrProjectExists) {
		t.Fatalf("CreateProject of a seeded project: %v, want ErrProjectExists", err)
	}
	// The config seeds once: a new balance in it changes nothing.
	projects[0].Balance = ptr(99.0)
	if err := seedConfig(ctx, l, ks, pepper, projects); err != nil {
		t.Fatalf("SeedConfig: %v", err)
	}
	if diff := cmp.Diff(want, MustAccount(t, l, p1, rec.KeyID)); diff != "" {
		t.Fatalf("Account after a changed config (-want +got):\n%s", diff)
	}
}

// seedConfig applies the config file's projects to a ledger and a key
// store (usually the same store): each project is seeded once (billing.Ledger.Seed:
// its balance and its keys' limits, only where the ledger has none yet) and
// each key is imported by its hash with id ConfigKeyID. It is idempotent:
// every instance may call it at start-up, at the same time.
func seedConfig(ctx context.Context, l billing.Ledger, ks billing.KeyStore, pepper []byte, projects []catalog.Project) error {
	for _, p := range projects {
		limits := make(map[string]*int64, len(p.Keys))
		for _, k := range p.Keys {
			limits[billing.ConfigKeyID(pepper, k.Key)] = billing.USDPtrToNanos(k.Limit)
		}
		if err := l.Seed(ctx, p.ID, billing.USDPtrToNanos(p.Balance), limits); err != nil {
			return fmt.Errorf("seed project %s: %w", p.ID, err)
		}
		for i, k := range p.Keys {
			if err := ks.ImportKey(ctx, p.ID, billing.HashKey(pepper, k.Key), billing.ConfigKeyID(pepper, k.Key)); err != nil {
				return fmt.Errorf("import key %d of project %s: %w", i, p.ID, err)
			}
		}
	}
	return nil
}
