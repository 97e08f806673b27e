package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/testclock"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// newClock is a settable clock for the service, on a whole second.
func newClock() *testclock.Clock { return testclock.New(time.Now().UTC().Truncate(time.Second)) }

func req(key, fp, id string) idempotency.Request {
	return idempotency.Request{Key: key, Fingerprint: fp, RequestID: id, Tenant: "project-1"}
}

func mustBegin(t *testing.T, svc *idempotency.Service, r idempotency.Request) *idempotency.Execution {
	t.Helper()
	exec, rec, err := svc.Begin(t.Context(), r)
	if err != nil || exec == nil {
		t.Fatalf("Begin(%s): exec %v, record %v, error %v; want to own it", r.RequestID, exec != nil, rec, err)
	}
	return exec
}

func mustFind(t *testing.T, svc *idempotency.Service, r idempotency.Request) *idempotency.Record {
	t.Helper()
	exec, rec, err := svc.Begin(t.Context(), r)
	if err != nil || rec == nil {
		t.Fatalf("Begin(%s): exec %v, record %v, error %v; want the existing record", r.RequestID, exec != nil, rec, err)
	}
	return rec
}

func wantCode(t *testing.T, what string, err error, code llm.Code) {
	t.Helper()
	var le *llm.Error
	if !errors.As(err, &le) || le.Code != code {
		t.Fatalf("%s: %v, want an llm.Error %s", what, err, code)
	}
}

// readAll reads a reply's events to its end.
func readAll(ctx context.Context, r *idempotency.Reply) ([]string, error) {
	var out []string
	for {
		ev, err := r.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, string(ev.Data))
	}
}

func jsonAnswer(exec *idempotency.Execution, body string) {
	exec.Start(200, map[string]string{"Content-Type": "application/json", "X-Request-Id": "req_1"}, false)
	exec.Body([]byte(body))
}

// A stored answer replays as a Reply: the same status, headers plus
// Idempotency-Replayed, the same body; a stream's events in order, the
// usage event only when the retry asks for it.
func TestServeReplays(t *testing.T) {
	ctx := t.Context()
	svc := idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil)
	exec := mustBegin(t, svc, req("k1", "fp", "req_1"))
	jsonAnswer(exec, `{"ok":true}`)
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := svc.Serve(ctx, mustFind(t, svc, req("k1", "fp", "req_2")), idempotency.Retry{Fingerprint: "fp"})
	if err != nil || r.Stream || r.Head.Status != 200 || string(r.Body) != `{"ok":true}` ||
		r.Head.Header[idempotency.HeaderReplayed] != "true" || r.Head.Header["X-Request-Id"] != "req_1" {
		t.Fatalf("replay: %+v %v", r, err)
	}
	_, err = svc.Serve(ctx, mustFind(t, svc, req("k1", "other", "req_3")), idempotency.Retry{Fingerprint: "other"})
	wantCode(t, "another request under the key", err, llm.CodeIdempotencyConflict)

	exec = mustBegin(t, svc, req("k2", "fp", "req_4"))
	exec.Start(200, map[string]string{"Content-Type": "text/event-stream"}, true)
	for _, ev := range []idempotency.Event{{Data: []byte("a")}, {Data: []byte("usage"), Usage: true}, {Data: []byte("[DONE]")}} {
		exec.Event(ctx, ev)
	}
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	for _, usage := range []bool{false, true} {
		r, err := svc.Serve(ctx, mustFind(t, svc, req("k2", "fp", "req_5")), idempotency.Retry{Fingerprint: "fp", IncludeUsage: usage})
		if err != nil || !r.Stream {
			t.Fatalf("stream replay: %+v %v", r, err)
		}
		got, err := readAll(ctx, r)
		want := "[a [DONE]]"
		if usage {
			want = "[a usage [DONE]]"
		}
		if err != nil || fmt.Sprint(got) != want {
			t.Fatalf("include_usage %v: events %v %v, want %s", usage, got, err, want)
		}
	}
}

