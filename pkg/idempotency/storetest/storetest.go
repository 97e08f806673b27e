// Package storetest is the contract test suite of idempotency.Store: every
// implementation (memstore, dynamostore) runs Run and must pass all of it.
//
// The suite makes no timing assumptions: it never sleeps and never waits for
// a deadline, so a slow store (DynamoDB Local, dynalite) passes as well as a
// fast one. Every subtest uses fresh random keys, so a store shared by all
// subtests (one table) works as well as a fresh store per subtest.
//
// Time: the suite passes explicit now values to Reserve and Load and sets
// LeaseUntil and ExpiresAt relative to a base time near the real clock
// (Base). A store must use the now it is given, not its own clock, for every
// expiry check. Every ExpiresAt the suite sets is in the future of the real
// clock (nows past a window are in the future too), so a store may derive a
// TTL attribute from ExpiresAt, or collect garbage by the real clock, and no
// record disappears under a test: a record whose window ended still exists,
// as it would during DynamoDB's TTL lag. Times are compared at millisecond
// precision, and all of them are whole seconds.
//
// Decisions the suite pins down, beyond the interface's doc comments:
//   - A record is live while now <= ExpiresAt: its window ends when
//     ExpiresAt < now (the reserving condition is
//     attribute_not_exists(pk) OR expires_at < :now). Reserve and Load agree.
//   - Reserve's existing record is the whole record, as Load returns it:
//     Answer (or Head and Events while in progress) included.
//   - A store returns a record as it is: an in-progress record whose lease
//     lapsed still reads as in progress with its LeaseUntil; the service,
//     not the store, reads it as a tombstone. Reserve takes over such a
//     record while its window lasts only when it never Started and the new
//     record has the same Fingerprint; the first of concurrent takeovers
//     wins, and the old owner is fenced out.
//   - MarkStarted is fenced like the other writes, and again by the owner
//     is nil.
//   - Poll with from > 0 returns only the events of the Append calls from
//     from on (no Head), and the next seq; Tenant and Started round-trip.
//   - Heartbeat, Append, Complete, Tombstone and Release need the owner
//     token and the in-progress state; anything else (a missing key, another
//     owner, a completed or tombstoned record) is ErrNotOwner and changes
//     nothing. So a second Complete by the same owner is ErrNotOwner, and so
//     is Release of a completed record.
//   - Append with a seq already applied is ignored and returns nil; with a
//     seq beyond the next one (a gap) it returns an error and changes
//     nothing. A record reserved again after its window starts over at seq 0,
//     with no Head and no Events.
//   - Complete's Answer is the whole answer: its Events replace what was
//     appended. What Load returns in Head and Events once a record is
//     completed or tombstoned is unspecified.
//   - Bytes are bytes: bodies and event data may hold any byte value; a nil
//     and an empty slice or map are the same.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
)

// Run runs the contract suite against the stores newStore returns, one call
// per subtest. newStore may return the same store every time.
func Run(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newStore(t))
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, s idempotency.Store)
}

var cases = []testCase{
	{"ReserveCreates", testReserveCreates},
	{"ReserveLiveReturnsExisting", testReserveLiveReturnsExisting},
	{"ReserveAtExpiresAtIsLive", testReserveAtExpiresAt},
	{"ReserveLapsedLeaseReturnsExisting", testReserveLapsedLease},
	{"ReserveReturnsWholeRecord", testReserveReturnsWholeRecord},
	{"ReserveAfterWindow", testReserveAfterWindow},
	{"LoadMissing", testLoadMissing},
	{"LoadAfterWindow", testLoadAfterWindow},
	{"Heartbeat", testHeartbeat},
	{"WrongOwner", testWrongOwner},
	{"CompleteJSON", testCompleteJSON},
	{"CompleteStream", testCompleteStream},
	{"CompleteTwice", testCompleteTwice},
	{"NoWritesAfterComplete", testNoWritesAfterComplete},
	{"Tombstone", testTombstone},
	{"Release", testRelease},
	{"ReleaseFencesStaleOwner", testReleaseFencesStaleOwner},
	{"AppendInOrder", testAppendInOrder},
	{"AppendRetryIgnored", testAppendRetryIgnored},
	{"AppendGapRefused", testAppendGap},
	{"AppendThenComplete", testAppendThenComplete},
	{"LargeAnswers", testLargeAnswers},
	{"LargeAppend", testLargeAppend},
	{"AllByteValues", testAllByteValues},
	{"EmptyAnswers", testEmptyAnswers},
	{"NoAliasing", testNoAliasing},
	{"ConcurrentReserve", testConcurrentReserve},
	{"ConcurrentReserveAfterWindow", testConcurrentReserveAfterWindow},
	{"ConcurrentHeartbeatsAndComplete", testConcurrentHeartbeatsAndComplete},
	{"ConcurrentAppendRetries", testConcurrentAppendRetries},
	{"KeysIsolated", testKeysIsolated},
	{"MarkStarted", testMarkStarted},
	{"TakeOverLapsedUnstarted", testTakeOver},
	{"NoTakeOverWhileLeaseLive", testNoTakeOverLive},
	{"NoTakeOverOtherFingerprint", testNoTakeOverOtherFingerprint},
	{"NoTakeOverStarted", testNoTakeOverStarted},
	{"NoTakeOverEnded", testNoTakeOverEnded},
	{"ConcurrentTakeOver", testConcurrentTakeOver},
	{"Poll", testPoll},
}

// reserved reserves a new record (NewRecord with a fresh Key) at base and
// returns it.
func reserved(t testing.TB, s idempotency.Store, base time.Time) *idempotency.Record {
	t.Helper()
	rec := NewRecord(Key(), base)
	MustReserve(t, s, rec, base)
	return rec
}

// reservation is a record a test reserved at base, and want, what Load
// returns for it as its owner writes.
type reservation struct {
	t    *testing.T
	s    idempotency.Store
	base time.Time
	rec  *idempotency.Record
	want *idempotency.Record
}

// newReservation reserves a new record at Base().
func newReservation(t *testing.T, s idempotency.Store) *reservation {
	t.Helper()
	base := Base()
	rec := reserved(t, s, base)
	return &reservation{t: t, s: s, base: base, rec: rec, want: Clone(rec)}
}

