package systemtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/lambdaedge"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// Whole-system checks of what a request costs and gets at the edges of its
// life: a JSON answer cut by the request's ceiling, a budget overshot by
// requests in flight, and a slow JSON answer under Lambda.

// TestTimedOutJSONAnswerIsBilled: a non-streaming request whose provider
// had started its output when the request's ceiling passed is answered 504
// request_timeout, and billed for what the provider produced up to the cut
// (the provider bills it): one ledger entry whose tokens are the prompt and
// the text read so far, at the route's prices. A keyed one leaves a
// tombstone: its retry is a 409, with no second provider call and no
// second bill.
func TestTimedOutJSONAnswerIsBilled(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		name := "unkeyed"
		if keyed {
			name = "keyed"
		}
		t.Run(name, func(t *testing.T) {
			// The ceiling leaves room for the provider call and its first
			// output on a loaded machine; the stall then lasts until it.
			g := newGateway(t, setup{extraYAML: "server: {request_timeout: 1s}\n"})
			g.ups[0].Script(providertest.Response{Text: []string{"one", " two"}, Cut: &providertest.Cut{After: 1, How: providertest.CutStall}})
			var header []string
			if keyed {
				header = []string{"Idempotency-Key", key(t)}
			}
			e := expectError(t, g.post(t, chatBody(""), header...), 504, "request_timeout", "")
			if e.Error.Type != "timeout_error" {
				t.Errorf("type %q, want timeout_error", e.Error.Type)
			}
			g.settle(t)
			tot := totals(t, g.accounts).Total
			if tot.Requests != 1 || tot.CompletionTokens < 1 || tot.PromptTokens < 1 {
				t.Fatalf("ledger %+v: want one entry for the prompt and the output produced before the cut", tot)
			}
			// p0's prices: 1 and 2 USD per million tokens (1,000 and 2,000
			// nano-USD a token).
			if want := tot.PromptTokens*1000 + tot.CompletionTokens*2000; tot.CostNanos != want {
				t.Errorf("cost %d nano-USD, want %d for %+v", tot.CostNanos, want, tot)
			}
			if !keyed {
				return
			}
			expectError(t, g.post(t, chatBody(""), header...), 409, "idempotency_replay_unavailable", "")
			g.settle(t)
			if calls, tot := g.ups[0].Calls(), totals(t, g.accounts).Total; calls != 1 || tot.Requests != 1 {
				t.Errorf("after the retry: %d provider calls, ledger %+v; want one of each", calls, tot)
			}
		})
	}
}

// TestTimedOutJSONAnswerAfterKeepAlive: under Lambda, a JSON answer cut
// by the ceiling after the keep-alive began ends its 200 body with the
// request_timeout envelope, and is billed for what the provider produced.
func TestTimedOutJSONAnswerAfterKeepAlive(t *testing.T) {
	g := newGateway(t, setup{extraYAML: "server: {request_timeout: 1s}\n"})
	h, _ := lambdaInstance(t, g, 50*time.Millisecond)
	held := make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	g.ups[0].Script(providertest.Response{Text: []string{"one", " two"}, Cut: &providertest.Cut{After: 1, How: providertest.CutStall},
		Sent: func(int) { <-held }})
	resp, br := startedBeforeAnswer(t, h, chatEvent(chatBody("")), release)
	release()
	rest, err := io.ReadAll(br)
	var e apiError
	if err != nil || json.Unmarshal(rest, &e) != nil || resp.StatusCode != 200 || e.Error.Code != "request_timeout" {
		t.Fatalf("%d %q %v: want the request_timeout envelope in the 200 body", resp.StatusCode, rest, err)
	}
	g.settle(t)
	if tot := totals(t, g.accounts).Total; tot.Requests != 1 || tot.CompletionTokens < 1 {
		t.Errorf("ledger %+v: want the output produced billed", tot)
	}
}