// A retry that joined a stream and then reaches its own deadline gets an
// error wrapping ErrJoinBroken from Next (the caller ends the stream with an
// error event), never a second answer.
func TestJoinerDeadlineAfterStart(t *testing.T) {
	svc := idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil)
	ctx := t.Context()
	exec := mustBegin(t, svc, req("k", "fp", "req_1"))
	defer exec.Fail(ctx)
	exec.Start(200, map[string]string{"Content-Type": "text/event-stream"}, true)
	exec.Event(ctx, idempotency.Event{Data: []byte(`{"a":1}`)})
	rec := mustFind(t, svc, req("k", "fp", "req_2"))
	wctx, cancel := context.WithCancel(ctx)
	r, err := svc.Serve(wctx, rec, idempotency.Retry{Fingerprint: "fp"})
	if err != nil || !r.Stream || r.Head.Status != 200 {
		t.Fatalf("Serve: %+v %v", r, err)
	}
	ev, err := r.Next(wctx)
	if err != nil || string(ev.Data) != `{"a":1}` {
		t.Fatalf("first event %q %v", ev.Data, err)
	}
	cancel() // the retry's deadline
	_, err = r.Next(wctx)
	if !errors.Is(err, idempotency.ErrJoinBroken) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after the deadline: %v, want ErrJoinBroken wrapping the context's error", err)
	}
}