// append makes the owner's Append seq of head and evs, which must succeed,
// and adds them to what Load returns.
func (res *reservation) append(seq int, head *idempotency.Head, evs []idempotency.Event) {
	res.t.Helper()
	noErr(res.t, fmt.Sprintf("Append %d", seq), res.s.Append(res.t.Context(), res.rec.Key, res.rec.Owner, seq, head, evs))
	if head != nil {
		res.want.Head = head
	}
	res.want.Events = append(res.want.Events, evs...)
}

// expect fails the test unless Load returns want.
func (res *reservation) expect() {
	res.t.Helper()
	ExpectRecord(res.t, res.s, res.rec.Key, res.base, res.want)
}

// headAt is the head an Append seq carries: head for the first, nil after.
func headAt(seq int, head *idempotency.Head) *idempotency.Head {
	if seq == 0 {
		return head
	}
	return nil
}

// MustReserve reserves rec at now and fails the test unless it was created.
func MustReserve(t testing.TB, s idempotency.Store, rec *idempotency.Record, now time.Time) {
	t.Helper()
	got, err := s.Reserve(context.Background(), Clone(rec), now)
	if err != nil {
		t.Fatalf("Reserve(%s): %v", rec.Key, err)
	}
	if got != nil {
		t.Fatalf("Reserve(%s) = existing %s, want it created", rec.Key, describe(got))
	}
}

// MustLoad loads key at now and fails the test on an error.
func MustLoad(t testing.TB, s idempotency.Store, key string, now time.Time) *idempotency.Record {
	t.Helper()
	got, err := s.Load(context.Background(), key, now)
	if err != nil {
		t.Fatalf("Load(%s): %v", key, err)
	}
	if got == nil {
		t.Fatalf("Load(%s) = nil, nil", key)
	}
	return got
}

// ExpectRecord loads key at now and fails the test unless it is want (see
// DiffRecord).
func ExpectRecord(t testing.TB, s idempotency.Store, key string, now time.Time, want *idempotency.Record) {
	t.Helper()
	got := MustLoad(t, s, key, now)
	if d := DiffRecord(want, got); d != "" {
		t.Fatalf("Load(%s) differs:\n%s", key, d)
	}
}

// ExpectNotFound loads key at now and fails the test unless the answer is
// ErrNotFound.
func ExpectNotFound(t testing.TB, s idempotency.Store, key string, now time.Time) {
	t.Helper()
	got, err := s.Load(context.Background(), key, now)
	if !errors.Is(err, idempotency.ErrNotFound) {
		if err == nil {
			t.Fatalf("Load(%s) = %s, want ErrNotFound", key, describe(got))
		}
		t.Fatalf("Load(%s): %v, want ErrNotFound", key, err)
	}
}

