package memstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/gcbench"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s := New(64 << 20)
		t.Cleanup(func() { s.check(t) })
		return s
	})
}

// TestContractSharedStore runs the suite against one store shared by every
// subtest, as a DynamoDB table is.
func TestContractSharedStore(t *testing.T) {
	s := New(1 << 30)
	storetest.Run(t, func(t *testing.T) idempotency.Store { return s })
	s.check(t)
}

// check verifies the store's bookkeeping: byte counts, the expiry heap, the
// answer list, and the bound.
func (s *Store) check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var base, ans int64
	withAnswer := 0
	tb := map[string]*tenant{}
	for k, e := range s.recs {
		t1 := tb[e.rec.Tenant]
		if t1 == nil {
			t1 = &tenant{}
			tb[e.rec.Tenant] = t1
		}
		t1.base += e.size
		t1.ans += e.ansSize
		if k != e.rec.Key {
			t.Fatalf("entry under %q has key %q", k, e.rec.Key)
		}
		if e.size != baseSize(&e.rec) {
			t.Fatalf("%s: size %d, recounted %d", k, e.size, baseSize(&e.rec))
		}
		base += e.size
		if e.rec.Answer != nil {
			t.Fatalf("%s: an answer kept unpacked", k)
		}
		if e.ans != nil {
			withAnswer++
			a, err := unpackAnswer(e.ans)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if e.elem == nil || e.elem.Value.(*entry) != e || e.ansSize != answerSize(a) {
				t.Fatalf("%s: answer bookkeeping is off", k)
			}
		} else if e.elem != nil || e.ansSize != 0 {
			t.Fatalf("%s: no answer but listed or counted", k)
		}
		ans += e.ansSize
		if e.index < 0 || e.index >= len(s.expiry) || s.expiry[e.index] != e {
			t.Fatalf("%s: not in the expiry heap at its index", k)
		}
	}
	listed := 0
	for name, t1 := range s.tenants {
		listed += t1.answers.Len()
		if w := tb[name]; w == nil || w.base != t1.base || w.ans != t1.ans {
			t.Fatalf("tenant %q: counted %d+%d, recounted %v", name, t1.base, t1.ans, w)
		}
	}
	if len(tb) != len(s.tenants) {
		t.Fatalf("%d tenants counted, %d hold records", len(s.tenants), len(tb))
	}
	if len(s.expiry) != len(s.recs) || listed != withAnswer {
		t.Fatalf("heap %d, lists %d, records %d with %d answers", len(s.expiry), listed, len(s.recs), withAnswer)
	}
	if base != s.base || ans != s.ans {
		t.Fatalf("counted base %d ans %d, recounted %d %d", s.base, s.ans, base, ans)
	}
	for i := 1; i < len(s.expiry); i++ {
		if s.expiry[i].rec.ExpiresAt.Before(s.expiry[(i-1)/2].rec.ExpiresAt) {
			t.Fatalf("expiry heap out of order at %d", i)
		}
	}
	if s.base+s.ans > s.max {
		t.Fatalf("%d bytes over a bound of %d", s.base+s.ans, s.max)
	}
}

func answerOf(n int, seed uint64) *idempotency.Answer {
	return storetest.JSONAnswer(storetest.RandomBytes(n, seed))
}