// A joiner of a local stream that fails after it started gets ErrJoinBroken.
func TestJoinerOfFailedStream(t *testing.T) {
	svc := idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil)
	ctx := t.Context()
	exec := mustBegin(t, svc, req("k", "fp", "req_1"))
	exec.Start(200, nil, true)
	exec.Event(ctx, idempotency.Event{Data: []byte("a")})
	r, err := svc.Serve(ctx, mustFind(t, svc, req("k", "fp", "req_2")), idempotency.Retry{Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	exec.Event(ctx, idempotency.Event{Data: []byte("b")})
	if err := exec.Fail(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(ctx, r)
	if fmt.Sprint(got) != "[a b]" || !errors.Is(err, idempotency.ErrJoinBroken) {
		t.Fatalf("events %v, end %v; want a, b, then ErrJoinBroken", got, err)
	}
}

// lossyStore applies a reservation and then reports a failure, as a write
// whose answer was lost does; its Release fails (the store is unreachable).
type lossyStore struct {
	idempotency.Store
	releases atomic.Int32
}

func (s *lossyStore) Reserve(ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	if _, err := s.Store.Reserve(ctx, rec, now); err != nil {
		return nil, err
	}
	return nil, errors.New("connection reset after the write")
}

func (s *lossyStore) Release(context.Context, string, string) error {
	s.releases.Add(1)
	return fmt.Errorf("%w: unreachable", idempotency.ErrUnavailable)
}

// A reservation whose write landed but whose answer was
// lost, and whose Release failed too, does not hold the key for the window:
// a retry after the lease takes it over and runs. While the lease lasts the
// retry waits (it may still be running somewhere).
func TestLostReservationIsTakenOver(t *testing.T) {
	ctx := t.Context()
	c := newClock()
	store := memstore.New(1 << 20)
	lossy := &lossyStore{Store: store}
	cfg := idempotency.Config{Lease: 30 * time.Second, MaxWait: time.Nanosecond, PollInterval: time.Millisecond}
	_, _, err := idempotency.New(lossy, cfg, c.Now, nil).Begin(ctx, req("k", "fp", "req_1"))
	if !errors.Is(err, idempotency.ErrUnavailable) || lossy.releases.Load() != 1 {
		t.Fatalf("Begin: %v (releases %d), want ErrUnavailable after a failed release", err, lossy.releases.Load())
	}
	if rec, err := store.Load(ctx, "k", c.Now()); err != nil || rec.State != idempotency.StateInProgress || rec.Started {
		t.Fatalf("the lost reservation: %+v %v, want in progress, not started", rec, err)
	}

	svc := idempotency.New(store, cfg, c.Now, nil)
	// Within the lease: the retry cannot tell, and answers in progress.
	_, err = svc.Serve(ctx, mustFind(t, svc, req("k", "fp", "req_2")), idempotency.Retry{Fingerprint: "fp"})
	wantCode(t, "a retry within the lease", err, llm.CodeInProgress)

	c.Advance(time.Minute) // the lease lapsed
	exec := mustBegin(t, svc, req("k", "fp", "req_3"))
	if err := exec.MarkStarted(ctx); err != nil {
		t.Fatal(err)
	}
	jsonAnswer(exec, `{"ran":true}`)
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := svc.Serve(ctx, mustFind(t, svc, req("k", "fp", "req_4")), idempotency.Retry{Fingerprint: "fp"})
	if err != nil || string(r.Body) != `{"ran":true}` {
		t.Fatalf("replay after the takeover: %+v %v", r, err)
	}
}

// A retry that waits for a lost reservation on the Serve side also gets to
// run once the lease lapses (ErrRunAgain, then Begin takes it over).
func TestWaiterOfLostReservationRunsAgain(t *testing.T) {
	ctx := t.Context()
	c := newClock()
	store := memstore.New(1 << 20)
	cfg := idempotency.Config{Lease: 30 * time.Second, PollInterval: time.Millisecond}
	_, _, err := idempotency.New(&lossyStore{Store: store}, cfg, c.Now, nil).Begin(ctx, req("k", "fp", "req_1"))
	if !errors.Is(err, idempotency.ErrUnavailable) {
		t.Fatal(err)
	}
	svc := idempotency.New(store, cfg, c.Now, nil)
	rec := mustFind(t, svc, req("k", "fp", "req_2"))
	c.Advance(time.Minute)
	if _, err := svc.Serve(ctx, rec, idempotency.Retry{Fingerprint: "fp"}); !errors.Is(err, idempotency.ErrRunAgain) {
		t.Fatalf("Serve of a lapsed, never started record: %v, want ErrRunAgain", err)
	}
	mustBegin(t, svc, req("k", "fp", "req_3")).Abandon()
}

// A reservation that started and whose owner went away is a tombstone: 409,
// never a second run.
func TestStartedLapsedIsNotRunAgain(t *testing.T) {
	ctx := t.Context()
	c := newClock()
	store := memstore.New(1 << 20)
	cfg := idempotency.Config{Lease: 30 * time.Second, PollInterval: time.Millisecond}
	svc := idempotency.New(store, cfg, c.Now, nil)
	exec := mustBegin(t, svc, req("k", "fp", "req_1"))
	if err := exec.MarkStarted(ctx); err != nil {
		t.Fatal(err)
	}
	exec.Abandon() // the instance died after the provider call
	c.Advance(time.Minute)
	other := idempotency.New(store, cfg, c.Now, nil) // another instance
	_, err := other.Serve(ctx, mustFind(t, other, req("k", "fp", "req_2")), idempotency.Retry{Fingerprint: "fp"})
	wantCode(t, "a retry of a started, lapsed record", err, llm.CodeReplayUnavailable)
}

// An owner whose record was taken over cannot start: MarkStarted is fenced,
// so the provider is never called twice.
func TestTakenOverOwnerCannotStart(t *testing.T) {
	ctx := t.Context()
	c := newClock()
	store := memstore.New(1 << 20)
	cfg := idempotency.Config{Lease: 30 * time.Second}
	slow := mustBegin(t, idempotency.New(store, cfg, c.Now, nil), req("k", "fp", "req_1"))
	defer slow.Abandon()
	c.Advance(time.Minute) // its heartbeats did not get through
	fresh := mustBegin(t, idempotency.New(store, cfg, c.Now, nil), req("k", "fp", "req_2"))
	defer fresh.Abandon()
	if err := slow.MarkStarted(ctx); !errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("MarkStarted of the taken-over owner: %v, want ErrNotOwner", err)
	}
	if err := fresh.MarkStarted(ctx); err != nil {
		t.Fatal(err)
	}
}

// deafStore loses every heartbeat.
type deafStore struct{ idempotency.Store }

func (deafStore) Heartbeat(context.Context, string, string, time.Time) error {
	return idempotency.ErrUnavailable
}

// A running owner on the same instance is followed even when its lease
// lapsed in the store (its heartbeats failed): it started, it is alive and
// will answer.
func TestLocalOwnerOutlivesItsLease(t *testing.T) {
	ctx := t.Context()
	c := newClock()
	svc := idempotency.New(deafStore{memstore.New(1 << 20)}, idempotency.Config{Lease: 30 * time.Second}, c.Now, nil)
	exec := mustBegin(t, svc, req("k", "fp", "req_1"))
	if err := exec.MarkStarted(ctx); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute) // the lease lapses
	rec := mustFind(t, svc, req("k", "fp", "req_2"))
	type result struct {
		r   *idempotency.Reply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := svc.Serve(ctx, rec, idempotency.Retry{Fingerprint: "fp"})
		done <- result{r, err}
	}()
	jsonAnswer(exec, `{"ok":true}`)
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.err != nil || string(got.r.Body) != `{"ok":true}` {
		t.Errorf("the retry of a live local owner: %+v %v", got.r, got.err)
	}
}