// ExpectExisting reserves rec at now and fails the test unless the answer
// is the existing record want (see DiffRecord).
func ExpectExisting(t testing.TB, s idempotency.Store, rec *idempotency.Record, now time.Time, want *idempotency.Record) {
	t.Helper()
	got, err := s.Reserve(context.Background(), Clone(rec), now)
	if err != nil {
		t.Fatalf("Reserve(%s): %v", rec.Key, err)
	}
	if got == nil {
		t.Fatalf("Reserve(%s) created a record over a live one", rec.Key)
	}
	if d := DiffRecord(want, got); d != "" {
		t.Fatalf("Reserve(%s) returned a record that differs from the existing one:\n%s", rec.Key, d)
	}
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func noErr(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// completed returns what Load returns for rec completed with ans.
func completed(rec *idempotency.Record, ans *idempotency.Answer) *idempotency.Record {
	c := Clone(rec)
	c.State = idempotency.StateCompleted
	c.Answer = CloneAnswer(ans)
	c.Head, c.Events = nil, nil
	return c
}

// ownerWrites are the writes fenced by the owner token, each with the
// arguments of a valid call by owner; seq is the next Append seq.
func ownerWrites(key, owner string, seq int, base time.Time) []struct {
	name string
	do   func(ctx context.Context, s idempotency.Store) error
} {
	return []struct {
		name string
		do   func(ctx context.Context, s idempotency.Store) error
	}{
		{"Heartbeat", func(ctx context.Context, s idempotency.Store) error {
			return s.Heartbeat(ctx, key, owner, base.Add(10*time.Minute))
		}},
		{"MarkStarted", func(ctx context.Context, s idempotency.Store) error {
			return s.MarkStarted(ctx, key, owner)
		}},
		{"Append", func(ctx context.Context, s idempotency.Store) error {
			return s.Append(ctx, key, owner, seq, headAt(seq, StreamHead()), TextEvents("stale", 2))
		}},
		{"Complete", func(ctx context.Context, s idempotency.Store) error {
			return s.Complete(ctx, key, owner, JSONAnswer([]byte(`{"stale":true}`)))
		}},
		{"Tombstone", func(ctx context.Context, s idempotency.Store) error {
			return s.Tombstone(ctx, key, owner)
		}},
		{"Release", func(ctx context.Context, s idempotency.Store) error {
			return s.Release(ctx, key, owner)
		}},
	}
}

// expectFenced runs every owner write by owner against key, expects
// ErrNotOwner from each, and expects the record to read as want afterwards
// (ErrNotFound when want is nil).
func expectFenced(t *testing.T, s idempotency.Store, key, owner string, seq int, base, now time.Time, want *idempotency.Record) {
	t.Helper()
	ctx := t.Context()
	for _, w := range ownerWrites(key, owner, seq, base) {
		wantErr(t, w.name+" by a fenced owner", w.do(ctx, s), idempotency.ErrNotOwner)
		if want == nil {
			ExpectNotFound(t, s, key, now)
		} else {
			ExpectRecord(t, s, key, now, want)
		}
	}
}

func testReserveCreates(t *testing.T, s idempotency.Store) {
	base := Base()
	rec := reserved(t, s, base)
	got := MustLoad(t, s, rec.Key, base)
	if d := DiffRecord(rec, got); d != "" {
		t.Fatalf("Load after Reserve differs:\n%s", d)
	}
	if got.Answer != nil || got.Head != nil || len(got.Events) != 0 {
		t.Fatalf("a new reservation has Answer %v, Head %v, %d events; want none", got.Answer, got.Head, len(got.Events))
	}
}

func testReserveLiveReturnsExisting(t *testing.T, s idempotency.Store) {
	base := Base()
	first := reserved(t, s, base)
	for _, now := range []time.Time{base, base.Add(time.Second), base.Add(Window / 2), first.ExpiresAt.Add(-time.Second)} {
		second := NewRecord(first.Key, now) // another owner, fingerprint, request id, lease and expiry
		ExpectExisting(t, s, second, now, first)
		ExpectRecord(t, s, first.Key, now, first)
	}
}

func testReserveAtExpiresAt(t *testing.T, s idempotency.Store) {
	base := Base()
	first := reserved(t, s, base)
	now := first.ExpiresAt // the window ends when ExpiresAt < now
	ExpectRecord(t, s, first.Key, now, first)
	ExpectExisting(t, s, NewRecord(first.Key, now), now, first)
}

func testReserveLapsedLease(t *testing.T, s idempotency.Store) {
	base := Base()
	first := reserved(t, s, base)
	now := first.LeaseUntil.Add(5 * time.Minute) // the owner died; the window lasts
	ExpectRecord(t, s, first.Key, now, first)    // raw: in progress, lapsed LeaseUntil
	ExpectExisting(t, s, NewRecord(first.Key, now), now, first)
	ExpectRecord(t, s, first.Key, now, first)
}

func testReserveReturnsWholeRecord(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()

	t.Run("in_progress_with_events", func(t *testing.T) {
		rec := reserved(t, s, base)
		head, evs := StreamHead(), TextEvents("part", 3)
		noErr(t, "Append", s.Append(ctx, rec.Key, rec.Owner, 0, head, evs))
		want := Clone(rec)
		want.Head, want.Events = head, evs
		ExpectExisting(t, s, NewRecord(rec.Key, base), base.Add(time.Second), want)
	})
	t.Run("completed_json", func(t *testing.T) {
		rec := reserved(t, s, base)
		ans := JSONAnswer([]byte(`{"id":"chatcmpl-1","choices":[{"message":{"content":"hi"}}]}`))
		noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
		ExpectExisting(t, s, NewRecord(rec.Key, base), base.Add(time.Second), completed(rec, ans))
	})
	t.Run("completed_stream", func(t *testing.T) {
		rec := reserved(t, s, base)
		ans := StreamAnswer(TextEvents("tok", 10))
		noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
		ExpectExisting(t, s, NewRecord(rec.Key, base), base.Add(time.Second), completed(rec, ans))
	})
	t.Run("tombstone", func(t *testing.T) {
		rec := reserved(t, s, base)
		noErr(t, "Tombstone", s.Tombstone(ctx, rec.Key, rec.Owner))
		want := Clone(rec)
		want.State = idempotency.StateTombstone
		ExpectExisting(t, s, NewRecord(rec.Key, base), base.Add(time.Second), want)
	})
}

func testReserveAfterWindow(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	olds := []struct {
		name  string
		setup func(t *testing.T, rec *idempotency.Record)
	}{
		{"in_progress", func(t *testing.T, rec *idempotency.Record) {}},
		{"in_progress_with_events", func(t *testing.T, rec *idempotency.Record) {
			noErr(t, "Append 0", s.Append(ctx, rec.Key, rec.Owner, 0, StreamHead(), TextEvents("old", 2)))
			noErr(t, "Append 1", s.Append(ctx, rec.Key, rec.Owner, 1, nil, TextEvents("old", 2)))
			noErr(t, "Append 2", s.Append(ctx, rec.Key, rec.Owner, 2, nil, TextEvents("old", 2)))
		}},
		{"completed_json", func(t *testing.T, rec *idempotency.Record) {
			noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, JSONAnswer([]byte(`{"old":true}`))))
		}},
		{"completed_large_stream", func(t *testing.T, rec *idempotency.Record) {
			noErr(t, "Append", s.Append(ctx, rec.Key, rec.Owner, 0, StreamHead(), StreamEvents(100, 300, 1)))
			noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, StreamAnswer(StreamEvents(2000, 300, 2))))
		}},
		{"tombstone", func(t *testing.T, rec *idempotency.Record) {
			noErr(t, "Tombstone", s.Tombstone(ctx, rec.Key, rec.Owner))
		}},
	}
	for _, o := range olds {
		t.Run(o.name, func(t *testing.T) {
			base := Base()
			old := reserved(t, s, base)
			o.setup(t, old)

			// The old item still exists (its ExpiresAt is in the future of the
			// real clock, so no TTL deleted it), but its window ended.
			now := old.ExpiresAt.Add(time.Second)
			ExpectNotFound(t, s, old.Key, now)
			rec := NewRecord(old.Key, now)
			MustReserve(t, s, rec, now)
			ExpectRecord(t, s, rec.Key, now, rec)
			got := MustLoad(t, s, rec.Key, now)
			if got.Answer != nil || got.Head != nil || len(got.Events) != 0 {
				t.Fatalf("the new reservation inherited Answer %v, Head %v, %d events from the old record",
					got.Answer != nil, got.Head != nil, len(got.Events))
			}

			// The old owner is fenced off the new record.
			expectFenced(t, s, rec.Key, old.Owner, 0, base, now, rec)

			// The new record starts over at seq 0.
			head, evs := StreamHead(), TextEvents("new", 3)
			noErr(t, "Append 0 by the new owner", s.Append(ctx, rec.Key, rec.Owner, 0, head, evs))
			want := Clone(rec)
			want.Head, want.Events = head, evs
			ExpectRecord(t, s, rec.Key, now, want)
			ans := StreamAnswer(evs)
			noErr(t, "Complete by the new owner", s.Complete(ctx, rec.Key, rec.Owner, ans))
			ExpectRecord(t, s, rec.Key, now, completed(rec, ans))
		})
	}
}

func testLoadMissing(t *testing.T, s idempotency.Store) {
	ExpectNotFound(t, s, Key(), Base())
}

