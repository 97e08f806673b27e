package gateway

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// cannedProvider answers every call with one text chunk and the end.
type cannedProvider struct{ calls atomic.Int64 }

func (p *cannedProvider) Name() string   { return "p" }
func (p *cannedProvider) Caps() llm.Caps { return llm.Caps{} }

func (p *cannedProvider) ChatStream(context.Context, *llm.UpstreamRequest) (llm.ChunkStream, error) {
	p.calls.Add(1)
	var chunks []llm.Chunk
	for _, raw := range []string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"u","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"u","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
	} {
		ch, err := llm.ParseChunk([]byte(raw))
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, ch)
	}
	return &sliceStream{chunks: chunks}, nil
}

type sliceStream struct {
	llm.NoReports
	chunks []llm.Chunk
}

func (s *sliceStream) Next() (llm.Chunk, error) {
	if len(s.chunks) == 0 {
		return llm.Chunk{}, io.EOF
	}
	ch := s.chunks[0]
	s.chunks = s.chunks[1:]
	return ch, nil
}

func (s *sliceStream) Close() error { return nil }

// namedCodec writes every chunk as a named event, as Messages and
// Responses streams do.
type namedCodec struct{}

func (namedCodec) Answer(ans *router.Answer, out Emitter) Result {
	out.Start(200, map[string]string{"Content-Type": "text/event-stream"}, true)
	out.Event(idempotency.Event{Name: "start", Data: []byte(`{"type":"start"}`)}, true)
	for {
		ch, err := ans.Next()
		if err != nil {
			break
		}
		out.Event(idempotency.Event{Name: "delta", Data: ch.Raw}, true)
	}
	out.Price(ans.Usage())
	out.Event(idempotency.Event{Name: "stop", Data: []byte(`{"type":"stop"}`)}, true)
	return Result{Usage: ans.Usage(), Answered: true}
}

func (namedCodec) JoinBroken(reason string) idempotency.Event {
	return idempotency.Event{Name: "error", Data: []byte(reason)}
}

// noTuning gives a test's Writer the rest of a Client: no keep-alive, no
// flush hint, writes without deadlines, nothing to abort.
type noTuning struct{}

func (noTuning) KeepAlive() (stop func()) { return func() {} }
func (noTuning) SetMore(Backlog)          {}
func (noTuning) WritesBounded() bool      { return false }
func (noTuning) Abort()                   {}

type recordingWriter struct {
	noTuning
	status int
	header map[string]string
	events []idempotency.Event
	err    error
}

func (w *recordingWriter) Error(err error) { w.err = err }
func (w *recordingWriter) Start(status int, header map[string]string, _ bool) {
	w.status, w.header = status, header
}
func (w *recordingWriter) Body([]byte) error { return nil }
func (w *recordingWriter) Event(name string, data []byte) error {
	w.events = append(w.events, idempotency.Event{Name: name, Data: append([]byte(nil), data...)})
	return nil
}

// TestNamedEventsReplay: a keyed stream's named events are recorded and a
// retry replays them, names included, without a second provider call; the
// answer is billed once.
func TestNamedEventsReplay(t *testing.T) {
	cfg, rt, plan, chat, prov := cannedSetup(t)
	ledger := memledger.New(memledger.Options{})
	fin := NewFinisher(FinisherOptions{})
	svc := New(Config{}, rt, idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil), Accounts{Ledger: ledger}, fin, nil, nil)
	caller := &Caller{Project: &cfg.Projects[0], BillingKeyID: "k"}
	run := func(id string) *recordingWriter {
		w := &recordingWriter{}
		runAdmitted(svc, context.Background(), &Request{ID: id, Caller: caller, Model: "m", Plan: plan, Chat: chat,
			IdempotencyKey: "key", Fingerprint: "fp", Log: &Log{}}, w, namedCodec{})
		return w
	}
	first, retry := run("req_1"), run("req_2")
	if first.err != nil || first.status != 200 || len(first.events) != 3 {
		t.Fatalf("first: %v %d, %d events", first.err, first.status, len(first.events))
	}
	if diff := cmp.Diff(first.events, retry.events); diff != "" || retry.header[idempotency.HeaderReplayed] != "true" {
		t.Errorf("replay (-first +retry):\n%s\nheader %v", diff, retry.header)
	}
	if n := prov.calls.Load(); n != 1 {
		t.Errorf("provider calls %d, want 1", n)
	}
	fin.Wait(context.Background())
	acct, err := ledger.Account(context.Background(), "proj", "k")
	if err != nil || acct.SpentNanos != 5000 {
		t.Errorf("spend %d (%v), want 3 prompt + 1 completion tokens = 5000 nano-USD", acct.SpentNanos, err)
	}
}