// flakyStore fails the end writes (Complete, Tombstone, Release) while down
// is set; with landed, a failing write is applied before it fails (its
// answer lost). It counts heartbeats.
type flakyStore struct {
	idempotency.Store
	down       atomic.Bool
	landed     bool
	heartbeats chan struct{}
}

var errCut = fmt.Errorf("%w: connection refused", idempotency.ErrUnavailable)

func (s *flakyStore) end(write func() error) error {
	if !s.down.Load() {
		return write()
	}
	if s.landed {
		_ = write()
	}
	return errCut
}

func (s *flakyStore) Complete(ctx context.Context, key, owner string, ans *idempotency.Answer) error {
	return s.end(func() error { return s.Store.Complete(ctx, key, owner, ans) })
}

func (s *flakyStore) Tombstone(ctx context.Context, key, owner string) error {
	return s.end(func() error { return s.Store.Tombstone(ctx, key, owner) })
}

func (s *flakyStore) Release(ctx context.Context, key, owner string) error {
	return s.end(func() error { return s.Store.Release(ctx, key, owner) })
}

func (s *flakyStore) Heartbeat(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	err := s.Store.Heartbeat(ctx, key, owner, leaseUntil)
	select {
	case s.heartbeats <- struct{}{}:
	default:
	}
	return err
}

// The end writes are durable. A Complete that fails is
// retried with the same write; meanwhile the lease is renewed and a local
// retry gets the answer at once; a write that landed though its answer was
// lost reads as success. The same for Fail and Release.
func TestEndWritesAreRetryable(t *testing.T) {
	for _, landed := range []bool{false, true} {
		for _, end := range []string{"Complete", "Fail", "Release"} {
			t.Run(fmt.Sprintf("%s/landed=%v", end, landed), func(t *testing.T) {
				ctx := t.Context()
				mem := memstore.New(1 << 20)
				store := &flakyStore{Store: mem, landed: landed, heartbeats: make(chan struct{}, 1)}
				svc := idempotency.New(store, idempotency.Config{Lease: 30 * time.Millisecond}, nil, nil)
				exec := mustBegin(t, svc, req("k", "fp", "req_1"))
				if err := exec.MarkStarted(ctx); err != nil {
					t.Fatal(err)
				}
				jsonAnswer(exec, `{"ok":true}`)
				do := map[string]func(context.Context) error{"Complete": exec.Complete, "Fail": exec.Fail, "Release": exec.Release}[end]
				store.down.Store(true)
				for range 3 {
					if err := do(ctx); !errors.Is(err, idempotency.ErrUnavailable) {
						t.Fatalf("%s while the store is down: %v, want ErrUnavailable", end, err)
					}
				}
				if !landed {
					// The lease is still renewed (once a write landed,
					// there is nothing to renew).
					<-store.heartbeats
					<-store.heartbeats
				}
				if end != "Release" {
					// A local retry has the outcome at once.
					rec := mustFind(t, svc, req("k", "fp", "req_2"))
					r, err := svc.Serve(ctx, rec, idempotency.Retry{Fingerprint: "fp"})
					if end == "Complete" && (err != nil || string(r.Body) != `{"ok":true}`) {
						t.Fatalf("local retry during the outage: %+v %v", r, err)
					}
					if end == "Fail" {
						wantCode(t, "local retry of a failed request", err, llm.CodeReplayUnavailable)
					}
				}
				store.down.Store(false)
				if err := do(ctx); err != nil {
					t.Fatalf("%s once the store is back: %v", end, err)
				}
				if err := do(ctx); err != nil {
					t.Fatalf("%s after it succeeded: %v", end, err)
				}
				rec, err := mem.Load(ctx, "k", time.Now())
				switch end {
				case "Complete":
					if err != nil || rec.State != idempotency.StateCompleted || rec.Answer == nil || string(rec.Answer.Body) != `{"ok":true}` {
						t.Fatalf("after Complete: %+v %v", rec, err)
					}
				case "Fail":
					if err != nil || rec.State != idempotency.StateTombstone {
						t.Fatalf("after Fail: %+v %v", rec, err)
					}
				case "Release":
					if !errors.Is(err, idempotency.ErrNotFound) {
						t.Fatalf("after Release: %+v %v", rec, err)
					}
				}
			})
		}
	}
}