func testLoadAfterWindow(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	for _, end := range []string{"in_progress", "completed", "tombstone"} {
		t.Run(end, func(t *testing.T) {
			rec := reserved(t, s, base)
			want := Clone(rec)
			switch end {
			case "completed":
				ans := JSONAnswer([]byte(`{"ok":true}`))
				noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
				want = completed(rec, ans)
			case "tombstone":
				noErr(t, "Tombstone", s.Tombstone(ctx, rec.Key, rec.Owner))
				want.State = idempotency.StateTombstone
			}
			ExpectRecord(t, s, rec.Key, rec.ExpiresAt.Add(-time.Second), want)
			ExpectNotFound(t, s, rec.Key, rec.ExpiresAt.Add(time.Second))
			ExpectNotFound(t, s, rec.Key, rec.ExpiresAt.Add(48*time.Hour))
		})
	}
}

func testHeartbeat(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	ctx, base, rec, want := t.Context(), res.base, res.rec, res.want
	for _, d := range []time.Duration{time.Minute, 5 * time.Minute, 5*time.Minute + 30*time.Second} {
		want.LeaseUntil = base.Add(d)
		noErr(t, "Heartbeat", s.Heartbeat(ctx, rec.Key, rec.Owner, want.LeaseUntil))
		ExpectRecord(t, s, rec.Key, base.Add(d/2), want)
	}
	// A heartbeat keeps what was appended.
	res.append(0, StreamHead(), TextEvents("a", 2))
	want.LeaseUntil = base.Add(10 * time.Minute)
	noErr(t, "Heartbeat", s.Heartbeat(ctx, rec.Key, rec.Owner, want.LeaseUntil))
	res.expect()
}

func testWrongOwner(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	base, rec := res.base, res.rec
	res.append(0, StreamHead(), TextEvents("a", 2))

	expectFenced(t, s, rec.Key, Owner(), 1, base, base, res.want)
	expectFenced(t, s, rec.Key, "", 1, base, base, res.want)
	// seq 0 again, from another owner: still refused, not ignored as a retry.
	wantErr(t, "Append 0 by another owner", s.Append(t.Context(), rec.Key, Owner(), 0, StreamHead(), TextEvents("x", 1)), idempotency.ErrNotOwner)

	// A missing key: every write is refused and nothing is created.
	missing := Key()
	expectFenced(t, s, missing, rec.Owner, 0, base, base, nil)

	// The refused Append 1 used up nothing: the owner's Append 1 applies.
	res.append(1, nil, TextEvents("b", 1))
	res.expect()
}

func testCompleteJSON(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	rec := reserved(t, s, base)
	ans := JSONAnswer([]byte(`{"id":"chatcmpl-7","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello \u00e9 world"}}],"usage":{"total_tokens":3}}` + "\n"))
	ans.Status = 201
	noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
	got := MustLoad(t, s, rec.Key, base)
	if got.State != idempotency.StateCompleted {
		t.Fatalf("State = %q, want completed", got.State)
	}
	if d := DiffRecord(completed(rec, ans), got); d != "" {
		t.Fatalf("Load after Complete differs:\n%s", d)
	}
}

func testCompleteStream(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	rec := reserved(t, s, base)
	evs := TextEvents("tok", 20)
	evs[3].Usage = true // a usage flag anywhere is kept where it is
	ans := StreamAnswer(evs)
	noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
	got := MustLoad(t, s, rec.Key, base)
	if d := DiffRecord(completed(rec, ans), got); d != "" {
		t.Fatalf("Load after Complete differs:\n%s", d)
	}
	if !got.Answer.Stream || string(got.Answer.Events[len(got.Answer.Events)-1].Data) != "[DONE]" {
		t.Fatalf("stream answer lost its Stream flag or its [DONE]")
	}
}

func testCompleteTwice(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	ctx, base, rec := t.Context(), res.base, res.rec
	ans := JSONAnswer([]byte(`{"first":true}`))
	noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
	wantErr(t, "second Complete by the owner", s.Complete(ctx, rec.Key, rec.Owner, JSONAnswer([]byte(`{"second":true}`))), idempotency.ErrNotOwner)
	wantErr(t, "same Complete again", s.Complete(ctx, rec.Key, rec.Owner, ans), idempotency.ErrNotOwner)
	ExpectRecord(t, s, rec.Key, base, completed(rec, ans))
}

func testNoWritesAfterComplete(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	base, rec := res.base, res.rec
	res.append(0, StreamHead(), TextEvents("a", 2))
	ans := StreamAnswer(TextEvents("a", 4))
	noErr(t, "Complete", s.Complete(t.Context(), rec.Key, rec.Owner, ans))
	want := completed(rec, ans)
	expectFenced(t, s, rec.Key, rec.Owner, 1, base, base, want)
	expectFenced(t, s, rec.Key, Owner(), 1, base, base, want)
}

func testTombstone(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	ctx, base, rec := t.Context(), res.base, res.rec
	res.append(0, StreamHead(), TextEvents("a", 2))
	noErr(t, "Tombstone", s.Tombstone(ctx, rec.Key, rec.Owner))
	got := MustLoad(t, s, rec.Key, base)
	if got.State != idempotency.StateTombstone || got.Answer != nil {
		t.Fatalf("after Tombstone: State %q, Answer %v; want tombstone and no answer", got.State, got.Answer)
	}
	want := Clone(rec)
	want.State = idempotency.StateTombstone
	if d := DiffRecord(want, got); d != "" {
		t.Fatalf("Load after Tombstone differs:\n%s", d)
	}
	// The key cannot run again while its window lasts.
	ExpectExisting(t, s, NewRecord(rec.Key, base), base.Add(time.Minute), want)
	expectFenced(t, s, rec.Key, rec.Owner, 1, base, base, want)
}

func testRelease(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	ctx, base, rec := t.Context(), res.base, res.rec
	res.append(0, StreamHead(), TextEvents("a", 2))
	noErr(t, "Release", s.Release(ctx, rec.Key, rec.Owner))
	ExpectNotFound(t, s, rec.Key, base)
	wantErr(t, "second Release", s.Release(ctx, rec.Key, rec.Owner), idempotency.ErrNotOwner)

	// A retry runs again: a new reservation, with nothing of the old one.
	next := NewRecord(rec.Key, base.Add(time.Second))
	MustReserve(t, s, next, base.Add(time.Second))
	ExpectRecord(t, s, rec.Key, base.Add(time.Second), next)
	ans := JSONAnswer([]byte(`{"retry":true}`))
	noErr(t, "Complete by the new owner", s.Complete(ctx, next.Key, next.Owner, ans))
	ExpectRecord(t, s, rec.Key, base.Add(time.Second), completed(next, ans))

	// Release of a completed record is refused: its answer stays.
	wantErr(t, "Release after Complete", s.Release(ctx, next.Key, next.Owner), idempotency.ErrNotOwner)
	ExpectRecord(t, s, rec.Key, base.Add(time.Second), completed(next, ans))
}

