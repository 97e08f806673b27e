//go:build integration

package dynamostore_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/testclock"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/storetest"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// fault is what the faulty client does to a call of an operation.
type fault int

const (
	pass       fault = iota
	cut              // the store is unreachable: nothing is sent
	dropAnswer       // the request reaches dynalite and is applied; its answer is lost (a reset)
)

// faults is an HTTP client for the SDK in front of dynalite that injects
// real failures per operation: a cut connection, or a write forwarded and
// applied whose response is dropped (the connection is reset). It also
// counts the response bytes of each operation.
type faults struct {
	mu    sync.Mutex
	rules map[string]fault
	once  map[string]bool // the rule applies to one call only
	bytes map[string]int
}

func newFaults() *faults {
	return &faults{rules: map[string]fault{}, once: map[string]bool{}, bytes: map[string]int{}}
}

func (f *faults) set(op string, x fault, once bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules[op], f.once[op] = x, once
}

func (f *faults) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.rules)
}

func (f *faults) responseBytes(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes[op]
}

func (f *faults) Do(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	f.mu.Lock()
	x := f.rules[op]
	if f.once[op] {
		delete(f.rules, op)
	}
	f.mu.Unlock()
	if x == cut {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if x == dropAnswer {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	f.mu.Lock()
	f.bytes[op] += len(body)
	f.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// faultyStore is a Store on the shared table through f, with no SDK retries
// (a failure is final, as when every retry failed).
func faultyStore(t *testing.T, f *faults, opts ...func(*dynamodb.Options)) *dynamostore.Store {
	opts = append(opts, func(o *dynamodb.Options) { o.HTTPClient = f; o.RetryMaxAttempts = 1 })
	return dynamostore.New(dynalite.Client(t, server.Endpoint(t), opts...), sharedTable(t))
}

func wantCode(t *testing.T, what string, err error, code llm.Code) {
	t.Helper()
	var le *llm.Error
	if !errors.As(err, &le) || le.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// On DynamoDB with real failures: the reserving put lands
// and its answer is lost (the connection is reset), and the release cannot
// reach the store. A retry after the lease takes the reservation over and
// runs; a reservation that started stays a 409.
func TestLostReservationTakenOver(t *testing.T) {
	ctx := t.Context()
	c := testclock.New(storetest.Base())
	cfg := idempotency.Config{Lease: 30 * time.Second, PollInterval: time.Millisecond, MaxWait: time.Nanosecond}
	f := newFaults()
	f.set("PutItem", dropAnswer, true)
	f.set("DeleteItem", cut, false)
	key := storetest.Key()
	r := idempotency.Request{Key: key, Fingerprint: "fp-1", RequestID: "req_1", Tenant: "p"}
	if _, _, err := idempotency.New(faultyStore(t, f), cfg, c.Now, nil).Begin(ctx, r); !errors.Is(err, idempotency.ErrUnavailable) {
		t.Fatalf("Begin with a lost answer and a cut release: %v, want ErrUnavailable", err)
	}
	f.heal()
	store := dynamostore.New(dynalite.Client(t, server.Endpoint(t)), sharedTable(t))
	if rec, err := store.Load(ctx, key, c.Now()); err != nil || rec.State != idempotency.StateInProgress || rec.Started {
		t.Fatalf("the lost reservation: %+v %v; want it landed, in progress, not started", rec, err)
	}
	svc := idempotency.New(store, cfg, c.Now, nil) // another instance

	r.RequestID = "req_2"
	_, rec, err := svc.Begin(ctx, r)
	if err != nil || rec == nil {
		t.Fatalf("a retry within the lease: %v %v, want the record", rec, err)
	}
	_, err = svc.Serve(ctx, rec, idempotency.Retry{Fingerprint: "fp-1"})
	wantCode(t, "a retry within the lease", err, llm.CodeInProgress)

	c.Advance(time.Minute)
	r.RequestID = "req_3"
	exec, rec, err := svc.Begin(ctx, r)
	if err != nil || exec == nil {
		t.Fatalf("a retry after the lease: %v %v, want to take it over", rec, err)
	}
	if err := exec.MarkStarted(ctx); err != nil {
		t.Fatal(err)
	}
	exec.Start(200, map[string]string{"Content-Type": "application/json"}, false)
	exec.Body([]byte(`{"ran":"once"}`))
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	r.RequestID = "req_4"
	_, rec, err = svc.Begin(ctx, r)
	if err != nil || rec == nil {
		t.Fatal(rec, err)
	}
	reply, err := svc.Serve(ctx, rec, idempotency.Retry{Fingerprint: "fp-1"})
	if err != nil || string(reply.Body) != `{"ran":"once"}` {
		t.Fatalf("replay: %+v %v", reply, err)
	}

	// A reservation that started, whose owner died: 409, not run again.
	started := idempotency.Request{Key: storetest.Key(), Fingerprint: "fp-2", RequestID: "req_5", Tenant: "p"}
	exec, _, err = svc.Begin(ctx, started)
	if err != nil || exec == nil {
		t.Fatal(err)
	}
	if err := exec.MarkStarted(ctx); err != nil {
		t.Fatal(err)
	}
	exec.Abandon()
	c.Advance(time.Minute)
	_, rec, err = svc.Begin(ctx, started)
	if err != nil || rec == nil {
		t.Fatalf("a retry of a started, lapsed record: %v %v, want the record", rec, err)
	}
	_, err = svc.Serve(ctx, rec, idempotency.Retry{Fingerprint: "fp-2"})
	wantCode(t, "a retry of a started, lapsed record", err, llm.CodeReplayUnavailable)
}

// Complete on DynamoDB with real failures: the store is
// cut while the answer is completed. Complete fails and is retried with the
// same write; a local retry gets the answer at once; once the store is
// back, Complete lands and a retry on another instance replays it. With a
// lost answer instead of a cut, the write landed: the retry reads success.
func TestDurableComplete(t *testing.T) {
	for _, mode := range []fault{cut, dropAnswer} {
		name := map[fault]string{cut: "cut", dropAnswer: "lost_answer"}[mode]
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			f := newFaults()
			cfg := idempotency.Config{Lease: 30 * time.Second, PollInterval: time.Millisecond}
			local := idempotency.New(faultyStore(t, f), cfg, nil, nil)
			remote := idempotency.New(dynamostore.New(dynalite.Client(t, server.Endpoint(t)), sharedTable(t)), cfg, nil, nil)
			r := idempotency.Request{Key: storetest.Key(), Fingerprint: "fp", RequestID: "req_1", Tenant: "p"}
			exec, _, err := local.Begin(ctx, r)
			if err != nil || exec == nil {
				t.Fatal(err)
			}
			if err := exec.MarkStarted(ctx); err != nil {
				t.Fatal(err)
			}
			exec.Start(200, map[string]string{"Content-Type": "application/json"}, false)
			exec.Body([]byte(`{"billed":true}`))
			f.set("UpdateItem", mode, mode == dropAnswer)
			f.set("Query", cut, false) // the check that follows a refused write cannot read either
			if err := exec.Complete(ctx); !errors.Is(err, idempotency.ErrUnavailable) {
				t.Fatalf("Complete while the store is %s: %v, want ErrUnavailable", name, err)
			}
			if mode == cut {
				if err := exec.Complete(ctx); !errors.Is(err, idempotency.ErrUnavailable) {
					t.Fatalf("Complete again while the store is cut: %v", err)
				}
			}
			// A retry on this instance gets the answer from memory.
			_, rec, err := remote.Begin(ctx, r)
			if err != nil || rec == nil {
				t.Fatal(rec, err)
			}
			reply, err := local.Serve(ctx, rec, idempotency.Retry{Fingerprint: "fp"})
			if err != nil || string(reply.Body) != `{"billed":true}` {
				t.Fatalf("local retry during the outage: %+v %v", reply, err)
			}
			f.heal()
			if err := exec.Complete(ctx); err != nil {
				t.Fatalf("Complete once the store is back: %v", err)
			}
			_, rec, err = remote.Begin(ctx, r)
			if err != nil || rec == nil || rec.State != idempotency.StateCompleted {
				t.Fatalf("after the outage: %+v %v, want the completed record", rec, err)
			}
			reply, err = remote.Serve(ctx, rec, idempotency.Retry{Fingerprint: "fp"})
			if err != nil || string(reply.Body) != `{"billed":true}` {
				t.Fatalf("replay on another instance: %+v %v", reply, err)
			}
		})
	}
}

// A remote waiter's poll reads the record item and only
// the batches it has not seen: one GetItem and one Query, whose answer does
// not grow with what was appended before.
func TestPollReadsOnlyNewEvents(t *testing.T) {
	ctx := t.Context()
	f := newFaults()
	var counter dynalite.Counter
	s := dynamostore.New(dynalite.Client(t, server.Endpoint(t), dynalite.CountCalls(&counter), func(o *dynamodb.Options) { o.HTTPClient = f }), sharedTable(t))
	base := storetest.Base()
	rec := storetest.NewRecord(storetest.Key(), base)
	storetest.MustReserve(t, s, rec, base)
	big := storetest.StreamEvents(1000, 300, 7) // 300 KB that does not compress
	if err := s.Append(ctx, rec.Key, rec.Owner, 0, storetest.StreamHead(), big); err != nil {
		t.Fatal(err)
	}
	small := storetest.TextEvents("new", 2)
	if err := s.Append(ctx, rec.Key, rec.Owner, 1, nil, small); err != nil {
		t.Fatal(err)
	}

	counter.Reset()
	before := f.responseBytes("Query") + f.responseBytes("GetItem")
	got, next, err := s.Poll(ctx, rec.Key, rec.Owner, 1, base)
	if err != nil || next != 2 || storetest.DiffEvents(small, got.Events) != "" || got.Head != nil {
		t.Fatalf("Poll from 1: next %d, %d events, head %v, %v", next, len(got.Events), got.Head != nil, err)
	}
	pollBytes := f.responseBytes("Query") + f.responseBytes("GetItem") - before
	if calls := counter.Snapshot(); calls["GetItem"] != 1 || calls["Query"] != 1 || counter.Total() != 2 {
		t.Fatalf("Poll calls %v, want one GetItem and one Query", calls)
	}
	before = f.responseBytes("Query")
	if _, err := s.Load(ctx, rec.Key, base); err != nil {
		t.Fatal(err)
	}
	loadBytes := f.responseBytes("Query") - before
	t.Logf("Poll of the new batch: %d bytes read; Load of the record: %d bytes", pollBytes, loadBytes)
	if pollBytes > 10_000 || loadBytes < 300_000 {
		t.Fatalf("Poll read %d bytes and Load %d: the poll re-read what the waiter had seen", pollBytes, loadBytes)
	}
	// Nothing new: the same two calls, and no events.
	counter.Reset()
	got, next, err = s.Poll(ctx, rec.Key, rec.Owner, 2, base)
	if err != nil || next != 2 || len(got.Events) != 0 || counter.Total() != 2 {
		t.Fatalf("idle Poll: next %d, %d events, %d calls, %v", next, len(got.Events), counter.Total(), err)
	}
}

// A retry on another instance joins a running stream through DynamoDB: it
// gets every event once, in order.
func TestRemoteJoinOnDynamo(t *testing.T) {
	ctx := t.Context()
	table := sharedTable(t)
	cfg := idempotency.Config{AppendInterval: time.Nanosecond, PollInterval: time.Millisecond}
	owner := idempotency.New(dynamostore.New(dynalite.Client(t, server.Endpoint(t)), table), cfg, nil, nil)
	joiner := idempotency.New(dynamostore.New(dynalite.Client(t, server.Endpoint(t)), table), cfg, nil, nil)
	r := idempotency.Request{Key: storetest.Key(), Fingerprint: "fp", RequestID: "req_1", Tenant: "p"}
	exec, _, err := owner.Begin(ctx, r)
	if err != nil || exec == nil {
		t.Fatal(err)
	}
	exec.Start(200, map[string]string{"Content-Type": "text/event-stream"}, true)
	exec.Event(ctx, idempotency.Event{Data: []byte("e0")})
	_, rec, err := joiner.Begin(ctx, r)
	if err != nil || rec == nil {
		t.Fatal(rec, err)
	}
	var wg sync.WaitGroup
	var got []string
	var end atomic.Value
	wg.Go(func() {
		reply, err := joiner.Serve(ctx, rec, idempotency.Retry{Fingerprint: "fp"})
		if err != nil {
			end.Store(err)
			return
		}
		for {
			ev, err := reply.Next(ctx)
			if err != nil {
				end.Store(err)
				return
			}
			got = append(got, string(ev.Data))
		}
	})
	want := []string{"e0"}
	for _, d := range []string{"e1", "e2", "e3", "[DONE]"} {
		exec.Event(ctx, idempotency.Event{Data: []byte(d)})
		want = append(want, d)
	}
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if e, _ := end.Load().(error); !errors.Is(e, io.EOF) || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("joined %v, end %v; want %v and io.EOF", got, e, want)
	}
}