// A keyed stream's in-flight buffer respects
// max_response_bytes. Past it nothing more is kept; a joiner gets what was
// buffered and then ErrJoinBroken; the record is released, so a retry runs.
func TestInFlightBufferIsBounded(t *testing.T) {
	ctx := t.Context()
	store := memstore.New(1 << 20)
	svc := idempotency.New(store, idempotency.Config{MaxResponseBytes: 100, AppendInterval: time.Nanosecond}, nil, nil)
	exec := mustBegin(t, svc, req("k", "fp", "req_1"))
	exec.Start(200, nil, true)
	exec.Event(ctx, idempotency.Event{Data: []byte("0123456789")})
	r, err := svc.Serve(ctx, mustFind(t, svc, req("k", "fp", "req_2")), idempotency.Retry{Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		exec.Event(ctx, idempotency.Event{Data: fmt.Appendf(nil, "event %02d..", i)})
	}
	// Appends run in the background, and stop at the overflow: the store
	// holds at most the few events under the cap (none, when the overflow
	// came before the appender's first batch).
	rec, err := store.Load(ctx, "k", time.Now())
	if err != nil {
		t.Fatal(rec, err)
	}
	if n := len(rec.Events); n > 10 {
		t.Fatalf("%d events appended to the store, want at most the few under the cap", n)
	}
	got, err := readAll(ctx, r)
	if !errors.Is(err, idempotency.ErrJoinBroken) || len(got) == 0 || len(got) > 10 {
		t.Fatalf("joiner: %d events, end %v; want the buffered few and ErrJoinBroken", len(got), err)
	}
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Load(ctx, "k", time.Now()); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("the too large answer's record: %v, want released", err)
	}
}

// A retry on another instance joins a running stream by
// polling; it gets every event once, in order, and the end.
func TestRemoteJoin(t *testing.T) {
	ctx := t.Context()
	store := memstore.New(1 << 20)
	cfg := idempotency.Config{AppendInterval: time.Nanosecond, PollInterval: time.Millisecond}
	owner := idempotency.New(store, cfg, nil, nil)
	joiner := idempotency.New(store, cfg, nil, nil)
	exec := mustBegin(t, owner, req("k", "fp", "req_1"))
	exec.Start(200, map[string]string{"Content-Type": "text/event-stream"}, true)
	exec.Event(ctx, idempotency.Event{Data: []byte("e0")})
	r, err := joiner.Serve(ctx, mustFind(t, joiner, req("k", "fp", "req_2")), idempotency.Retry{Fingerprint: "fp"})
	if err != nil || !r.Stream || r.Head.Header[idempotency.HeaderReplayed] != "true" {
		t.Fatalf("remote join: %+v %v", r, err)
	}
	var want []string
	want = append(want, "e0")
	for i := 1; i < 20; i++ {
		exec.Event(ctx, idempotency.Event{Data: fmt.Appendf(nil, "e%d", i)})
		want = append(want, fmt.Sprintf("e%d", i))
	}
	exec.Event(ctx, idempotency.Event{Data: []byte("usage"), Usage: true})
	exec.Event(ctx, idempotency.Event{Data: []byte("[DONE]")})
	want = append(want, "[DONE]")
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(ctx, r)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("joined events %v %v, want %v", got, err, want)
	}
}