// testReleaseFencesStaleOwner is Powertools ts#5675: an owner whose record
// was released and reserved again must not delete or complete the new one.
func testReleaseFencesStaleOwner(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	stale := reserved(t, s, base)
	noErr(t, "Release", s.Release(ctx, stale.Key, stale.Owner))
	rec := NewRecord(stale.Key, base)
	MustReserve(t, s, rec, base)
	expectFenced(t, s, rec.Key, stale.Owner, 0, base, base, rec)
}

func testAppendInOrder(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)

	// seq 0 may carry the head alone, before the first event.
	res.append(0, StreamHead(), nil)
	res.expect()

	all := TextEvents("e", 6)
	all[5].Usage = true
	calls := [][]idempotency.Event{all[0:2], all[2:3], all[3:6]}
	for i, evs := range calls {
		res.append(i+1, nil, evs)
		res.expect()
	}
	got := MustLoad(t, s, res.rec.Key, res.base)
	if got.State != idempotency.StateInProgress || got.Answer != nil {
		t.Fatalf("after Append: State %q, Answer %v; want in progress, no answer", got.State, got.Answer)
	}
}

func testAppendRetryIgnored(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	ctx, rec := t.Context(), res.rec
	head := StreamHead()
	for seq := range 3 {
		h := headAt(seq, head)
		evs := TextEvents(fmt.Sprint("call", seq), 2)
		res.append(seq, h, evs)
		// The same call retried right away.
		noErr(t, fmt.Sprintf("Append %d again", seq), s.Append(ctx, rec.Key, rec.Owner, seq, h, evs))
		res.expect()
	}
	// Late retries of earlier calls, even with other content, are ignored.
	other := &idempotency.Head{Status: 500, Header: map[string]string{"X": "y"}}
	noErr(t, "Append 0 late", s.Append(ctx, rec.Key, rec.Owner, 0, other, TextEvents("dup", 1)))
	noErr(t, "Append 1 late", s.Append(ctx, rec.Key, rec.Owner, 1, nil, TextEvents("dup", 3)))
	res.expect()
	// And the next call still applies.
	res.append(3, nil, TextEvents("call3", 1))
	res.expect()
}

func testAppendGap(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	ctx, rec := t.Context(), res.rec
	if err := s.Append(ctx, rec.Key, rec.Owner, 1, StreamHead(), TextEvents("early", 1)); err == nil {
		t.Fatalf("Append 1 before Append 0 succeeded, want an error")
	}
	res.expect()
	res.append(0, StreamHead(), TextEvents("zero", 2))
	if err := s.Append(ctx, rec.Key, rec.Owner, 2, nil, TextEvents("two", 1)); err == nil {
		t.Fatalf("Append 2 before Append 1 succeeded, want an error")
	}
	res.expect()
	res.append(1, nil, TextEvents("one", 1))
	res.expect()
}

func testAppendThenComplete(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	base, rec := res.base, res.rec
	evs := TextEvents("tok", 8)
	res.append(0, StreamHead(), evs[:3])
	res.append(1, nil, evs[3:5])
	// The answer is authoritative: the events not appended yet, another head.
	ans := StreamAnswer(evs)
	ans.Header["X-Gateway-Route-Depth"] = "2"
	noErr(t, "Complete", s.Complete(t.Context(), rec.Key, rec.Owner, ans))
	ExpectRecord(t, s, rec.Key, base, completed(rec, ans))
	ExpectExisting(t, s, NewRecord(rec.Key, base), base, completed(rec, ans))
}

func testLargeAnswers(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	text := make([]byte, 3<<20)
	for i := range text {
		text[i] = "the quick brown fox jumps over the lazy dog "[i%44]
	}
	answers := []struct {
		name string
		ans  *idempotency.Answer
	}{
		{"body_1MiB", JSONAnswer(RandomBytes(1<<20, 11))},
		{"body_3MiB", JSONAnswer(RandomBytes(3<<20, 12))},
		{"body_3MiB_text", JSONAnswer(text)},
		{"stream_5000x300", StreamAnswer(StreamEvents(5000, 300, 13))},
	}
	for _, a := range answers {
		t.Run(a.name, func(t *testing.T) {
			rec := reserved(t, s, base)
			noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, a.ans))
			want := completed(rec, a.ans)
			ExpectRecord(t, s, rec.Key, base, want)
			ExpectExisting(t, s, NewRecord(rec.Key, base), base.Add(time.Second), want)
			// Its end: nothing of it is left to a new reservation.
			now := rec.ExpiresAt.Add(time.Second)
			next := NewRecord(rec.Key, now)
			MustReserve(t, s, next, now)
			small := JSONAnswer([]byte(`{"small":true}`))
			noErr(t, "Complete the next", s.Complete(ctx, next.Key, next.Owner, small))
			ExpectRecord(t, s, rec.Key, now, completed(next, small))
		})
	}
}

func testLargeAppend(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	base, rec := res.base, res.rec
	head, evs := StreamHead(), StreamEvents(5000, 300, 21)
	for seq := range 50 {
		res.append(seq, headAt(seq, head), evs[seq*100:(seq+1)*100])
	}
	res.expect()
	ExpectExisting(t, s, NewRecord(rec.Key, base), base, res.want)
	ans := StreamAnswer(evs)
	noErr(t, "Complete", s.Complete(t.Context(), rec.Key, rec.Owner, ans))
	ExpectRecord(t, s, rec.Key, base, completed(rec, ans))
}

