package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// fake is a scripted in-memory provider: call i gets script[i] (the last
// entry repeats).
type fake struct {
	name   string
	mu     sync.Mutex
	calls  int
	script []step
	// caps is what Caps says; nCaps counts its calls.
	caps  llm.Caps
	nCaps int
	// reqs are the requests of the calls, in order.
	reqs []*llm.UpstreamRequest
}

type step struct {
	err    error         // returned by ChatStream
	hang   bool          // ChatStream blocks until ctx ends
	before []string      // chunks with no output, sent first
	out    []string      // output texts
	finish string        // finish_reason of the last chunk ("" = none)
	end    error         // what Next returns at the end (nil = io.EOF)
	delay  time.Duration // before the first output chunk
}

func (f *fake) Name() string { return f.name }

func (f *fake) Caps() llm.Caps {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nCaps++
	return f.caps
}

func (f *fake) ChatStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	f.mu.Lock()
	f.calls++
	f.reqs = append(f.reqs, req)
	s := f.script[min(f.calls-1, len(f.script)-1)]
	f.mu.Unlock()
	if s.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if s.err != nil {
		return nil, s.err
	}
	var chunks []string
	chunks = append(chunks, s.before...)
	for _, o := range s.out {
		chunks = append(chunks, fmt.Sprintf(`{"id":"x","choices":[{"index":0,"delta":{"content":%q}}]}`, o))
	}
	if s.finish != "" {
		chunks = append(chunks, fmt.Sprintf(`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":%q}]}`, s.finish))
		chunks = append(chunks, `{"id":"x","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}}`)
	}
	return &fakeStream{ctx: ctx, chunks: chunks, end: s.end, delay: s.delay, nBefore: len(s.before)}, nil
}

func (f *fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

type fakeStream struct {
	llm.NoReports
	ctx     context.Context
	chunks  []string
	i       int
	nBefore int
	end     error
	delay   time.Duration
}

func (s *fakeStream) Next() (llm.Chunk, error) {
	if s.i == s.nBefore && s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-s.ctx.Done():
			return llm.Chunk{}, s.ctx.Err()
		}
	}
	if s.i >= len(s.chunks) {
		if s.end != nil {
			return llm.Chunk{}, s.end
		}
		return llm.Chunk{}, io.EOF
	}
	s.i++
	return llm.ParseChunk([]byte(s.chunks[s.i-1]))
}

func (s *fakeStream) Close() error { return nil }

var (
	ok       = step{before: []string{`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`}, out: []string{"Hel", "lo"}, finish: "stop"}
	fail500  = step{err: &llm.ProviderError{Class: llm.FailTransient, Status: 500}}
	throttle = step{err: &llm.ProviderError{Class: llm.FailThrottled, Status: 429, RetryAfter: 3 * time.Second}}
	reject   = step{err: &llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "bad tool schema"}}
)

type world struct {
	cfg   *catalog.Config
	fakes map[string]*fake
	r     *Router
}