// deadlineLedger is a memory ledger that notes, per call, whether the call
// had a deadline of its own (at most a minute away: the request's own is an
// hour), and says it is in process or not.
type deadlineLedger struct {
	billing.Ledger
	local bool
	mu    sync.Mutex
	seen  map[string]bool // call -> bounded
}

func (l *deadlineLedger) InProcess() bool { return l.local }

func (l *deadlineLedger) note(ctx context.Context, call string) {
	d, ok := ctx.Deadline()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[call] = ok && time.Until(d) <= time.Minute
}

func (l *deadlineLedger) Account(ctx context.Context, project, keyID string) (billing.Account, error) {
	l.note(ctx, "Account")
	return l.Ledger.Account(ctx, project, keyID)
}

func (l *deadlineLedger) Hold(ctx context.Context, h billing.Hold) error {
	l.note(ctx, "Hold")
	return l.Ledger.Hold(ctx, h)
}

func (l *deadlineLedger) Price(ctx context.Context, e billing.Entry) error {
	l.note(ctx, "Price")
	return l.Ledger.Price(ctx, e)
}

func (l *deadlineLedger) Bill(ctx context.Context, e billing.Entry) error {
	l.note(ctx, "Bill")
	return l.Ledger.Bill(ctx, e)
}

// TestStoreCallsBoundedUnlessInProcess: every call to a ledger that is not in
// this process has a deadline of its own, so that a store that does not
// answer cannot hold a request for its whole ceiling; a ledger in process
// (the memory ledger) gets none, and its calls work all the same (the
// answer is billed).
func TestStoreCallsBoundedUnlessInProcess(t *testing.T) {
	if ip, ok := any(memledger.New(memledger.Options{})).(interface{ InProcess() bool }); !ok || !ip.InProcess() {
		t.Fatal("the memory ledger does not say it is in process")
	}
	if !idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil).InProcess() {
		t.Fatal("the memory idempotency store does not say it is in process")
	}
	cfg, rt, plan, chat, _ := cannedSetup(t)
	for _, local := range []bool{false, true} {
		ledger := &deadlineLedger{Ledger: memledger.New(memledger.Options{}), local: local, seen: map[string]bool{}}
		fin := NewFinisher(FinisherOptions{})
		svc := New(Config{RequestTimeout: time.Hour}, rt, nil, Accounts{Ledger: ledger}, fin, nil, nil)
		w := &recordingWriter{}
		runAdmitted(svc, context.Background(), &Request{ID: "req_1", Caller: &Caller{Project: &cfg.Projects[0], BillingKeyID: "k"},
			Model: "m", Plan: plan, Chat: chat, Log: &Log{}}, w, namedCodec{})
		if w.err != nil || w.status != 200 {
			t.Fatalf("local %v: %v %d", local, w.err, w.status)
		}
		fin.Wait(context.Background())
		want := map[string]bool{"Account": !local, "Hold": !local, "Price": !local, "Bill": !local}
		if diff := cmp.Diff(want, ledger.seen); diff != "" {
			t.Errorf("local %v: calls with a deadline of their own (-want +got):\n%s", local, diff)
		}
		acct, err := ledger.Account(context.Background(), "proj", "k")
		if err != nil || acct.SpentNanos != 5000 {
			t.Errorf("local %v: spend %d (%v), want 5000", local, acct.SpentNanos, err)
		}
	}
}