func TestBoundDropsOldestCompletedAnswers(t *testing.T) {
	ctx := context.Background()
	const n, max = 10, 60_000
	s := New(max)
	base := storetest.Base()
	recs := make([]*idempotency.Record, n)
	answers := make([]*idempotency.Answer, n)
	for i := range recs {
		recs[i] = storetest.NewRecord(storetest.Key(), base)
		recs[i].Tenant = "one" // within one tenant, the oldest completion goes first
		storetest.MustReserve(t, s, recs[i], base)
		answers[i] = answerOf(10_000, uint64(i))
	}
	// Completion order is not reservation order: oldest completed goes first.
	order := []int{7, 2, 9, 0, 5, 1, 8, 3, 6, 4}
	for _, i := range order {
		if err := s.Complete(ctx, recs[i].Key, recs[i].Owner, answers[i]); err != nil {
			t.Fatal(err)
		}
		if b := s.Bytes(); b > max {
			t.Fatalf("after Complete %d: %d bytes, bound %d", i, b, max)
		}
		s.check(t)
	}
	kept := 0
	for pos, i := range order {
		got := storetest.MustLoad(t, s, recs[i].Key, base)
		if got.State != idempotency.StateCompleted || got.Owner != recs[i].Owner {
			t.Fatalf("record %d: state %q owner %q; want completed, its owner", i, got.State, got.Owner)
		}
		if got.Answer == nil {
			if kept > 0 {
				t.Fatalf("record %d (completed #%d) was dropped after a later one was kept", i, pos)
			}
			// A retry finds the record: replay unavailable, not a new run.
			existing, err := s.Reserve(ctx, storetest.NewRecord(recs[i].Key, base), base.Add(time.Second))
			if err != nil || existing == nil {
				t.Fatalf("Reserve of a dropped answer's key = %v, %v; want the existing record", existing, err)
			}
			if existing.State != idempotency.StateCompleted || existing.Answer != nil || existing.Owner != recs[i].Owner {
				t.Fatalf("Reserve returned state %q, answer %v, owner %q", existing.State, existing.Answer != nil, existing.Owner)
			}
			continue
		}
		kept++
		if d := storetest.DiffAnswer(answers[i], got.Answer); d != "" {
			t.Fatalf("record %d: kept answer differs: %s", i, d)
		}
	}
	if kept < 3 || kept == n {
		t.Fatalf("%d of %d answers kept; want the newest few only", kept, n)
	}
	if s.Len() != n {
		t.Fatalf("Len = %d, want %d: dropping an answer keeps the record", s.Len(), n)
	}
	s.check(t)
}

func TestAnswerOverBudgetIsNotStored(t *testing.T) {
	ctx := context.Background()
	const max = 50_000
	s := New(max)
	base := storetest.Base()
	var small []*idempotency.Record
	for i := range 3 {
		rec := storetest.NewRecord(storetest.Key(), base)
		storetest.MustReserve(t, s, rec, base)
		if err := s.Complete(ctx, rec.Key, rec.Owner, answerOf(1000, uint64(i))); err != nil {
			t.Fatal(err)
		}
		small = append(small, rec)
	}
	big := storetest.NewRecord(storetest.Key(), base)
	storetest.MustReserve(t, s, big, base)
	if err := s.Complete(ctx, big.Key, big.Owner, answerOf(max, 9)); err != nil {
		t.Fatal(err)
	}
	got := storetest.MustLoad(t, s, big.Key, base)
	if got.State != idempotency.StateCompleted || got.Answer != nil {
		t.Fatalf("an answer larger than the bound: state %q, answer %v; want completed without it", got.State, got.Answer != nil)
	}
	// Dropping the others would not have made room: they stay.
	for _, rec := range small {
		if storetest.MustLoad(t, s, rec.Key, base).Answer == nil {
			t.Fatalf("a small answer was dropped for one that could never fit")
		}
	}
	if b := s.Bytes(); b > max {
		t.Fatalf("%d bytes, bound %d", b, max)
	}
	s.check(t)
}

// Records count toward the bound: a reservation that cannot get its room
// fails with ErrFull and drops nobody's record; so does an Append.
func TestReservationWithoutRoomIsRefused(t *testing.T) {
	ctx := context.Background()
	const max = 4000
	s := New(max)
	base := storetest.Base()
	var recs []*idempotency.Record
	for {
		rec := storetest.NewRecord(storetest.Key(), base)
		got, err := s.Reserve(ctx, storetest.Clone(rec), base)
		if errors.Is(err, idempotency.ErrFull) {
			break
		}
		if err != nil || got != nil {
			t.Fatalf("Reserve: %v %v", got, err)
		}
		recs = append(recs, rec)
		if len(recs) > 100 {
			t.Fatalf("the bound never refused a reservation")
		}
	}
	if b := s.Bytes(); b > max {
		t.Fatalf("%d bytes over the bound %d", b, max)
	}
	for _, rec := range recs {
		if got := storetest.MustLoad(t, s, rec.Key, base); got.Owner != rec.Owner {
			t.Fatalf("a record lost its identity to the bound")
		}
	}
	// A running stream's Append past the bound is refused and applies nothing.
	err := s.Append(ctx, recs[0].Key, recs[0].Owner, 0, storetest.StreamHead(), storetest.StreamEvents(20, 300, 1))
	if !errors.Is(err, idempotency.ErrFull) {
		t.Fatalf("Append past the bound: %v, want ErrFull", err)
	}
	storetest.ExpectRecord(t, s, recs[0].Key, base, recs[0])
	// An answer without room: the record completes without it.
	if err := s.Complete(ctx, recs[1].Key, recs[1].Owner, answerOf(3000, 2)); err != nil {
		t.Fatal(err)
	}
	if got := storetest.MustLoad(t, s, recs[1].Key, base); got.State != idempotency.StateCompleted || got.Answer != nil {
		t.Fatalf("state %q answer %v, want completed without its answer", got.State, got.Answer != nil)
	}
	s.check(t)
}