func testAllByteValues(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	header := map[string]string{
		"Content-Type":    "application/json; charset=utf-8",
		"X-Request-Id":    "req-\u00e9\u4e16\U0001F600",
		"X-Empty":         "",
		"X-Quote\"Colon:": "a=b; c=\"d\"\t\\",
	}
	t.Run("body", func(t *testing.T) {
		rec := reserved(t, s, base)
		ans := &idempotency.Answer{Head: idempotency.Head{Status: 200, Header: header}, Body: AllBytes(4)}
		noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
		ExpectRecord(t, s, rec.Key, base, completed(rec, ans))
	})
	t.Run("events", func(t *testing.T) {
		rec := reserved(t, s, base)
		evs := []idempotency.Event{
			{Data: AllBytes(1)},
			{Data: nil},
			{Data: []byte{0}},
			{Data: []byte("\xff\xfe\x00\r\n\r\ndata: x\n\n")},
			{Data: AllBytes(2), Usage: true},
			{Data: []byte("[DONE]")},
			{Name: "message_delta", Data: []byte(`{"type":"message_delta"}`), Usage: true},
			{Name: "ping\xff", Data: nil},
		}
		head := &idempotency.Head{Status: 200, Header: header}
		noErr(t, "Append 0", s.Append(ctx, rec.Key, rec.Owner, 0, head, evs[:3]))
		noErr(t, "Append 1", s.Append(ctx, rec.Key, rec.Owner, 1, nil, evs[3:]))
		want := Clone(rec)
		want.Head, want.Events = head, evs
		ExpectRecord(t, s, rec.Key, base, want)
		ans := &idempotency.Answer{Head: *head, Stream: true, Events: evs}
		noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
		ExpectRecord(t, s, rec.Key, base, completed(rec, ans))
	})
}

func testEmptyAnswers(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	for _, a := range []struct {
		name string
		ans  *idempotency.Answer
	}{
		{"no_body_no_header", &idempotency.Answer{Head: idempotency.Head{Status: 204}}},
		{"empty_body", &idempotency.Answer{Head: idempotency.Head{Status: 200, Header: map[string]string{}}, Body: []byte{}}},
		{"stream_without_events", &idempotency.Answer{Head: idempotency.Head{Status: 200}, Stream: true}},
	} {
		t.Run(a.name, func(t *testing.T) {
			rec := reserved(t, s, base)
			noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, a.ans))
			got := MustLoad(t, s, rec.Key, base)
			if got.Answer == nil {
				t.Fatalf("an empty answer read as no answer (replay unavailable)")
			}
			if d := DiffRecord(completed(rec, a.ans), got); d != "" {
				t.Fatalf("Load differs:\n%s", d)
			}
		})
	}
}

func testNoAliasing(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	rec := NewRecord(Key(), base)
	want := Clone(rec)
	MustReserve(t, s, rec, base)

	head, evs := StreamHead(), TextEvents("a", 3)
	want.Head, want.Events = cloneHead(head), cloneEvents(evs)
	noErr(t, "Append 0", s.Append(ctx, rec.Key, rec.Owner, 0, head, evs))
	// The caller reuses its buffers.
	head.Status = 500
	head.Header["Content-Type"] = "text/plain"
	evs[0].Data[0] = 'X'
	evs[1] = idempotency.Event{Data: []byte("replaced")}
	ExpectRecord(t, s, rec.Key, base, want)

	// A reader scribbles on what it loaded.
	got := MustLoad(t, s, rec.Key, base)
	got.Head.Header["Content-Type"] = "scribbled"
	got.Events[0].Data[0] = 'Y'
	got.Events[2].Usage = true
	ExpectRecord(t, s, rec.Key, base, want)

	ans := StreamAnswer(TextEvents("b", 3))
	ans.Body = []byte("body")
	keep := CloneAnswer(ans)
	noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
	ans.Body[0] = 'X'
	ans.Header["X-Request-Id"] = "changed"
	ans.Events[0].Data[0] = 'X'
	ans.Events = ans.Events[:1]
	ExpectRecord(t, s, rec.Key, base, completed(rec, keep))

	got = MustLoad(t, s, rec.Key, base)
	got.Answer.Body[0] = 'Y'
	got.Answer.Header["X-Request-Id"] = "scribbled"
	got.Answer.Events[1].Data[0] = 'Y'
	ExpectRecord(t, s, rec.Key, base, completed(rec, keep))

	// Reserve's existing record is a copy too.
	other, err := s.Reserve(ctx, NewRecord(rec.Key, base), base)
	noErr(t, "Reserve", err)
	if other == nil || other.Answer == nil {
		t.Fatalf("Reserve returned %v, want the existing record with its answer", other)
	}
	other.Answer.Body[0] = 'Z'
	other.Answer.Events[0].Data[0] = 'Z'
	ExpectRecord(t, s, rec.Key, base, completed(rec, keep))
}

func testConcurrentReserve(t *testing.T, s idempotency.Store) {
	const n = 32
	base := Base()
	key := Key()
	recs := make([]*idempotency.Record, n)
	for i := range recs {
		recs[i] = NewRecord(key, base)
	}
	got, winner := reserveAll(t, s, recs, base)
	checkOneWinner(t, recs, got, winner)
	ExpectRecord(t, s, key, base, recs[winner])
}

func testConcurrentReserveAfterWindow(t *testing.T, s idempotency.Store) {
	const n = 32
	ctx := t.Context()
	base := Base()
	old := reserved(t, s, base)
	noErr(t, "Complete", s.Complete(ctx, old.Key, old.Owner, JSONAnswer([]byte(`{"old":true}`))))
	now := old.ExpiresAt.Add(time.Second)
	recs := make([]*idempotency.Record, n)
	for i := range recs {
		recs[i] = NewRecord(old.Key, now)
	}
	got, winner := reserveAll(t, s, recs, now)
	checkOneWinner(t, recs, got, winner)
	ExpectRecord(t, s, old.Key, now, recs[winner])
}