// TestRemoteJoinSeesABurstsTail: a joiner on another instance gets the last
// events of a burst while the provider pauses after it, one append interval
// later at most. Before, events within the interval of the last append
// waited for the provider's next event: here, one that never comes while
// the joiner waits (it read e0, appended at once; e1 and e2 follow within
// the second-long interval, then nothing).
func TestRemoteJoinSeesABurstsTail(t *testing.T) {
	ctx := t.Context()
	store := memstore.New(1 << 20)
	owner := idempotency.New(store, idempotency.Config{AppendInterval: time.Second}, nil, nil)
	joiner := idempotency.New(store, idempotency.Config{PollInterval: time.Millisecond}, nil, nil)
	exec := mustBegin(t, owner, req("k", "fp", "req_1"))
	defer exec.Abandon()
	exec.Start(200, map[string]string{"Content-Type": "text/event-stream"}, true)
	exec.Event(ctx, idempotency.Event{Data: []byte("e0")})
	r, err := joiner.Serve(ctx, mustFind(t, joiner, req("k", "fp", "req_2")), idempotency.Retry{Fingerprint: "fp"})
	if err != nil || !r.Stream {
		t.Fatalf("remote join: %+v %v", r, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next := func(have []string) []string {
		ev, err := r.Next(wctx)
		if err != nil {
			t.Fatalf("the joiner got %v, then %v, while the provider paused", have, err)
		}
		return append(have, string(ev.Data))
	}
	got := next(nil)
	exec.Event(ctx, idempotency.Event{Data: []byte("e1")})
	exec.Event(ctx, idempotency.Event{Data: []byte("e2")})
	got = next(next(got))
	if fmt.Sprint(got) != "[e0 e1 e2]" {
		t.Fatalf("joined events %v, want [e0 e1 e2]", got)
	}
}

// A memory store without room refuses the reservation: Begin's error is
// both ErrUnavailable (a 503) and ErrFull, and nothing is left behind.
func TestBeginWhenStoreFull(t *testing.T) {
	ctx := t.Context()
	store := memstore.New(2000)
	svc := idempotency.New(store, idempotency.Config{}, nil, nil)
	for i := range 100 {
		exec, _, err := svc.Begin(ctx, req(fmt.Sprint("k", i), "fp", "req"))
		if err != nil {
			if !errors.Is(err, idempotency.ErrFull) || !errors.Is(err, idempotency.ErrUnavailable) {
				t.Fatalf("Begin: %v, want ErrFull and ErrUnavailable", err)
			}
			if store.Len() != i {
				t.Fatalf("%d records after %d reservations and a refusal", store.Len(), i)
			}
			return
		}
		defer exec.Abandon()
	}
	t.Fatalf("a 2000-byte store took 100 reservations")
}

// countingStore counts the heartbeats that reach the store.
type countingStore struct {
	idempotency.Store
	heartbeats atomic.Int64
}

func (s *countingStore) Heartbeat(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	s.heartbeats.Add(1)
	return s.Store.Heartbeat(ctx, key, owner, leaseUntil)
}

// The lease is renewed while the request runs, and never once its end
// write landed: the renewal timer is stopped, and a renewal in flight is
// waited for, before Complete returns.
func TestLeaseRenewedUntilTheEnd(t *testing.T) {
	ctx := t.Context()
	store := &countingStore{Store: memstore.New(1 << 20)}
	svc := idempotency.New(store, idempotency.Config{Lease: 6 * time.Millisecond}, nil, nil) // a renewal every 2 ms
	exec := mustBegin(t, svc, req("k", "fp", "req_1"))
	if err := exec.MarkStarted(ctx); err != nil {
		t.Fatal(err)
	}
	for store.heartbeats.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	jsonAnswer(exec, `{"ok":true}`)
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	after := store.heartbeats.Load()
	time.Sleep(30 * time.Millisecond) // fifteen renewal intervals
	if n := store.heartbeats.Load(); n != after {
		t.Fatalf("%d heartbeats after Complete returned", n-after)
	}
}

// reserveSpy is a memory store that notes whether Reserve had a deadline,
// and says it is in process or not.
type reserveSpy struct {
	idempotency.Store
	local    bool
	bounded  atomic.Bool
	reserved atomic.Int64
}

func (s *reserveSpy) InProcess() bool { return s.local }

func (s *reserveSpy) Reserve(ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	_, ok := ctx.Deadline()
	s.bounded.Store(ok)
	s.reserved.Add(1)
	return s.Store.Reserve(ctx, rec, now)
}

// TestBeginBoundsRemoteStoresOnly: the reservation has a deadline of its own
// on a store that is not in this process, none on one that is (the memory
// store says it is), and owns the record either way, even when the
// caller's context has ended (the write is not cut short).
func TestBeginBoundsRemoteStoresOnly(t *testing.T) {
	if !idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil).InProcess() {
		t.Fatal("the memory store's service does not say it is in process")
	}
	for _, local := range []bool{false, true} {
		spy := &reserveSpy{Store: memstore.New(1 << 20), local: local}
		svc := idempotency.New(spy, idempotency.Config{}, nil, nil)
		if svc.InProcess() != local {
			t.Fatalf("InProcess %v, want %v", svc.InProcess(), local)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		exec, _, err := svc.Begin(ctx, req("k", "fp", "req_1"))
		if err != nil || exec == nil {
			t.Fatalf("local %v: Begin: exec %v, error %v", local, exec != nil, err)
		}
		if spy.reserved.Load() != 1 || spy.bounded.Load() == local {
			t.Errorf("local %v: %d reservations, with a deadline: %v", local, spy.reserved.Load(), spy.bounded.Load())
		}
		exec.Abandon()
	}
}

// readSpy records whether the store's reads for a retry (Load, Poll) came
// with a deadline of their own.
type readSpy struct {
	idempotency.Store
	local                bool
	loads, polls         atomic.Int64
	loadBound, pollBound atomic.Bool
}

func (s *readSpy) InProcess() bool { return s.local }

func (s *readSpy) Load(ctx context.Context, key string, now time.Time) (*idempotency.Record, error) {
	_, ok := ctx.Deadline()
	s.loadBound.Store(ok)
	s.loads.Add(1)
	return s.Store.Load(ctx, key, now)
}

func (s *readSpy) Poll(ctx context.Context, key, owner string, from int, now time.Time) (*idempotency.Record, int, error) {
	_, ok := ctx.Deadline()
	s.pollBound.Store(ok)
	s.polls.Add(1)
	return s.Store.Poll(ctx, key, owner, from, now)
}

// TestRetryReadsBoundRemoteStoresOnly: a retry's reads of a store outside
// this process (a kept response's Load, the Poll of a retry waiting on
// another instance's request) each have a deadline of their own, so that a
// store that stops answering costs one bound, not the retry's whole wait;
// in process they have none.
func TestRetryReadsBoundRemoteStoresOnly(t *testing.T) {
	for _, local := range []bool{false, true} {
		store := memstore.New(1 << 20)
		// The first request runs on another instance (its own service).
		first := idempotency.New(store, idempotency.Config{}, nil, nil)
		exec := mustBegin(t, first, req("k", "fp", "req_1"))
		defer exec.Abandon()

		spy := &readSpy{Store: store, local: local}
		svc := idempotency.New(spy, idempotency.Config{MaxWait: 50 * time.Millisecond, PollInterval: 5 * time.Millisecond}, nil, nil)
		if _, err := svc.Kept(t.Context(), "no-such-turn"); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("local %v: Kept: %v", local, err)
		}
		_, rec, err := svc.Begin(t.Context(), req("k", "fp", "req_2"))
		if err != nil || rec == nil {
			t.Fatalf("local %v: the retry's Begin: record %v, error %v", local, rec != nil, err)
		}
		if _, err := svc.Serve(t.Context(), rec, idempotency.Retry{Fingerprint: "fp"}); err == nil {
			t.Fatalf("local %v: Serve answered while the first request still runs", local)
		}
		if spy.loads.Load() == 0 || spy.polls.Load() == 0 {
			t.Fatalf("local %v: %d loads, %d polls; want both", local, spy.loads.Load(), spy.polls.Load())
		}
		if spy.loadBound.Load() == local || spy.pollBound.Load() == local {
			t.Errorf("local %v: load with a deadline %v, poll %v; want %v", local, spy.loadBound.Load(), spy.pollBound.Load(), !local)
		}
	}
}