// cannedSetup is a config with one project and one model routed to a
// cannedProvider, and a plan for a streaming request to it.
func cannedSetup(t *testing.T) (*catalog.Config, *router.Router, *router.Plan, *llm.ChatRequest, *cannedProvider) {
	t.Helper()
	cfg, err := catalog.Parse([]byte(`providers:
  - {name: p, api: openai, base_url: "http://127.0.0.1:1/v1"}
models:
  - id: m
    routes: [{provider: p, model: u, input_price: 1, output_price: 2}]
projects:
  - id: proj
    keys: [{key: sk-test}]
`))
	if err != nil {
		t.Fatal(err)
	}
	prov := &cannedProvider{}
	rt, err := router.New(cfg, map[string]llm.Provider{"p": prov}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	chat, err := llm.DecodeChatRequest([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := rt.Plan(router.TargetOf(chat), router.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, rt, plan, chat, prov
}

// downLedger is a memory ledger whose Bill cannot reach its store.
type downLedger struct{ billing.Ledger }

func (l *downLedger) Bill(context.Context, billing.Entry) error { return billing.ErrUnavailable }

// TestBillRetryKeepsOnlyTheEntry: a bill the Finisher retries (the ledger
// unreachable, for up to half an hour) keeps the ledger entry alive and
// nothing else of its request: its writer (and with it the upstream stream
// and, for a keyed request, the recorded answer) is collected.
func TestBillRetryKeepsOnlyTheEntry(t *testing.T) {
	cfg, rt, plan, chat, _ := cannedSetup(t)
	for _, keyed := range []bool{false, true} {
		fin := NewFinisher(FinisherOptions{MinBackoff: time.Hour, MaxBackoff: time.Hour})
		svc := New(Config{}, rt, idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil),
			Accounts{Ledger: &downLedger{memledger.New(memledger.Options{})}}, fin, nil, nil)
		collected := make(chan struct{})
		func() {
			w := &recordingWriter{}
			runtime.SetFinalizer(w, func(*recordingWriter) { close(collected) })
			req := &Request{ID: "req_1", Caller: &Caller{Project: &cfg.Projects[0], BillingKeyID: "k"},
				Model: "m", Plan: plan, Chat: chat, Log: &Log{}}
			if keyed {
				req.IdempotencyKey, req.Fingerprint = "key", "fp"
			}
			runAdmitted(svc, context.Background(), req, w, namedCodec{})
			if w.err != nil || w.status != 200 {
				t.Fatalf("keyed %v: %v %d", keyed, w.err, w.status)
			}
		}()
		if n := fin.Pending(); n != 1 {
			t.Fatalf("keyed %v: %d steps retried, want the bill", keyed, n)
		}
		// Finalizers run after a collection finds the writer unreachable.
		gone := false
		for range 200 {
			runtime.GC()
			select {
			case <-collected:
				gone = true
			case <-time.After(10 * time.Millisecond):
			}
			if gone {
				break
			}
		}
		if !gone {
			t.Errorf("keyed %v: the request's writer is still reachable while its bill is retried", keyed)
		}
		stopped, cancel := context.WithCancel(context.Background())
		cancel()
		fin.Drain(stopped)
	}
}

// silentStore is a memory store that the service takes for one outside the
// process, and whose reads for a retry (Load, Poll) never answer: a store
// that stopped answering.
type silentStore struct{ *memstore.Store }

func (silentStore) InProcess() bool { return false }

func (silentStore) Load(ctx context.Context, _ string, _ time.Time) (*idempotency.Record, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (silentStore) Poll(ctx context.Context, _, _ string, _ int, _ time.Time) (*idempotency.Record, int, error) {
	<-ctx.Done()
	return nil, 0, ctx.Err()
}

// TestRetryStoreReadTimeoutIsUnavailable: a retry whose read of the store
// times out (its own bound, the store silent) is 503 store_unavailable;
// only the retry's wait running out means the first request is still
// running (409 idempotency_in_progress). Neither calls a provider.
func TestRetryStoreReadTimeoutIsUnavailable(t *testing.T) {
	cfg, rt, plan, chat, prov := cannedSetup(t)
	for _, tc := range []struct {
		name        string
		wait, bound time.Duration
		want        llm.Code
	}{
		{"a read times out", time.Hour, 20 * time.Millisecond, llm.CodeStoreUnavailable},
		{"the wait runs out", 50 * time.Millisecond, time.Hour, llm.CodeInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memstore.New(1 << 20)
			caller := &Caller{Project: &cfg.Projects[0], BillingKeyID: "k"}
			req := &Request{ID: "req_retry", Caller: caller, Model: "m", Plan: plan, Chat: chat, Log: &Log{},
				IdempotencyKey: "key-1", Fingerprint: "fp"}
			// The first request runs on another instance.
			first := idempotency.New(mem, idempotency.Config{}, nil, nil)
			ident := idempotency.Identity(caller.Project.ID, caller.KeyHash, req.Scope+req.IdempotencyKey, req.Demand.String(), caller.Residency())
			exec, rec, err := first.Begin(context.Background(), idempotency.Request{Key: ident, Fingerprint: "fp", RequestID: "req_first", Tenant: caller.Project.ID})
			if err != nil || exec == nil || rec != nil {
				t.Fatalf("the first request's Begin: exec %v, record %v, error %v", exec != nil, rec != nil, err)
			}
			defer exec.Abandon()

			idem := idempotency.New(silentStore{mem}, idempotency.Config{StoreTimeout: tc.bound}, nil, nil)
			fin := NewFinisher(FinisherOptions{})
			svc := New(Config{RequestTimeout: tc.wait}, rt, idem, Accounts{}, fin, nil, nil)
			w := &recordingWriter{}
			calls := prov.calls.Load()
			runAdmitted(svc, context.Background(), req, w, namedCodec{})
			fin.Wait(context.Background())
			if got := llm.AsError(w.err).Code; got != tc.want {
				t.Errorf("the retry answered %q (%v), want %q", got, w.err, tc.want)
			}
			if n := prov.calls.Load() - calls; n != 0 {
				t.Errorf("%d provider calls, want none", n)
			}
		})
	}
}

// goneWriter is a client that left: every write fails.
type goneWriter struct{ recordingWriter }

func (w *goneWriter) Event(string, []byte) error { return errors.New("broken pipe") }

// TestReplayToAGoneClientIsLogged: a replay whose client is gone (its
// writes fail) says so in the request's log (499, end client_gone), as a
// first call's does; before, its line was a plain 200.
func TestReplayToAGoneClientIsLogged(t *testing.T) {
	cfg, rt, plan, chat, _ := cannedSetup(t)
	svc := New(Config{}, rt, idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil), Accounts{}, nil, nil, nil)
	caller := &Caller{Project: &cfg.Projects[0], BillingKeyID: "k"}
	run := func(id string, w Client) *Log {
		log := &Log{}
		runAdmitted(svc, context.Background(), &Request{ID: id, Caller: caller, Model: "m", Plan: plan, Chat: chat,
			IdempotencyKey: "key", Fingerprint: "fp", Log: log}, w, namedCodec{})
		return log
	}
	if first := run("req_1", &recordingWriter{}); first.ClientGone {
		t.Fatal("the first call's client was taken for gone")
	}
	if retry := run("req_2", &goneWriter{}); !retry.ClientGone {
		t.Errorf("a replay whose client's writes fail: ClientGone false")
	}
	if again := run("req_3", &recordingWriter{}); again.ClientGone {
		t.Errorf("a replay to a client that reads: ClientGone true")
	}
}

// runAdmitted admits req as the HTTP layer does, then runs it.
func runAdmitted(svc *Service, ctx context.Context, req *Request, w Client, codec Codec) {
	slot, err := svc.Admit(req.Caller)
	if err != nil {
		w.Error(err)
		return
	}
	defer slot.Release()
	svc.Run(ctx, req, &slot, w, codec)
}