// TestBudgetOvershootBounded: a budget is checked, not locked, as a
// balance is. Requests that passed the check while the period's spend was
// under the budget all run, and together may spend past it: the overshoot
// is at most what the requests already in flight cost. Each is billed
// exactly once, and the first request checked after their bills is
// refused with 402 budget_exceeded before any provider call.
func TestBudgetOvershootBounded(t *testing.T) {
	for _, b := range backends {
		for _, c := range []struct {
			name string
			s    setup
		}{
			{"project", setup{projectYAML: "    budget: {amount: 0.00002, period: day}\n"}},
			{"key", setup{keyYAML: "budget: {amount: 0.00002, period: month}"}},
		} {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				store, acc := b.new(t)
				c.s.store, c.s.accounts = store, acc
				g := newGateway(t, c.s)
				// Three requests in flight at once, each costing 14,000
				// nano-USD against a budget of 20,000: all three passed
				// the check while nothing was spent.
				const n, cost, budget = 3, 14000, 20000
				inFlightTogether(t, g, n)
				g.settle(t)
				tot := totals(t, acc).Total
				if tot.Requests != n || tot.CostNanos != n*cost {
					t.Fatalf("ledger %+v, want %d requests billed once each", tot, n)
				}
				// The overshoot happened, and is bounded by the requests in
				// flight: spend <= (spend at their check, 0) + their cost.
				if over := tot.CostNanos - budget; over <= 0 || over > n*cost {
					t.Errorf("spent %d nano-USD of a %d budget", tot.CostNanos, budget)
				}
				a := mustCall(t, g.url, chatBody(`"n":99`))
				if a.status != 402 || a.code != "budget_exceeded" {
					t.Errorf("after the in-flight requests' bills: %d %q, want 402 budget_exceeded", a.status, a.code)
				}
				if calls := g.ups[0].Calls(); calls != n {
					t.Errorf("%d provider calls, want %d: the refused request reached the provider", calls, n)
				}
			})
		}
	}
}

// lambdaInstance starts one more instance of g (as g.instance does, on a
// store of its own) whose JSON answers keep their connection busy every
// keepAlive, as the function's do under Lambda, and returns its handler
// behind the Lambda edge (the REST API's streamed integration) and its
// loopback URL.
func lambdaInstance(t *testing.T, g *gateway, keepAlive time.Duration) (func(context.Context, lambdaevents.APIGatewayProxyRequest) (*lambdaevents.APIGatewayProxyStreamingResponse, error), string) {
	t.Helper()
	a, err := app.FromConfig(g.cfg, app.Options{
		Getenv:        func(k string) string { return g.env[k] },
		Logger:        slog.New(slog.NewJSONHandler(g.logs, nil)),
		Accounts:      g.accounts,
		JSONKeepAlive: keepAlive,
	})
	if err != nil {
		t.Fatal(err)
	}
	g.apps = append(g.apps, a)
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		a.Finisher.Drain(ctx)
	})
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return lambdaedge.Wrap(a.Handler), srv.URL
}

// chatEvent is API Gateway's proxy event of a chat completion.
func chatEvent(body string, header ...string) lambdaevents.APIGatewayProxyRequest {
	h := map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json"}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	return lambdaevents.APIGatewayProxyRequest{
		Resource: "/api/v1/{proxy+}", Path: "/api/v1/chat/completions", HTTPMethod: http.MethodPost,
		Headers: h, Body: body,
		RequestContext: lambdaevents.APIGatewayProxyRequestContext{Identity: lambdaevents.APIGatewayRequestIdentity{SourceIP: "203.0.113.7"}},
	}
}