// reserveAll reserves every record at once and returns what each Reserve
// returned and the index of the (last) one that created its record, or -1.
func reserveAll(t *testing.T, s idempotency.Store, recs []*idempotency.Record, now time.Time) ([]*idempotency.Record, int) {
	t.Helper()
	ctx := t.Context()
	got := make([]*idempotency.Record, len(recs))
	errs := make([]error, len(recs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, rec := range recs {
		arg := Clone(rec)
		wg.Go(func() {
			<-start
			got[i], errs[i] = s.Reserve(ctx, arg, now)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Reserve %d: %v", i, err)
		}
		if got[i] == nil {
			winner = i
		}
	}
	return got, winner
}

func checkOneWinner(t *testing.T, recs, got []*idempotency.Record, winner int) {
	t.Helper()
	wins := 0
	for _, g := range got {
		if g == nil {
			wins++
		}
	}
	if wins != 1 {
		t.Fatalf("%d of %d concurrent Reserves created the record, want exactly 1", wins, len(recs))
	}
	for i, g := range got {
		if i == winner {
			continue
		}
		if d := DiffRecord(recs[winner], g); d != "" {
			t.Fatalf("Reserve %d returned a record that is not the winner's:\n%s", i, d)
		}
	}
}

func testConcurrentHeartbeatsAndComplete(t *testing.T, s idempotency.Store) {
	const n = 20
	ctx := t.Context()
	base := Base()
	rec := reserved(t, s, base)
	ans := StreamAnswer(TextEvents("tok", 50))
	start := make(chan struct{})
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = s.Heartbeat(ctx, rec.Key, rec.Owner, base.Add(time.Duration(i+1)*time.Minute))
		})
	}
	wg.Go(func() {
		<-start
		errs[n] = s.Complete(ctx, rec.Key, rec.Owner, ans)
	})
	close(start)
	wg.Wait()
	noErr(t, "Complete", errs[n])
	for i, err := range errs[:n] {
		// Before the Complete a heartbeat applies; after it, it is refused.
		if err != nil && !errors.Is(err, idempotency.ErrNotOwner) {
			t.Fatalf("Heartbeat %d: %v, want nil or ErrNotOwner", i, err)
		}
	}
	got := MustLoad(t, s, rec.Key, base)
	want := completed(rec, ans)
	if d := got.LeaseUntil.Sub(base); !Equal(got.LeaseUntil, rec.LeaseUntil) && (d < time.Minute || d > n*time.Minute || d%time.Minute != 0) {
		t.Fatalf("LeaseUntil = %s, want the reserved lease or one of the heartbeats'", got.LeaseUntil)
	}
	want.LeaseUntil = got.LeaseUntil // whichever heartbeat came last
	if d := DiffRecord(want, got); d != "" {
		t.Fatalf("Load after the race differs:\n%s", d)
	}
}