// newWorld builds a config with providers a, b, c, d (c in the eu with zero
// retention, d collects no data) and model "m" routed a, b, c, d, with
// prices that make d the cheapest and a the dearest.
func newWorld(t *testing.T, scripts map[string][]step, mutate ...func(*catalog.Config)) *world {
	t.Helper()
	yaml := `
providers:
  - {name: a, api: simulated, region: us, first_token_timeout: 200ms}
  - {name: b, api: simulated, region: us}
  - {name: c, api: simulated, region: eu, zdr: true}
  - {name: d, api: simulated, region: eu, data_collection: deny}
models:
  - id: m
    routes:
      - {provider: a, model: ua, input_price: 4, output_price: 4}
      - {provider: b, model: ub, input_price: 3, output_price: 3}
      - {provider: c, model: uc, input_price: 2, output_price: 2}
      - {provider: d, model: ud, input_price: 1, output_price: 1}
projects:
  - id: p
    keys: [{key: sk-test-123456}]
health: {failure_threshold: 3, cooldown: 1m}
`
	cfg, err := catalog.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutate {
		m(cfg)
	}
	w := &world{cfg: cfg, fakes: map[string]*fake{}}
	providers := map[string]llm.Provider{}
	for _, n := range []string{"a", "b", "c", "d"} {
		s := scripts[n]
		if s == nil {
			s = []step{ok}
		}
		w.fakes[n] = &fake{name: n, script: s}
		providers[n] = w.fakes[n]
	}
	w.r, err = New(cfg, providers, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) calls() map[string]int {
	out := map[string]int{}
	for n, f := range w.fakes {
		if c := f.Calls(); c > 0 {
			out[n] = c
		}
	}
	return out
}

func decode(t *testing.T, body string) *llm.ChatRequest {
	t.Helper()
	req, err := llm.DecodeChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

const plain = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

func withGateway(g string) string {
	return `{"model":"m","messages":[{"role":"user","content":"hi"}],` + g + `}`
}

func TestStart(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		policy    Policy
		scripts   map[string][]step
		provider  string // the answering provider, or "" for an error
		depth     int
		code      llm.Code // the error's code
		calls     map[string]int
		retryHint bool
	}{
		{name: "first provider answers", body: plain, provider: "a", depth: 0, calls: map[string]int{"a": 1}},
		{name: "5xx falls back", body: plain, scripts: map[string][]step{"a": {fail500}}, provider: "b", depth: 1, calls: map[string]int{"a": 1, "b": 1}},
		{name: "stream cut before output falls back", body: plain,
			scripts:  map[string][]step{"a": {{before: ok.before, end: llm.ErrStreamCut}}},
			provider: "b", depth: 1, calls: map[string]int{"a": 1, "b": 1}},
		{name: "error event before output falls back", body: plain,
			scripts:  map[string][]step{"a": {{before: ok.before, end: &llm.ProviderError{Class: llm.FailTransient, Message: "boom"}}}},
			provider: "b", depth: 1, calls: map[string]int{"a": 1, "b": 1}},
		{name: "[DONE] with no output falls back", body: plain,
			scripts:  map[string][]step{"a": {{before: ok.before}}},
			provider: "b", depth: 1, calls: map[string]int{"a": 1, "b": 1}},
		{name: "first token timeout falls back", body: plain,
			scripts:  map[string][]step{"a": {{before: ok.before, out: []string{"late"}, finish: "stop", delay: 2 * time.Second}}},
			provider: "b", depth: 1, calls: map[string]int{"a": 1, "b": 1}},
		{name: "hang before headers times out and falls back", body: plain,
			scripts:  map[string][]step{"a": {{hang: true}}},
			provider: "b", depth: 1, calls: map[string]int{"a": 1, "b": 1}},
		{name: "refusal is output: no fallback", body: plain,
			scripts:  map[string][]step{"a": {{before: []string{`{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`}, finish: "stop"}}},
			provider: "a", depth: 0, calls: map[string]int{"a": 1}},
		{name: "finish with no output is an answer", body: plain,
			scripts:  map[string][]step{"a": {{finish: "content_filter"}}},
			provider: "a", depth: 0, calls: map[string]int{"a": 1}},
		{name: "provider 400 stops", body: plain, scripts: map[string][]step{"a": {reject}}, code: llm.CodeProviderRejected, calls: map[string]int{"a": 1}},
		{name: "all fail is 502, each called once", body: plain,
			scripts: map[string][]step{"a": {fail500}, "b": {fail500}, "c": {fail500}, "d": {fail500}},
			code:    llm.CodeAllProvidersFailed, calls: map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}},
		{name: "all throttled is 429 unavailable_route after per-route retries", body: withGateway(`"gateway":{"retry":{"backoff":0}}`),
			scripts: map[string][]step{"a": {throttle}, "b": {throttle}, "c": {throttle}, "d": {throttle}},
			code:    llm.CodeUnavailableRoute, retryHint: true, calls: map[string]int{"a": 2, "b": 2, "c": 2, "d": 2}},
		{name: "throttled provider called again after backoff", body: withGateway(`"gateway":{"retry":{"backoff":"10ms"}}`),
			scripts:  map[string][]step{"a": {throttle, ok}, "b": {fail500}, "c": {fail500}, "d": {fail500}},
			provider: "a", depth: 0, calls: map[string]int{"a": 2, "b": 1, "c": 1, "d": 1}},
		{name: "max_attempts_per_route 1 means no second call", body: withGateway(`"gateway":{"retry":{"backoff":0,"max_attempts_per_route":1}}`),
			scripts: map[string][]step{"a": {throttle, ok}, "b": {fail500}, "c": {fail500}, "d": {fail500}},
			code:    llm.CodeAllProvidersFailed, calls: map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}},
		{name: "max_attempts_per_route 4 caps a throttled provider at 4", body: withGateway(`"gateway":{"retry":{"backoff":0,"max_attempts_per_route":4}}`),
			scripts: map[string][]step{"a": {throttle}, "b": {fail500}, "c": {fail500}, "d": {fail500}},
			code:    llm.CodeAllProvidersFailed, calls: map[string]int{"a": 4, "b": 1, "c": 1, "d": 1}},
		{name: "mixed throttle and failure is 502", body: withGateway(`"gateway":{"retry":{"backoff":0,"max_attempts_per_route":1}}`),
			scripts: map[string][]step{"a": {throttle}, "b": {fail500}, "c": {fail500}, "d": {fail500}},
			code:    llm.CodeAllProvidersFailed, calls: map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}},
		{name: "max_total_attempts caps calls", body: withGateway(`"gateway":{"retry":{"max_total_attempts":2}}`),
			scripts: map[string][]step{"a": {fail500}, "b": {fail500}, "c": {fail500}, "d": {fail500}},
			code:    llm.CodeAllProvidersFailed, calls: map[string]int{"a": 1, "b": 1}},
		{name: "eight calls at most", body: withGateway(`"gateway":{"retry":{"backoff":0,"max_attempts_per_route":4}}`),
			scripts: map[string][]step{"a": {throttle}, "b": {throttle}, "c": {throttle}, "d": {throttle}},
			code:    llm.CodeUnavailableRoute, retryHint: true, calls: map[string]int{"a": 2, "b": 2, "c": 2, "d": 2}},
		{name: "gateway allow_fallbacks false: first only", body: withGateway(`"gateway":{"routing":{"allow_fallbacks":false}}`),
			scripts: map[string][]step{"a": {fail500}}, code: llm.CodeAllProvidersFailed, calls: map[string]int{"a": 1}},
		{name: "provider allow_fallbacks false: first only", body: withGateway(`"provider":{"allow_fallbacks":false}`),
			scripts: map[string][]step{"a": {fail500}}, code: llm.CodeAllProvidersFailed, calls: map[string]int{"a": 1}},
		{name: "provider order", body: withGateway(`"provider":{"order":["c","b"]}`), provider: "c", depth: 0, calls: map[string]int{"c": 1}},
		{name: "provider order then the rest", body: withGateway(`"provider":{"order":["c"]}`),
			scripts: map[string][]step{"c": {fail500}}, provider: "a", depth: 1, calls: map[string]int{"c": 1, "a": 1}},
		{name: "provider only", body: withGateway(`"provider":{"only":["b","d"]}`),
			scripts: map[string][]step{"b": {fail500}}, provider: "d", depth: 1, calls: map[string]int{"b": 1, "d": 1}},
		{name: "provider ignore", body: withGateway(`"provider":{"ignore":["a"]}`), provider: "b", depth: 0, calls: map[string]int{"b": 1}},
		{name: "floor sorts by price", body: `{"model":"m:floor","messages":[{"role":"user"}]}`, provider: "d", depth: 0, calls: map[string]int{"d": 1}},
		{name: "sort price", body: withGateway(`"provider":{"sort":"price"}`),
			scripts: map[string][]step{"d": {fail500}}, provider: "c", depth: 1, calls: map[string]int{"d": 1, "c": 1}},
		{name: "zdr demand", body: plain, policy: Policy{Demand: llm.DemandZDR}, provider: "c", depth: 0, calls: map[string]int{"c": 1}},
		{name: "deny demand", body: plain, policy: Policy{Demand: llm.DemandDeny}, provider: "d", depth: 0, calls: map[string]int{"d": 1}},
		{name: "eu residency", body: plain, policy: Policy{Residency: "eu"},
			scripts: map[string][]step{"c": {fail500}}, provider: "d", depth: 1, calls: map[string]int{"c": 1, "d": 1}},
		{name: "unknown model", body: `{"model":"nope","messages":[{"role":"user"}]}`, code: llm.CodeModelNotFound},
		{name: "unknown provider name", body: withGateway(`"provider":{"order":["zz"]}`), code: llm.CodeInvalidRequest},
		{name: "only and ignore leave nothing", body: withGateway(`"provider":{"only":["a"],"ignore":["a"]}`), code: llm.CodeInvalidRequest},
		{name: "policy leaves nothing", body: withGateway(`"provider":{"only":["a","b"]}`), policy: Policy{Residency: "eu"}, code: llm.CodeNoLiveProvider},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.scripts)
			req := decode(t, tt.body)
			ans, err := run(w.r, req, tt.policy)
			if tt.provider != "" {
				if err != nil {
					t.Fatalf("err = %v, want an answer from %s", err, tt.provider)
				}
				defer ans.Close()
				if ans.Provider != tt.provider || ans.Depth != tt.depth {
					t.Errorf("answer from %s at depth %d, want %s at %d", ans.Provider, ans.Depth, tt.provider, tt.depth)
				}
			} else {
				e := llm.AsError(err)
				if err == nil || e.Code != tt.code {
					t.Fatalf("err = %v, want code %s", err, tt.code)
				}
				if tt.retryHint && e.RetryAfter < 3*time.Second {
					t.Errorf("RetryAfter = %v, want the provider's 3s hint", e.RetryAfter)
				}
			}
			if tt.calls == nil {
				tt.calls = map[string]int{}
			}
			if diff := cmp.Diff(tt.calls, w.calls()); diff != "" {
				t.Errorf("provider calls (-want +got):\n%s", diff)
			}
		})
	}
}