// startedBeforeAnswer invokes the handler and returns its response once
// the function has sent its status and the first byte of its body, which
// must happen while the provider still holds the answer back (until
// release): API Gateway cuts a streamed response that sends nothing for its
// idle timeout. The body reader starts after that first byte.
func startedBeforeAnswer(t *testing.T, h func(context.Context, lambdaevents.APIGatewayProxyRequest) (*lambdaevents.APIGatewayProxyStreamingResponse, error), ev lambdaevents.APIGatewayProxyRequest, release func()) (*lambdaevents.APIGatewayProxyStreamingResponse, *bufio.Reader) {
	t.Helper()
	type started struct {
		resp  *lambdaevents.APIGatewayProxyStreamingResponse
		br    *bufio.Reader
		first byte
		err   error
	}
	got := make(chan started, 1)
	go func() {
		resp, err := h(context.Background(), ev)
		if err != nil {
			got <- started{err: err}
			return
		}
		// The streamed integration format: the prelude's JSON, eight NUL
		// bytes, the body.
		br := bufio.NewReader(resp)
		if _, err := br.ReadBytes(0); err != nil {
			got <- started{resp: resp, err: err}
			return
		}
		for range 7 {
			if b, err := br.ReadByte(); err != nil || b != 0 {
				got <- started{resp: resp, err: fmt.Errorf("the prelude's delimiter: %q %v", b, err)}
				return
			}
		}
		b, err := br.ReadByte()
		got <- started{resp: resp, br: br, first: b, err: err}
	}()
	select {
	case s := <-got:
		if s.resp != nil {
			t.Cleanup(func() { release(); s.resp.Close() })
		}
		if s.err != nil {
			t.Fatal(s.err)
		}
		if s.first != ' ' {
			t.Fatalf("first byte %q, want the keep-alive's space", s.first)
		}
		return s.resp, s.br
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was sent while the provider worked on a JSON answer: API Gateway would cut the response at its idle timeout, with the answer billed and lost")
	}
	return nil, nil
}