func testConcurrentAppendRetries(t *testing.T, s idempotency.Store) {
	const calls, retries = 10, 8
	ctx := t.Context()
	base := Base()
	rec := reserved(t, s, base)
	head := StreamHead()
	want := Clone(rec)
	want.Head = head
	for seq := range calls {
		h := headAt(seq, head)
		evs := TextEvents(fmt.Sprint("call", seq), 2)
		want.Events = append(want.Events, evs...)
		errs := make([]error, retries)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range retries {
			wg.Go(func() {
				<-start
				errs[i] = s.Append(ctx, rec.Key, rec.Owner, seq, h, evs)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			noErr(t, fmt.Sprintf("Append %d, copy %d", seq, i), err)
		}
	}
	ExpectRecord(t, s, rec.Key, base, want)
}

func testKeysIsolated(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	k := Key()
	keys := []string{k, k + "0", k + "1", k[:len(k)-1]} // prefixes of each other
	recs := make([]*idempotency.Record, len(keys))
	for i, key := range keys {
		recs[i] = NewRecord(key, base)
		MustReserve(t, s, recs[i], base)
	}
	// Each key gets a different end.
	head, evs := StreamHead(), StreamEvents(20, 300, 31)
	noErr(t, "Append", s.Append(ctx, keys[0], recs[0].Owner, 0, head, evs))
	ans := StreamAnswer(StreamEvents(1000, 300, 32))
	noErr(t, "Complete", s.Complete(ctx, keys[1], recs[1].Owner, ans))
	noErr(t, "Tombstone", s.Tombstone(ctx, keys[2], recs[2].Owner))
	noErr(t, "Release", s.Release(ctx, keys[3], recs[3].Owner))
	// Another key's owner is another owner.
	wantErr(t, "Complete with the owner of another key", s.Complete(ctx, keys[0], recs[1].Owner, ans), idempotency.ErrNotOwner)

	w0 := Clone(recs[0])
	w0.Head, w0.Events = head, evs
	ExpectRecord(t, s, keys[0], base, w0)
	ExpectRecord(t, s, keys[1], base, completed(recs[1], ans))
	w2 := Clone(recs[2])
	w2.State = idempotency.StateTombstone
	ExpectRecord(t, s, keys[2], base, w2)
	ExpectNotFound(t, s, keys[3], base)
	ExpectNotFound(t, s, k+"2", base)
}

func testMarkStarted(t *testing.T, s idempotency.Store) {
	res := newReservation(t, s)
	ctx, base, rec, want := t.Context(), res.base, res.rec, res.want
	noErr(t, "MarkStarted", s.MarkStarted(ctx, rec.Key, rec.Owner))
	want.Started = true
	res.expect()
	noErr(t, "MarkStarted again", s.MarkStarted(ctx, rec.Key, rec.Owner))
	// Started survives the owner's other writes.
	want.LeaseUntil = base.Add(time.Minute)
	noErr(t, "Heartbeat", s.Heartbeat(ctx, rec.Key, rec.Owner, want.LeaseUntil))
	res.append(0, StreamHead(), TextEvents("a", 2))
	res.expect()
	expectFenced(t, s, rec.Key, Owner(), 1, base, base, want)
	ans := JSONAnswer([]byte(`{"ok":true}`))
	noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
	wantErr(t, "MarkStarted after Complete", s.MarkStarted(ctx, rec.Key, rec.Owner), idempotency.ErrNotOwner)
	ExpectRecord(t, s, rec.Key, base, completed(want, ans))
}

// sameRequest is a new reservation of old's key by a retry of the same
// request: the same fingerprint, a new owner, lease and expiry.
func sameRequest(old *idempotency.Record, now time.Time) *idempotency.Record {
	rec := NewRecord(old.Key, now)
	rec.Fingerprint, rec.Tenant = old.Fingerprint, old.Tenant
	return rec
}

// testTakeOver: a reservation whose owner went away before it started (the
// reserving write landed, its answer and the release were lost) is taken
// over by a retry once its lease lapsed, and the old owner is fenced out.
func testTakeOver(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	for _, withEvents := range []bool{false, true} {
		base := Base()
		old := reserved(t, s, base)
		if withEvents {
			noErr(t, "Append", s.Append(ctx, old.Key, old.Owner, 0, StreamHead(), TextEvents("old", 2)))
		}
		now := old.LeaseUntil.Add(time.Second)
		rec := sameRequest(old, now)
		MustReserve(t, s, rec, now)
		ExpectRecord(t, s, rec.Key, now, rec)
		expectFenced(t, s, rec.Key, old.Owner, 1, base, now, rec)
		// The new owner runs it from seq 0.
		noErr(t, "MarkStarted", s.MarkStarted(ctx, rec.Key, rec.Owner))
		head, evs := StreamHead(), TextEvents("new", 2)
		noErr(t, "Append 0", s.Append(ctx, rec.Key, rec.Owner, 0, head, evs))
		ans := StreamAnswer(evs)
		noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
		want := Clone(rec)
		want.Started = true
		ExpectRecord(t, s, rec.Key, now, completed(want, ans))
	}
}

func testNoTakeOverLive(t *testing.T, s idempotency.Store) {
	base := Base()
	old := reserved(t, s, base)
	for _, now := range []time.Time{base, old.LeaseUntil} { // live until LeaseUntil < now
		ExpectExisting(t, s, sameRequest(old, now), now, old)
	}
}

func testNoTakeOverOtherFingerprint(t *testing.T, s idempotency.Store) {
	base := Base()
	old := reserved(t, s, base)
	now := old.LeaseUntil.Add(time.Minute)
	ExpectExisting(t, s, NewRecord(old.Key, now), now, old)
	ExpectRecord(t, s, old.Key, now, old)
}

func testNoTakeOverStarted(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	old := reserved(t, s, base)
	noErr(t, "MarkStarted", s.MarkStarted(ctx, old.Key, old.Owner))
	want := Clone(old)
	want.Started = true
	now := old.LeaseUntil.Add(time.Minute)
	ExpectExisting(t, s, sameRequest(old, now), now, want)
	ExpectRecord(t, s, old.Key, now, want)
}

func testNoTakeOverEnded(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	done := reserved(t, s, base)
	ans := JSONAnswer([]byte(`{"done":true}`))
	noErr(t, "Complete", s.Complete(ctx, done.Key, done.Owner, ans))
	tomb := reserved(t, s, base)
	noErr(t, "Tombstone", s.Tombstone(ctx, tomb.Key, tomb.Owner))
	wantTomb := Clone(tomb)
	wantTomb.State = idempotency.StateTombstone
	now := base.Add(10 * time.Minute) // both leases lapsed
	ExpectExisting(t, s, sameRequest(done, now), now, completed(done, ans))
	ExpectExisting(t, s, sameRequest(tomb, now), now, wantTomb)
}

func testConcurrentTakeOver(t *testing.T, s idempotency.Store) {
	const n = 16
	base := Base()
	old := reserved(t, s, base)
	now := old.LeaseUntil.Add(time.Second)
	recs := make([]*idempotency.Record, n)
	for i := range recs {
		recs[i] = sameRequest(old, now)
	}
	got, winner := reserveAll(t, s, recs, now)
	checkOneWinner(t, recs, got, winner)
	ExpectRecord(t, s, old.Key, now, recs[winner])
	expectFenced(t, s, old.Key, old.Owner, 0, base, now, recs[winner])
}

func testPoll(t *testing.T, s idempotency.Store) {
	ctx := t.Context()
	base := Base()
	rec := reserved(t, s, base)
	poll := func(owner string, from int) (*idempotency.Record, int) {
		t.Helper()
		got, next, err := s.Poll(ctx, rec.Key, owner, from, base)
		noErr(t, fmt.Sprintf("Poll from %d", from), err)
		return got, next
	}
	got, next := poll(rec.Owner, 0)
	if d := DiffRecord(rec, got); d != "" || next != 0 {
		t.Fatalf("Poll of a new reservation: next %d, differs:\n%s", next, d)
	}
	head := StreamHead()
	batches := [][]idempotency.Event{TextEvents("a", 2), TextEvents("b", 1), TextEvents("c", 3)}
	for seq, evs := range batches {
		noErr(t, "Append", s.Append(ctx, rec.Key, rec.Owner, seq, headAt(seq, head), evs))
	}
	all := slicesConcat(batches...)
	want := Clone(rec)
	want.Head, want.Events = head, all
	got, next = poll(rec.Owner, 0)
	if d := DiffRecord(want, got); d != "" || next != 3 {
		t.Fatalf("Poll from 0: next %d, want 3; differs:\n%s", next, d)
	}
	for from := 1; from <= 3; from++ {
		got, next = poll(rec.Owner, from)
		w := Clone(rec)
		if from < 3 {
			w.Events = slicesConcat(batches[from:]...)
		}
		if d := DiffRecord(w, got); d != "" || next != 3 {
			t.Fatalf("Poll from %d: next %d; differs (want only the events of the calls from %d on, no head):\n%s", from, next, from, d)
		}
	}
	// Another owner's view: the record's own events from the start.
	got, next = poll(Owner(), 2)
	if d := DiffRecord(want, got); d != "" || next != 3 {
		t.Fatalf("Poll by a stale owner: next %d, differs:\n%s", next, d)
	}
	ans := StreamAnswer(all)
	noErr(t, "Complete", s.Complete(ctx, rec.Key, rec.Owner, ans))
	got, _ = poll(rec.Owner, 3)
	if d := DiffRecord(completed(rec, ans), got); d != "" {
		t.Fatalf("Poll of the completed record differs:\n%s", d)
	}
	if _, _, err := s.Poll(ctx, rec.Key, rec.Owner, 0, rec.ExpiresAt.Add(time.Second)); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Poll after the window: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Poll(ctx, Key(), rec.Owner, 0, base); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Poll of a missing key: %v, want ErrNotFound", err)
	}
}

func slicesConcat(parts ...[]idempotency.Event) []idempotency.Event {
	var out []idempotency.Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