// Tenant A floods the store with keyed requests that end in tombstones
// (free provider 400s); tenant B's stored answers still replay, and B can
// still reserve. A is refused (ErrFull) once it holds its part.
func TestTenantFloodKeepsOtherTenantsAnswers(t *testing.T) {
	ctx := context.Background()
	const max = 1 << 20
	s := New(max)
	base := storetest.Base()
	var bRecs []*idempotency.Record
	var bAns []*idempotency.Answer
	for i := range 20 {
		rec := storetest.NewRecord(storetest.Key(), base)
		rec.Tenant = "project-b"
		storetest.MustReserve(t, s, rec, base)
		ans := answerOf(10_000, uint64(i))
		if err := s.Complete(ctx, rec.Key, rec.Owner, ans); err != nil {
			t.Fatal(err)
		}
		bRecs, bAns = append(bRecs, rec), append(bAns, ans)
	}
	refused, tombstones := 0, 0
	for range 5000 {
		rec := storetest.NewRecord(storetest.Key(), base)
		rec.Tenant = "project-a"
		got, err := s.Reserve(ctx, storetest.Clone(rec), base)
		if errors.Is(err, idempotency.ErrFull) {
			refused++
			continue
		}
		if err != nil || got != nil {
			t.Fatalf("Reserve: %v %v", got, err)
		}
		if err := s.Tombstone(ctx, rec.Key, rec.Owner); err != nil {
			t.Fatal(err)
		}
		tombstones++
	}
	if refused == 0 {
		t.Fatalf("the flood of %d tombstones was never refused: records do not count", tombstones)
	}
	t.Logf("tenant A: %d tombstones kept, %d reservations refused; A holds %d bytes, B %d, of %d",
		tombstones, refused, s.TenantBytes("project-a"), s.TenantBytes("project-b"), max)
	for i, rec := range bRecs {
		got := storetest.MustLoad(t, s, rec.Key, base)
		if d := storetest.DiffAnswer(bAns[i], got.Answer); d != "" {
			t.Fatalf("tenant B's answer %d lost to A's flood: %s", i, d)
		}
	}
	// B still finds room for new requests and their answers.
	for i := range 5 {
		rec := storetest.NewRecord(storetest.Key(), base)
		rec.Tenant = "project-b"
		storetest.MustReserve(t, s, rec, base)
		ans := answerOf(10_000, uint64(100+i))
		if err := s.Complete(ctx, rec.Key, rec.Owner, ans); err != nil {
			t.Fatal(err)
		}
		if got := storetest.MustLoad(t, s, rec.Key, base); got.Answer == nil {
			t.Fatalf("tenant B's new answer %d was not stored", i)
		}
	}
	s.check(t)
}

// A tenant over its fair share loses its own answers (oldest first) before
// a tenant within its share loses any.
func TestEvictionFromTenantFurthestOverShare(t *testing.T) {
	ctx := context.Background()
	const max = 200_000
	s := New(max)
	base := storetest.Base()
	complete := func(tenant string, n int, seed uint64) []*idempotency.Record {
		var recs []*idempotency.Record
		for i := range n {
			rec := storetest.NewRecord(storetest.Key(), base)
			rec.Tenant = tenant
			storetest.MustReserve(t, s, rec, base)
			if err := s.Complete(ctx, rec.Key, rec.Owner, answerOf(10_000, seed+uint64(i))); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
		}
		return recs
	}
	small := complete("small", 5, 0) // about 50 KB: within a half share
	big := complete("big", 40, 1000) // far more than fits: its own answers go
	for i, rec := range small {
		if storetest.MustLoad(t, s, rec.Key, base).Answer == nil {
			t.Fatalf("tenant small lost answer %d while within its share", i)
		}
	}
	if got := storetest.MustLoad(t, s, big[0].Key, base); got.Answer != nil || got.State != idempotency.StateCompleted {
		t.Fatalf("tenant big's oldest answer was kept (or its identity lost): %q %v", got.State, got.Answer != nil)
	}
	if got := storetest.MustLoad(t, s, big[len(big)-1].Key, base); got.Answer == nil {
		t.Fatalf("tenant big's newest answer was dropped before its oldest")
	}
	s.check(t)
}