// TestSlowJSONAnswerUnderLambda: under Lambda a non-streaming answer that
// takes longer than the keep-alive interval (240 s deployed: API Gateway
// cuts a streamed response idle for 5 minutes) keeps its connection busy
// with whitespace while the provider works, so the client gets the answer
// instead of a cut (and its SDK's retry, which would run and bill it
// again). The body parses as the answer; the stored answer a replay gets
// has no whitespace; the request is billed once. An error after the
// keep-alive began comes as the error envelope in the 200 body.
func TestSlowJSONAnswerUnderLambda(t *testing.T) {
	t.Run("answer", func(t *testing.T) {
		g := newGateway(t, setup{})
		h, url := lambdaInstance(t, g, 50*time.Millisecond)
		release := holdFirstCall(t, g.ups[0])
		k := key(t)
		resp, br := startedBeforeAnswer(t, h, chatEvent(chatBody(""), "Idempotency-Key", k), release)
		release()
		rest, err := io.ReadAll(br)
		if err != nil {
			t.Fatal(err)
		}
		body := strings.TrimLeft(string(rest), " ")
		if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "application/json" || !strings.HasPrefix(resp.Headers["X-Request-Id"], "req_") {
			t.Errorf("head %d %v", resp.StatusCode, resp.Headers)
		}
		var c completion
		if err := json.Unmarshal(rest, &c); err != nil || c.Object != "chat.completion" || c.Usage.Cost <= 0 {
			t.Fatalf("the body with its whitespace does not parse as the answer: %v %q", err, rest)
		}
		replay := mustCall(t, url, chatBody(""), "Idempotency-Key", k)
		if replay.status != 200 || replay.replayed != "true" || replay.body != body {
			t.Errorf("replay %d replayed=%q\n%q\nwant the answer without whitespace\n%q", replay.status, replay.replayed, replay.body, body)
		}
		g.settle(t)
		if tot := totals(t, g.accounts).Total; tot.Requests != 1 || g.ups[0].Calls() != 1 {
			t.Errorf("ledger %+v after %d provider calls: want one of each", tot, g.ups[0].Calls())
		}
	})
	t.Run("error after the keep-alive", func(t *testing.T) {
		g := newGateway(t, setup{})
		h, _ := lambdaInstance(t, g, 50*time.Millisecond)
		gate := make(chan struct{})
		release := sync.OnceFunc(func() { close(gate) })
		t.Cleanup(release)
		for _, up := range g.ups {
			up.SetHandler(func(int, providertest.Request) providertest.Response {
				<-gate
				return providertest.Response{Status: 500}
			})
		}
		resp, br := startedBeforeAnswer(t, h, chatEvent(chatBody("")), release)
		release()
		rest, err := io.ReadAll(br)
		if err != nil {
			t.Fatal(err)
		}
		var e apiError
		if err := json.Unmarshal(rest, &e); err != nil || resp.StatusCode != 200 || e.Error.Code != "all_providers_failed" || e.Error.Type != "upstream_error" {
			t.Errorf("%d %q (%v): want the error envelope in the 200 body the keep-alive started", resp.StatusCode, rest, err)
		}
		g.settle(t)
		if tot := totals(t, g.accounts).Total; tot.Requests != 0 {
			t.Errorf("ledger %+v: a failed request was billed", tot)
		}
		// The log line (and the metrics) carry the error's status.
		if logs := g.logs.String(); !strings.Contains(logs, `"status":502`) || !strings.Contains(logs, `"kept_alive":true`) {
			t.Errorf("log:\n%s", logs)
		}
	})
	t.Run("openai sdk", func(t *testing.T) {
		// The official SDK parses the answer after the whitespace. (The
		// keep-alive is served here on the local server's connection: the
		// same bytes.)
		g := newGateway(t, setup{})
		_, g.url = lambdaInstance(t, g, 50*time.Millisecond)
		gate := make(chan struct{})
		release := sync.OnceFunc(func() { close(gate) })
		t.Cleanup(release)
		g.ups[0].SetHandler(func(int, providertest.Request) providertest.Response {
			select {
			case <-gate:
			case <-time.After(10 * time.Second): // the keep-alive never came
			}
			return providertest.Response{}
		})
		first := &firstByte{release: release}
		client := sdkClient(g, option.WithHTTPClient(&http.Client{Transport: first}))
		c, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
		})
		if err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content != "Hello world" {
			t.Fatalf("%v %+v", err, c)
		}
		if b := first.get(); b != ' ' {
			t.Errorf("the body began with %q, want the keep-alive's space, before the provider answered", b)
		}
	})
	t.Run("stream", func(t *testing.T) {
		// A stream sends its own events; it gets no whitespace, which
		// would not be an event.
		g := newGateway(t, setup{})
		h, _ := lambdaInstance(t, g, 50*time.Millisecond)
		g.ups[0].SetDefault(providertest.Response{FirstChunkDelay: 300 * time.Millisecond})
		resp, err := h(context.Background(), chatEvent(chatBody(`"stream":true`)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Close()
		b, err := io.ReadAll(resp)
		if _, body, ok := strings.Cut(string(b), "\x00\x00\x00\x00\x00\x00\x00\x00"); err != nil || resp.StatusCode != 200 || !ok || !strings.HasPrefix(body, "data: ") {
			t.Errorf("%d %q %v", resp.StatusCode, b, err)
		}
	})
}

// firstByte is an HTTP transport that notes the first byte of a response
// body and calls release once it has read it.
type firstByte struct {
	release func()
	mu      sync.Mutex
	b       byte
}

func (f *firstByte) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = &firstByteBody{ReadCloser: resp.Body, f: f}
	}
	return resp, err
}

func (f *firstByte) get() byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b
}

type firstByteBody struct {
	io.ReadCloser
	f    *firstByte
	seen bool
}

func (b *firstByteBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.seen {
		b.seen = true
		b.f.mu.Lock()
		b.f.b = p[0]
		b.f.mu.Unlock()
		b.f.release()
	}
	return n, err
}