func run(r *Router, req *llm.ChatRequest, pol Policy) (*Answer, error) {
	plan, err := r.Plan(TargetOf(req), pol)
	if err != nil {
		return nil, err
	}
	ans, _, err := r.Start(context.Background(), plan, req)
	return ans, err
}

func TestAnswerAfterOutput(t *testing.T) {
	tests := []struct {
		name  string
		step  step
		end   error
		texts int
	}{
		{"finished", ok, io.EOF, 2},
		{"cut without finish is incomplete", step{out: []string{"a", "b"}, end: llm.ErrStreamCut}, ErrIncomplete, 2},
		{"cut after finish is complete", step{out: []string{"a"}, finish: "stop", end: llm.ErrStreamCut}, io.EOF, 1},
		{"error after output", step{out: []string{"a"}, end: &llm.ProviderError{Class: llm.FailTransient, Message: "boom"}}, &llm.ProviderError{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, map[string][]step{"a": {tt.step}})
			ans, err := run(w.r, decode(t, plain), Policy{})
			if err != nil {
				t.Fatal(err)
			}
			defer ans.Close()
			texts := 0
			var end error
			for {
				ch, err := ans.Next()
				if err != nil {
					end = err
					break
				}
				if ch.Output {
					texts++
				}
			}
			var pe *llm.ProviderError
			if _, want := tt.end.(*llm.ProviderError); want {
				if !errors.As(end, &pe) {
					t.Errorf("end = %v, want a provider error", end)
				}
			} else if end != tt.end {
				t.Errorf("end = %v, want %v", end, tt.end)
			}
			if texts != tt.texts {
				t.Errorf("%d output chunks, want %d", texts, tt.texts)
			}
			// Nothing after output is ever another provider's.
			if diff := cmp.Diff(map[string]int{"a": 1}, w.calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUsageAndCost(t *testing.T) {
	w := newWorld(t, map[string][]step{"a": {fail500}})
	ans, err := run(w.r, decode(t, plain), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := ans.Next(); err != nil {
			break
		}
	}
	u := ans.Usage()
	// b answered: 10 prompt tokens at 3/M, 4 completion tokens at 3/M.
	if u.PromptTokens != 10 || u.CompletionTokens != 4 || u.Cost != 4.2e-05 || u.Estimated {
		t.Errorf("usage = %+v, want 10/4 tokens costing 4.2e-05 at b's prices", u)
	}

	// No usage from the provider: estimated from the bytes.
	w = newWorld(t, map[string][]step{"a": {{out: []string{"abcdefgh"}, end: llm.ErrStreamCut}}})
	ans, err = run(w.r, decode(t, plain), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := ans.Next(); err != nil {
			break
		}
	}
	u = ans.Usage()
	if !u.Estimated || u.CompletionTokens != 2 || u.Cost <= 0 {
		t.Errorf("estimated usage = %+v, want 2 completion tokens and a cost", u)
	}
}

func TestHealthCooldown(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	w := newWorld(t, map[string][]step{"a": {fail500}, "b": {fail500}, "c": {fail500}, "d": {fail500}})
	w.r.health = NewHealth(3, time.Minute, clock)
	w.r.now = clock
	req := decode(t, plain)
	for i := 0; i < 3; i++ {
		if _, err := run(w.r, req, Policy{}); llm.AsError(err).Code != llm.CodeAllProvidersFailed {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	before := w.calls()
	_, err := run(w.r, req, Policy{})
	if e := llm.AsError(err); e.Code != llm.CodeNoLiveProvider || e.RetryAfter <= 0 {
		t.Fatalf("after 3 failures: %v, want no_live_provider with retry-after", err)
	}
	if diff := cmp.Diff(before, w.calls()); diff != "" {
		t.Errorf("a request refused for health called providers (-before +after):\n%s", diff)
	}
	// Retry-After is the time left of the cool-down, not all of it.
	now = now.Add(45 * time.Second)
	if _, err := run(w.r, req, Policy{}); llm.AsError(err).RetryAfter != 15*time.Second {
		t.Errorf("45 s into a 60 s cool-down: %v, retry-after %v; want 15s", err, llm.AsError(err).RetryAfter)
	}
	now = now.Add(16 * time.Second)
	if _, err := run(w.r, req, Policy{}); llm.AsError(err).Code != llm.CodeAllProvidersFailed {
		t.Errorf("after the cool-down the providers are called again; got %v", err)
	}
	// Half-open: one more failure takes them straight out again.
	if _, err := run(w.r, req, Policy{}); llm.AsError(err).Code != llm.CodeNoLiveProvider {
		t.Errorf("half-open provider failed once and is still live: %v", err)
	}
}

func TestHealthSkipsCoolingProvider(t *testing.T) {
	w := newWorld(t, nil)
	for i := 0; i < 3; i++ {
		w.r.health.Failure("a")
	}
	ans, err := run(w.r, decode(t, plain), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer ans.Close()
	if ans.Provider != "b" || ans.Depth != 1 || w.fakes["a"].Calls() != 0 {
		t.Errorf("answer from %s depth %d with %d calls to a; want b at depth 1 and a skipped", ans.Provider, ans.Depth, w.fakes["a"].Calls())
	}
}

func TestCeiling(t *testing.T) {
	w := newWorld(t, map[string][]step{"a": {{hang: true}}}, func(c *catalog.Config) {
		c.Providers[0].FirstTokenTimeout = 0
	})
	req := decode(t, withGateway(`"gateway":{"routing":{"allow_fallbacks":false}}`))
	plan, err := w.r.Plan(TargetOf(req), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err = w.r.Start(ctx, plan, req)
	if llm.AsError(err).Code != llm.CodeRequestTimeout {
		t.Errorf("err = %v, want request_timeout", err)
	}
	// A client that went away is not a timeout.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, _, err = w.r.Start(ctx, plan, req)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestConfigFailureTakesRouteOut: a provider's configuration failure (a
// refused key, an unknown model) falls back at once and takes that route
// out for the health cooldown, without counting against the provider's
// health; after the cooldown the route is called again.
// TestFallbackSameModelOneRequest: routes of one upstream model are sent
// one request, so that a fallback reads what the route before it read of
// the body (its Chat Completions view) without decoding it again; a route
// of another model is sent its own.
func TestFallbackSameModelOneRequest(t *testing.T) {
	w := newWorld(t, map[string][]step{"a": {fail500}, "b": {fail500}}, func(c *catalog.Config) {
		c.Models[0].Routes[1].Model = "ua"
	})
	req := decode(t, plain)
	plan, err := w.r.Plan(TargetOf(req), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ans, _, err := w.r.Start(context.Background(), plan, req)
	if err != nil {
		t.Fatal(err)
	}
	ans.Close()
	a, b, c := w.fakes["a"].reqs[0], w.fakes["b"].reqs[0], w.fakes["c"].reqs[0]
	if a != b || a.Model != "ua" {
		t.Fatalf("routes a and b (both ua) were sent %p (%s) and %p (%s), want one request", a, a.Model, b, b.Model)
	}
	va, err := a.ChatView()
	if err != nil || va.Model != "ua" {
		t.Fatalf("view %+v, %v", va, err)
	}
	if vb, _ := b.ChatView(); vb != va {
		t.Error("the view was decoded again")
	}
	if c == a || c.Model != "uc" {
		t.Errorf("route c was sent %p (%s), want its own request of uc", c, c.Model)
	}
}

func TestConfigFailureTakesRouteOut(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	config := step{err: &llm.ProviderError{Class: llm.FailConfig, Status: 403, Message: "AccessDeniedException: no access"}}
	w := newWorld(t, map[string][]step{"a": {config, config, ok}})
	w.r.now = clock
	req := decode(t, plain)
	plan, err := w.r.Plan(TargetOf(req), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ans, attempts, err := w.r.Start(context.Background(), plan, req)
	if err != nil {
		t.Fatal(err)
	}
	ans.Close()
	if ans.Provider != "b" || len(attempts) != 1 || attempts[0].Class != llm.FailConfig || attempts[0].Model != "ua" || attempts[0].Message != "AccessDeniedException: no access" {
		t.Fatalf("answer from %s, attempts %+v; want b after one config failure of a's route ua", ans.Provider, attempts)
	}
	for i := range 3 {
		ans, err := run(w.r, req, Policy{})
		if err != nil || ans.Provider != "b" {
			t.Fatalf("request %d: %v from %v", i, err, ans)
		}
		ans.Close()
	}
	if w.fakes["a"].Calls() != 1 || !w.r.health.Live("a") {
		t.Errorf("a called %d times, live %v; want 1 call (then out) and a live provider", w.fakes["a"].Calls(), w.r.health.Live("a"))
	}
	now = now.Add(time.Minute) // the cooldown
	ans, err = run(w.r, req, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ans.Close()
	if w.fakes["a"].Calls() != 2 || ans.Provider != "b" {
		t.Errorf("after the cooldown: a called %d times, answer from %s; want a tried again", w.fakes["a"].Calls(), ans.Provider)
	}
}

// TestRejectionLeavesRouteIn: a provider's rejection of the request (its
// 404 about an object the client named, as upstream.StatusError classes
// it) is the client's answer every time, tried on no other provider, and
// leaves the route and the provider as they were, however often it comes:
// more rejections in a row than failure_threshold, and the next request is
// served by the same route.
func TestRejectionLeavesRouteIn(t *testing.T) {
	notFound := step{err: &llm.ProviderError{Class: llm.FailRejected, Status: 404, Message: "File not found: file_011"}}
	w := newWorld(t, map[string][]step{"a": {notFound, notFound, notFound, notFound, notFound, ok}})
	req := decode(t, plain)
	for i := range 5 {
		ans, err := run(w.r, req, Policy{})
		e := llm.AsError(err)
		if ans != nil {
			ans.Close()
			t.Fatalf("request %d: an answer from %s; want provider_rejected", i, ans.Provider)
		}
		if e.Code != llm.CodeProviderRejected || e.Message != "provider rejected the request: File not found: file_011" {
			t.Fatalf("request %d: %v; want provider_rejected with the provider's message", i, err)
		}
	}
	ans, err := run(w.r, req, Policy{})
	if err != nil || ans.Provider != "a" || ans.Depth != 0 {
		t.Fatalf("after the rejections: %v from %v, want a at depth 0", err, ans)
	}
	ans.Close()
	if w.fakes["a"].Calls() != 6 || w.fakes["b"].Calls() != 0 || !w.r.health.Live("a") {
		t.Errorf("calls a %d, b %d, a live %v; want 6, 0, live", w.fakes["a"].Calls(), w.fakes["b"].Calls(), w.r.health.Live("a"))
	}
}

// translator translates a client's request to plain, its translation the
// string "translated".
type translator struct{ t *testing.T }

func (tr translator) Translate() (*llm.ChatRequest, llm.Translation, error) {
	return decode(tr.t, plain), "translated", nil
}

// TestAnswerCarriesTranslation: an answer served in Chat Completions to a
// request translated from another protocol carries what its translation
// made, for the client API's codec; one to a Chat Completions request
// carries nothing.
func TestAnswerCarriesTranslation(t *testing.T) {
	w := newWorld(t, nil)
	body := []byte(`{"model":"m","system":"hi"}`)
	members, err := llm.RequestMembers(body)
	if err != nil {
		t.Fatal(err)
	}
	translated, err := llm.NewRoutingRequest(members, len(body))
	if err != nil {
		t.Fatal(err)
	}
	translated.TranslateWith(translator{t})
	for _, c := range []struct {
		req  *llm.ChatRequest
		want llm.Translation
	}{{translated, "translated"}, {decode(t, plain), nil}} {
		plan, err := w.r.Plan(TargetOf(c.req), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		ans, _, err := w.r.Start(context.Background(), plan, c.req)
		if err != nil {
			t.Fatal(err)
		}
		ans.Close()
		if ans.Proto != llm.ProtoChat || ans.Translation != c.want {
			t.Errorf("answer in %v carries %v, want %v", ans.Proto, ans.Translation, c.want)
		}
	}
}