func TestSweepRemovesEndedRecords(t *testing.T) {
	ctx := context.Background()
	s := New(64 << 20)
	t0 := storetest.Base()
	clock := t0
	s.clock = func() time.Time { return clock }

	const ended, grace, live = 100, 5, 10
	var graceRecs, liveRecs []*idempotency.Record
	for i := range ended + grace + live {
		rec := storetest.NewRecord(storetest.Key(), t0)
		switch {
		case i < ended:
			rec.ExpiresAt = t0.Add(time.Minute)
		case i < ended+grace:
			rec.ExpiresAt = t0.Add(10 * time.Minute)
			graceRecs = append(graceRecs, rec)
		default:
			liveRecs = append(liveRecs, rec)
		}
		storetest.MustReserve(t, s, rec, t0)
		if i%2 == 0 {
			if err := s.Complete(ctx, rec.Key, rec.Owner, answerOf(500, uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	total := ended + grace + live
	if s.Len() != total {
		t.Fatalf("Len = %d, want %d", s.Len(), total)
	}

	// The first 100 ended more than SweepGrace ago by the clock; the next 5
	// ended within the grace.
	clock = t0.Add(10*time.Minute + SweepGrace/2)
	hb := liveRecs[0]
	if err := s.Heartbeat(ctx, hb.Key, hb.Owner, clock.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Len(), total-SweepBatch; got != want {
		t.Fatalf("after one write Len = %d, want %d (one batch swept)", got, want)
	}
	for range ended / SweepBatch {
		if err := s.Heartbeat(ctx, hb.Key, hb.Owner, clock.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := s.Len(), grace+live; got != want {
		t.Fatalf("after the sweep Len = %d, want %d", got, want)
	}
	s.check(t)
	for _, rec := range graceRecs {
		storetest.ExpectNotFound(t, s, rec.Key, clock) // kept, but ended all the same
	}
	for _, rec := range liveRecs {
		storetest.MustLoad(t, s, rec.Key, clock)
	}

	// Later, everything ends and goes; the count goes back to zero.
	clock = t0.Add(storetest.Window + SweepGrace + time.Second)
	for s.Len() > 0 {
		rec := storetest.NewRecord(storetest.Key(), clock)
		rec.ExpiresAt = clock.Add(-SweepGrace - time.Second) // born ended: swept too
		storetest.MustReserve(t, s, rec, clock.Add(-2*SweepGrace))
	}
	if b := s.Bytes(); b != 0 {
		t.Fatalf("no records, %d bytes counted", b)
	}
	s.check(t)
}

func TestReserveReplacesEndedRecord(t *testing.T) {
	ctx := context.Background()
	s := New(64 << 20)
	base := storetest.Base()
	old := storetest.NewRecord(storetest.Key(), base)
	storetest.MustReserve(t, s, old, base)
	if err := s.Complete(ctx, old.Key, old.Owner, answerOf(5000, 1)); err != nil {
		t.Fatal(err)
	}
	now := old.ExpiresAt.Add(time.Second)
	rec := storetest.NewRecord(old.Key, now)
	storetest.MustReserve(t, s, rec, now)
	if s.Len() != 1 {
		t.Fatalf("Len = %d, want 1", s.Len())
	}
	if b, want := s.Bytes(), baseSize(rec); b != want {
		t.Fatalf("Bytes = %d, want %d: the old answer is still counted", b, want)
	}
	s.check(t)
}

// TestRandomOps runs random operations against a small set of keys and a
// small bound, and checks the bookkeeping after each, and the results against
// a model (answers may be dropped; ended records may be swept).
func TestRandomOps(t *testing.T) {
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	s := New(20_000)
	now := storetest.Base()
	s.clock = func() time.Time { return now }

	type model struct {
		rec  *idempotency.Record
		next int
		ans  *idempotency.Answer
		head *idempotency.Head
		evs  []idempotency.Event
	}
	keys := make([]string, 6)
	for i := range keys {
		keys[i] = storetest.Key()
	}
	m := map[string]*model{}
	live := func(k string) *model {
		if x := m[k]; x != nil && !x.rec.ExpiresAt.Before(now) {
			return x
		}
		return nil
	}
	// fenced: whether a write by owner must be refused; maybe: whether the
	// record ended, so the sweep may have taken it.
	fenced := func(k, owner string) (refused, maybe bool) {
		x := m[k]
		if x == nil || x.rec.Owner != owner || x.rec.State != idempotency.StateInProgress {
			return true, false
		}
		return false, x.rec.ExpiresAt.Before(now)
	}
	checkWrite := func(op, k, owner string, err error) bool {
		t.Helper()
		refused, maybe := fenced(k, owner)
		switch {
		case refused || (maybe && errors.Is(err, idempotency.ErrNotOwner)):
			if !errors.Is(err, idempotency.ErrNotOwner) {
				t.Fatalf("%s(%s): %v, want ErrNotOwner", op, k, err)
			}
			if maybe {
				delete(m, k)
			}
			return false
		case err != nil:
			t.Fatalf("%s(%s): %v", op, k, err)
		}
		return true
	}
	owner := func(k string) string {
		if x := m[k]; x != nil && r.IntN(4) > 0 {
			return x.rec.Owner
		}
		return storetest.Owner()
	}

	for step := range 3000 {
		now = now.Add(time.Duration(r.IntN(120)) * time.Second)
		k := keys[r.IntN(len(keys))]
		switch op := r.IntN(8); op {
		case 0, 1:
			rec := storetest.NewRecord(k, now)
			rec.ExpiresAt = now.Add(time.Duration(1+r.IntN(60)) * time.Minute)
			got, err := s.Reserve(ctx, rec, now)
			if err != nil {
				t.Fatal(err)
			}
			if x := live(k); x != nil {
				if got == nil || got.Owner != x.rec.Owner || got.State != x.rec.State {
					t.Fatalf("step %d: Reserve over a live record returned %v", step, got)
				}
				if got.Answer != nil && storetest.DiffAnswer(x.ans, got.Answer) != "" {
					t.Fatalf("step %d: Reserve returned another answer", step)
				}
			} else {
				if got != nil {
					t.Fatalf("step %d: Reserve of an ended or missing key returned %v", step, got.Owner)
				}
				m[k] = &model{rec: rec}
			}
		case 2:
			got, err := s.Load(ctx, k, now)
			x := live(k)
			if x == nil {
				if !errors.Is(err, idempotency.ErrNotFound) {
					t.Fatalf("step %d: Load of an ended or missing key: %v, %v", step, got, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("step %d: Load: %v", step, err)
			}
			want := storetest.Clone(x.rec)
			want.Head, want.Events = x.head, x.evs
			if got.Answer != nil || x.ans == nil {
				want.Answer = x.ans
			}
			if d := storetest.DiffRecord(want, got); d != "" {
				t.Fatalf("step %d: Load differs:\n%s", step, d)
			}
		case 3:
			o := owner(k)
			until := now.Add(time.Minute)
			if checkWrite("Heartbeat", k, o, s.Heartbeat(ctx, k, o, until)) {
				m[k].rec.LeaseUntil = until
			}
		case 4:
			o := owner(k)
			seq := 0
			if x := m[k]; x != nil {
				seq = max(0, x.next-r.IntN(2))
			}
			evs := storetest.StreamEvents(r.IntN(5), 1+r.IntN(400), r.Uint64())
			var head *idempotency.Head
			if r.IntN(3) == 0 {
				head = storetest.StreamHead()
			}
			if checkWrite("Append", k, o, s.Append(ctx, k, o, seq, head, evs)) {
				if x := m[k]; seq == x.next {
					x.next++
					x.evs = append(x.evs, evs...)
					if head != nil {
						x.head = head
					}
				}
			}
		case 5:
			o := owner(k)
			ans := answerOf(r.IntN(8_000), r.Uint64())
			if checkWrite("Complete", k, o, s.Complete(ctx, k, o, ans)) {
				x := m[k]
				x.rec.State, x.ans, x.evs = idempotency.StateCompleted, ans, nil
			}
		case 6:
			o := owner(k)
			if checkWrite("Tombstone", k, o, s.Tombstone(ctx, k, o)) {
				x := m[k]
				x.rec.State, x.evs = idempotency.StateTombstone, nil
			}
		case 7:
			o := owner(k)
			if checkWrite("Release", k, o, s.Release(ctx, k, o)) {
				delete(m, k)
			}
		}
		s.check(t)
	}
}

// TestReadersDuringAppends has readers copy a record while its owner
// appends, heartbeats and completes it (run it under -race): a reader sees a
// prefix of the events, then the answer.
func TestReadersDuringAppends(t *testing.T) {
	ctx := context.Background()
	s := New(64 << 20)
	base := storetest.Base()
	rec := storetest.NewRecord(storetest.Key(), base)
	storetest.MustReserve(t, s, rec, base)
	const calls = 200
	evs := storetest.StreamEvents(calls*3, 100, 7)
	ans := storetest.StreamAnswer(evs)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				got, err := s.Load(ctx, rec.Key, base)
				if err != nil {
					t.Errorf("Load: %v", err)
					return
				}
				if got.Answer != nil {
					if d := storetest.DiffAnswer(ans, got.Answer); d != "" {
						t.Errorf("answer differs: %s", d)
					}
					return
				}
				if d := storetest.DiffEvents(evs[:len(got.Events)], got.Events); d != "" {
					t.Errorf("events are not a prefix: %s", d)
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	for seq := range calls {
		if err := s.Append(ctx, rec.Key, rec.Owner, seq, storetest.StreamHead(), evs[seq*3:seq*3+3]); err != nil {
			t.Fatal(err)
		}
		if err := s.Heartbeat(ctx, rec.Key, rec.Owner, base.Add(time.Duration(seq)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Complete(ctx, rec.Key, rec.Owner, ans); err != nil {
		t.Fatal(err)
	}
	close(done)
	wg.Wait()
	s.check(t)
}

func BenchmarkReserveComplete(b *testing.B) {
	ctx := context.Background()
	s := New(64 << 20)
	base := time.Now()
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("%064x", i)
	}
	ans := storetest.JSONAnswer([]byte(`{"id":"chatcmpl-1","choices":[{"message":{"content":"Hello world"}}]}`))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// Keys come back every 4096 iterations, after their window ended.
		now := base.Add(time.Duration(i) * time.Millisecond)
		rec := idempotency.Record{
			Key:         keys[i%len(keys)],
			Fingerprint: "fp",
			State:       idempotency.StateInProgress,
			Owner:       "owner",
			LeaseUntil:  now.Add(30 * time.Second),
			ExpiresAt:   now.Add(time.Second),
			RequestID:   "req",
		}
		if got, err := s.Reserve(ctx, &rec, now); err != nil || got != nil {
			b.Fatalf("Reserve: %v, %v", got, err)
		}
		if err := s.Complete(ctx, rec.Key, rec.Owner, ans); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	s := New(64 << 20)
	base := storetest.Base()
	rec := storetest.NewRecord(storetest.Key(), base)
	storetest.MustReserve(b, s, rec, base)
	if err := s.Complete(ctx, rec.Key, rec.Owner, answerOf(4096, 1)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Load(ctx, rec.Key, base); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCollect is the collector's work with 50,000 answers stored (a
// 448-byte chat completion each, the replay headers, a record as the
// service writes it): one runtime.GC a loop, which marks the whole heap
// (gcbench.Collect).
func BenchmarkCollect(b *testing.B) {
	ctx := context.Background()
	s := New(1 << 30)
	base := time.Now()
	body := storetest.RandomBytes(448, 7)
	for i := range 50_000 {
		rec := idempotency.Record{
			Key:         fmt.Sprintf("%064x", i),
			Fingerprint: fmt.Sprintf("%064x", i+1),
			State:       idempotency.StateInProgress,
			Owner:       fmt.Sprintf("%032x", i),
			LeaseUntil:  base.Add(30 * time.Second),
			ExpiresAt:   base.Add(24 * time.Hour),
			RequestID:   fmt.Sprintf("req_%026d", i),
			Tenant:      "proj",
		}
		if got, err := s.Reserve(ctx, &rec, base); err != nil || got != nil {
			b.Fatalf("Reserve: %v, %v", got, err)
		}
		if err := s.Complete(ctx, rec.Key, rec.Owner, storetest.JSONAnswer(body)); err != nil {
			b.Fatal(err)
		}
	}
	gcbench.Collect(b, s)
}
