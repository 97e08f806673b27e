package systemtest_test

import (
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

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/proc"
	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/metrics"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/sse"
)

const (
	testKey         = "sk-test-0123456789"
	otherKey        = "sk-test-second-key"
	otherProjectKey = "sk-test-other-project"
)

// gateway is a real buzzgate handler on a loopback port, in front of fake
// upstreams p0, p1, ... that are the routes of model "m" in that order.
type gateway struct {
	url      string
	ups      []*providertest.Server
	logs     *syncBuffer
	cfg      *catalog.Config
	env      map[string]string
	now      func() time.Time
	metrics  metrics.Recorder
	accounts httpapi.Accounts
	// apps are the instances, in the order instance started them.
	apps []*app.App
}

type setup struct {
	providers int
	// providerYAML is added to every provider's entry (e.g. first_token_timeout).
	providerYAML string
	// firstProviderYAML is added to p0's entry only (after providerYAML).
	firstProviderYAML string
	// extraYAML is appended to the config (server:, health:, ...).
	extraYAML string
	// store is the idempotency store; nil means a fresh memory store.
	store idempotency.Store
	// metrics, when set, receives the gateway's EMF metric lines.
	metrics io.Writer
	// accounts is the ledger and key store; zero means a fresh memory one
	// (shared by every instance of the gateway).
	accounts httpapi.Accounts
	// balance and keyLimit (USD) go into project proj and its key testKey.
	balance, keyLimit string
	// projectYAML is added to project proj's entry (lines indented by four
	// spaces, e.g. "    max_in_flight: 1\n"); keyYAML to testKey's (flow
	// members after a comma, e.g. "budget: {amount: 1, period: day}").
	projectYAML, keyYAML string
	// routeYAML is added to every route's entry (flow members after a
	// comma, e.g. "cache_read_price: 0.25").
	routeYAML string
	// now is every instance's clock (app.Options.Now); nil means time.Now.
	now func() time.Time
}

func newGateway(t testing.TB, s setup) *gateway {
	t.Helper()
	if s.providers == 0 {
		s.providers = 2
	}
	g := &gateway{logs: &syncBuffer{}, now: s.now}
	var cfg strings.Builder
	cfg.WriteString("providers:\n")
	for i := 0; i < s.providers; i++ {
		up := providertest.New(t)
		g.ups = append(g.ups, up)
		extra := s.providerYAML
		if i == 0 {
			extra += s.firstProviderYAML
		}
		fmt.Fprintf(&cfg, "  - {name: p%d, api: openai, base_url: %q, api_key_env: UPSTREAM_KEY_%d%s}\n", i, up.URL(), i, extra)
	}
	cfg.WriteString("models:\n  - id: m\n    routes:\n")
	for i := 0; i < s.providers; i++ {
		route := ""
		if s.routeYAML != "" {
			route = ", " + s.routeYAML
		}
		fmt.Fprintf(&cfg, "      - {provider: p%d, model: up-%d, input_price: %d, output_price: %d%s}\n", i, i, i+1, 2*(i+1), route)
	}
	keyLimit := ""
	if s.keyLimit != "" {
		keyLimit = ", limit: " + s.keyLimit
	}
	if s.keyYAML != "" {
		keyLimit += ", " + s.keyYAML
	}
	cfg.WriteString("projects:\n  - id: proj\n    keys: [{key: " + testKey + keyLimit + "}, {key: " + otherKey + "}]\n")
	if s.balance != "" {
		cfg.WriteString("    balance: " + s.balance + "\n")
	}
	cfg.WriteString(s.projectYAML)
	cfg.WriteString("  - id: other\n    keys: [{key: " + otherProjectKey + "}]\n")
	cfg.WriteString(s.extraYAML)
	c, err := catalog.Parse([]byte(cfg.String()))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, cfg.String())
	}
	g.cfg = c
	g.env = map[string]string{"UPSTREAM_KEY_0": "upstream-secret-0"}
	if s.metrics != nil {
		g.metrics = metrics.NewEMF(s.metrics, "test")
	}
	g.accounts = s.accounts
	if g.accounts.Ledger == nil {
		l := memledger.New(memledger.Options{})
		g.accounts = httpapi.Accounts{Ledger: l, Keys: l}
	}
	g.url = g.instance(t, s.store)
	return g
}

// instance starts one more gateway process-alike (its own router, health
// and idempotency service) in front of the same upstreams, on store.
func (g *gateway) instance(t testing.TB, store idempotency.Store) string {
	t.Helper()
	a, err := app.FromConfig(g.cfg, app.Options{
		Getenv:   func(k string) string { return g.env[k] },
		Logger:   slog.New(slog.NewJSONHandler(g.logs, nil)),
		Now:      g.now,
		Store:    store,
		Metrics:  g.metrics,
		Accounts: g.accounts,
	})
	if err != nil {
		t.Fatal(err)
	}
	g.apps = append(g.apps, a)
	// Once the server is closed (cleanups run last first), the instance
	// shuts down as a process does: steps still being retried stop.
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		a.Finisher.Drain(ctx)
	})
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// settle waits until every instance has finished its requests' writes
// (records, bills): an answer reaches its client before them.
func (g *gateway) settle(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range g.apps {
		if err := a.Finisher.Wait(ctx); err != nil {
			t.Fatalf("the gateway's finishing writes did not settle: %v", err)
		}
	}
}

// holdFirstCall makes up's first call wait, before it answers anything,
// until release is called (at the latest when the test ends, before the
// servers close); every call answers the zero Response. It replaces up's
// script and default.
func holdFirstCall(t testing.TB, up *providertest.Server) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	up.SetHandler(func(call int, _ providertest.Request) providertest.Response {
		if call == 1 {
			<-gate
		}
		return providertest.Response{}
	})
	return release
}

// syncBuffer collects what the gateway logs and emits while tests read it.
type syncBuffer = proc.SyncBuffer

func (g *gateway) calls() []int {
	out := make([]int, len(g.ups))
	for i, u := range g.ups {
		out[i] = u.Calls()
	}
	return out
}

func (g *gateway) post(t testing.TB, body string, header ...string) *http.Response {
	t.Helper()
	return postTo(t, g.url, body, header...)
}

func postTo(t testing.TB, url, body string, header ...string) *http.Response {
	t.Helper()
	return postCtx(t, context.Background(), url, body, header...)
}

// postCtx is postTo under ctx.
func postCtx(t testing.TB, ctx context.Context, url, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func chatBody(extra string) string {
	b := `{"model":"m","messages":[{"role":"user","content":"Say hello"}]`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Message struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name, Arguments string
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int     `json:"prompt_tokens"`
		CompletionTokens int     `json:"completion_tokens"`
		Cost             float64 `json:"cost"`
	} `json:"usage"`
}

func decodeJSON[T any](t testing.TB, resp *http.Response) T {
	t.Helper()
	var v T
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return v
}

type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// expectError checks the status, the envelope and its code; param "" means
// JSON null.
func expectError(t testing.TB, resp *http.Response, status int, code, param string) apiError {
	t.Helper()
	if resp.StatusCode != status {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, status)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("error answer without x-request-id")
	}
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("error body %q: %v", raw, err)
	}
	if _, ok := m["error"]["param"]; !ok {
		t.Errorf("error envelope %s has no param field", raw)
	}
	var e apiError
	json.Unmarshal(raw, &e)
	if e.Error.Code != code {
		t.Errorf("code %q (%s), want %q", e.Error.Code, e.Error.Message, code)
	}
	got := ""
	if e.Error.Param != nil {
		got = *e.Error.Param
	}
	if got != param {
		t.Errorf("param %q, want %q", got, param)
	}
	if e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("envelope without message or type: %s", raw)
	}
	return e
}

// events reads an SSE body to its end: the data payloads in order.
func events(t testing.TB, resp *http.Response) []string {
	t.Helper()
	r := sse.NewReader(resp.Body, 1<<24)
	var out []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		out = append(out, string(ev.Data))
	}
}

func TestNonStreamingAnswer(t *testing.T) {
	g := newGateway(t, setup{})
	resp := g.post(t, chatBody(`"temperature":0.3,"user_field":{"x":1},"gateway":{"retry":{"max_total_attempts":3}},"provider":{"sort":"latency"}`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for h, want := range map[string]string{"X-Gateway-Provider": "p0", "X-Gateway-Route-Depth": "0", "Content-Type": "application/json"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_") {
		t.Errorf("x-request-id = %q", resp.Header.Get("X-Request-Id"))
	}
	c := decodeJSON[completion](t, resp)
	if c.Object != "chat.completion" || len(c.Choices) != 1 || *c.Choices[0].Message.Content != "Hello world" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("completion = %+v", c)
	}
	// providertest: 10 prompt tokens, 2 completion tokens; p0 costs 1/M in, 2/M out.
	if c.Usage.PromptTokens != 10 || c.Usage.CompletionTokens != 2 || c.Usage.Cost != 1.4e-05 {
		t.Errorf("usage = %+v, want 10/2 tokens costing 1.4e-05", c.Usage)
	}

	reqs := g.ups[0].Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	got := reqs[0].JSON
	want := map[string]any{
		"model":          "up-0",
		"messages":       []any{map[string]any{"role": "user", "content": "Say hello"}},
		"temperature":    0.3,
		"user_field":     map[string]any{"x": 1.0},
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream body (-want +got):\n%s", diff)
	}
	if a := reqs[0].Header.Get("Authorization"); a != "Bearer upstream-secret-0" {
		t.Errorf("upstream Authorization = %q", a)
	}
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

func TestStreamingAnswer(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		t.Run(fmt.Sprintf("include_usage=%v", includeUsage), func(t *testing.T) {
			g := newGateway(t, setup{})
			extra := `"stream":true`
			if includeUsage {
				extra += `,"stream_options":{"include_usage":true}`
			}
			resp := g.post(t, chatBody(extra))
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Gateway-Provider") != "p0" {
				t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
			}
			evs := events(t, resp)
			if evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", evs[len(evs)-1])
			}
			var text strings.Builder
			usageChunks := 0
			for _, e := range evs[:len(evs)-1] {
				var ch struct {
					Object  string `json:"object"`
					Choices []struct {
						Delta struct{ Content string } `json:"delta"`
					} `json:"choices"`
					Usage *struct {
						Cost        float64 `json:"cost"`
						TotalTokens int     `json:"total_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal([]byte(e), &ch); err != nil {
					t.Fatalf("event %q: %v", e, err)
				}
				if ch.Object != "chat.completion.chunk" {
					t.Errorf("event %q is not a chunk", e)
				}
				for _, c := range ch.Choices {
					text.WriteString(c.Delta.Content)
				}
				if ch.Usage != nil {
					usageChunks++
					if len(ch.Choices) != 0 || ch.Usage.Cost != 1.4e-05 || ch.Usage.TotalTokens != 12 {
						t.Errorf("usage chunk %q", e)
					}
				}
			}
			if text.String() != "Hello world" {
				t.Errorf("text %q", text.String())
			}
			want := 0
			if includeUsage {
				want = 1
			}
			if usageChunks != want {
				t.Errorf("%d usage chunks, want %d", usageChunks, want)
			}
		})
	}
}

func TestFallback(t *testing.T) {
	// p0YAML goes into p0's entry only: the fallback p1 keeps the default
	// first_token_timeout, so that a slow machine cannot fail it too.
	tests := []struct {
		name   string
		first  providertest.Response
		p0YAML string
	}{
		{"500", providertest.Response{Status: 500}, ""},
		{"503", providertest.Response{Status: 503}, ""},
		{"401 upstream key", providertest.Response{Status: 401}, ""},
		{"connection reset", providertest.Response{Reset: true}, ""},
		{"malformed 200", providertest.Response{Body: "not json", Header: map[string]string{"Content-Type": "text/event-stream"}}, ""},
		{"stream cut before output", providertest.Response{Cut: &providertest.Cut{After: 0, How: providertest.CutClose}}, ""},
		{"error event before output", providertest.Response{Cut: &providertest.Cut{After: 0, How: providertest.CutError}}, ""},
		{"reset before output", providertest.Response{Cut: &providertest.Cut{After: 0, How: providertest.CutReset}}, ""},
		{"headers too slow", providertest.Response{HeaderDelay: 5 * time.Second}, ", first_token_timeout: 150ms"},
		{"first token too slow", providertest.Response{FirstChunkDelay: 5 * time.Second}, ", first_token_timeout: 150ms"},
		{"hang", providertest.Response{Hang: true}, ", first_token_timeout: 150ms"},
		{"stall before output", providertest.Response{Cut: &providertest.Cut{After: 0, How: providertest.CutStall}}, ", first_token_timeout: 150ms"},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, stream), func(t *testing.T) {
				g := newGateway(t, setup{firstProviderYAML: tt.p0YAML})
				g.ups[0].Script(tt.first)
				resp := g.post(t, chatBody(fmt.Sprintf(`"stream":%v`, stream)))
				if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Provider") != "p1" || resp.Header.Get("X-Gateway-Route-Depth") != "1" {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("status %d provider %q depth %q body %s", resp.StatusCode, resp.Header.Get("X-Gateway-Provider"), resp.Header.Get("X-Gateway-Route-Depth"), b)
				}
				if stream {
					evs := events(t, resp)
					if evs[len(evs)-1] != "[DONE]" {
						t.Errorf("stream ends %q", evs[len(evs)-1])
					}
				} else if c := decodeJSON[completion](t, resp); *c.Choices[0].Message.Content != "Hello world" || c.Usage.Cost != 2.8e-05 {
					t.Errorf("completion %+v: want p1's answer at p1's prices", c)
				}
				if diff := cmp.Diff([]int{1, 1}, g.calls()); diff != "" {
					t.Errorf("upstream calls (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestStopConditions(t *testing.T) {
	t.Run("provider 400 is passed through", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{Status: 400, Body: `{"error":{"message":"tools[0] is malformed"}}`})
		e := expectError(t, g.post(t, chatBody("")), 400, "provider_rejected", "")
		if e.Error.Message != "provider rejected the request: tools[0] is malformed" {
			t.Errorf("message %q", e.Error.Message)
		}
		if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
	})
	t.Run("refusal is passed through", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{Refusal: "I can't help with that"})
		resp := g.post(t, chatBody(""))
		c := decodeJSON[completion](t, resp)
		if resp.Header.Get("X-Gateway-Provider") != "p0" || c.Choices[0].Message.Refusal == nil || *c.Choices[0].Message.Refusal != "I can't help with that" {
			t.Errorf("refusal not passed through: %+v", c)
		}
		if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
	})
	t.Run("tool call", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{ToolCall: &providertest.ToolCall{ID: "call_9", Name: "lookup", Arguments: `{"q":"buzz"}`}})
		c := decodeJSON[completion](t, g.post(t, chatBody("")))
		tc := c.Choices[0].Message.ToolCalls
		if len(tc) != 1 || tc[0].ID != "call_9" || tc[0].Function.Name != "lookup" || tc[0].Function.Arguments != `{"q":"buzz"}` || c.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("tool call = %+v", c.Choices[0])
		}
	})
	t.Run("all fail is 502", func(t *testing.T) {
		g := newGateway(t, setup{providers: 3})
		for _, u := range g.ups {
			u.SetDefault(providertest.Response{Status: 500})
		}
		expectError(t, g.post(t, chatBody("")), 502, "all_providers_failed", "")
		if diff := cmp.Diff([]int{1, 1, 1}, g.calls()); diff != "" {
			t.Errorf("each provider is called once (-want +got):\n%s", diff)
		}
	})
	t.Run("all throttled is 429 unavailable_route", func(t *testing.T) {
		g := newGateway(t, setup{})
		for _, u := range g.ups {
			u.SetDefault(providertest.Response{Status: 429, Header: map[string]string{"retry-after": "7"}})
		}
		resp := g.post(t, chatBody(`"gateway":{"retry":{"backoff":0}}`))
		expectError(t, resp, 429, "unavailable_route", "")
		if resp.Header.Get("Retry-After") != "7" || resp.Header.Get("X-Gateway-Admission-Refused") != "" {
			t.Errorf("retry-after %q admission %q", resp.Header.Get("Retry-After"), resp.Header.Get("X-Gateway-Admission-Refused"))
		}
		if diff := cmp.Diff([]int{2, 2}, g.calls()); diff != "" {
			t.Errorf("throttled providers are called again once (-want +got):\n%s", diff)
		}
	})
	t.Run("throttled then answers after backoff", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{Status: 429})
		g.ups[1].SetDefault(providertest.Response{Status: 500})
		resp := g.post(t, chatBody(`"gateway":{"retry":{"backoff":"20ms"}}`))
		if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Provider") != "p0" {
			t.Fatalf("status %d provider %q", resp.StatusCode, resp.Header.Get("X-Gateway-Provider"))
		}
		if diff := cmp.Diff([]int{2, 1}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
	})
	t.Run("eight calls at most", func(t *testing.T) {
		g := newGateway(t, setup{providers: 10})
		for _, u := range g.ups {
			u.SetDefault(providertest.Response{Status: 500})
		}
		expectError(t, g.post(t, chatBody("")), 502, "all_providers_failed", "")
		if diff := cmp.Diff([]int{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
	})
	t.Run("max_total_attempts", func(t *testing.T) {
		g := newGateway(t, setup{providers: 3})
		for _, u := range g.ups {
			u.SetDefault(providertest.Response{Status: 500})
		}
		expectError(t, g.post(t, chatBody(`"gateway":{"retry":{"max_total_attempts":1}}`)), 502, "all_providers_failed", "")
		if diff := cmp.Diff([]int{1, 0, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
	})
	t.Run("allow_fallbacks false", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].SetDefault(providertest.Response{Status: 500})
		expectError(t, g.post(t, chatBody(`"gateway":{"routing":{"allow_fallbacks":false}}`)), 502, "all_providers_failed", "")
		if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
	})
	t.Run("request ceiling is 504", func(t *testing.T) {
		g := newGateway(t, setup{extraYAML: "server: {request_timeout: 200ms}\n"})
		for _, u := range g.ups {
			u.SetDefault(providertest.Response{Hang: true})
		}
		expectError(t, g.post(t, chatBody("")), 504, "request_timeout", "")
	})
	t.Run("floor picks the cheapest", func(t *testing.T) {
		g := newGateway(t, setup{providers: 3})
		resp := g.post(t, `{"model":"m:floor","messages":[{"role":"user","content":"x"}]}`)
		if resp.Header.Get("X-Gateway-Provider") != "p0" {
			t.Errorf("provider %q, want p0 (cheapest)", resp.Header.Get("X-Gateway-Provider"))
		}
	})
	t.Run("provider order", func(t *testing.T) {
		g := newGateway(t, setup{providers: 3})
		resp := g.post(t, chatBody(`"provider":{"order":["p2"]}`))
		if resp.Header.Get("X-Gateway-Provider") != "p2" || resp.Header.Get("X-Gateway-Route-Depth") != "0" {
			t.Errorf("provider %q depth %q, want p2 at depth 0", resp.Header.Get("X-Gateway-Provider"), resp.Header.Get("X-Gateway-Route-Depth"))
		}
	})
}

func TestMidStreamFailure(t *testing.T) {
	type want struct {
		finish  string
		errCode string
	}
	tests := []struct {
		name string
		cut  providertest.CutMode
		want want
	}{
		{"error event", providertest.CutError, want{finish: "error", errCode: "stream_interrupted"}},
		{"connection reset", providertest.CutReset, want{finish: "error", errCode: "stream_interrupted"}},
		{"stream just stops", providertest.CutClose, want{finish: "incomplete"}},
		{"connection closed mid-chunk", providertest.CutAbort, want{finish: "incomplete"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, setup{})
			g.ups[0].Script(providertest.Response{Text: []string{"one", " two", " three"}, Cut: &providertest.Cut{After: 2, How: tt.cut}})
			resp := g.post(t, chatBody(`"stream":true,"stream_options":{"include_usage":true}`))
			if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Provider") != "p0" {
				t.Fatalf("status %d provider %q", resp.StatusCode, resp.Header.Get("X-Gateway-Provider"))
			}
			evs := events(t, resp)
			var text strings.Builder
			finish, errCode, usage := "", "", false
			for _, e := range evs {
				if e == "[DONE]" {
					t.Fatalf("a failed stream ended with [DONE]: %q", evs)
				}
				var ch struct {
					Choices []struct {
						Delta        struct{ Content string } `json:"delta"`
						FinishReason *string                  `json:"finish_reason"`
					} `json:"choices"`
					Usage json.RawMessage `json:"usage"`
					Error *struct {
						Code string `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(e), &ch); err != nil {
					t.Fatal(err)
				}
				for _, c := range ch.Choices {
					text.WriteString(c.Delta.Content)
					if c.FinishReason != nil {
						finish = *c.FinishReason
					}
				}
				if ch.Error != nil {
					errCode = ch.Error.Code
				}
				if len(ch.Usage) > 0 && string(ch.Usage) != "null" {
					usage = true
				}
			}
			if text.String() != "one two" {
				t.Errorf("text %q: the output before the failure must reach the client, and nothing else", text.String())
			}
			if finish != tt.want.finish || errCode != tt.want.errCode {
				t.Errorf("finish %q error code %q, want %q %q; events %q", finish, errCode, tt.want.finish, tt.want.errCode, evs)
			}
			if !usage {
				t.Error("no usage chunk: what was produced must be reported and billed")
			}
			// The stream's last chunk (docs/api.md#how-a-stream-ends): the error's,
			// where the SDKs stop reading; after an incomplete end the usage
			// chunk, as after a finish.
			wantLast := `"finish_reason":"error"`
			if tt.want.finish == "incomplete" {
				wantLast = `"usage":{`
			}
			if last := evs[len(evs)-1]; !strings.Contains(last, wantLast) {
				t.Errorf("the stream's last chunk %s, want the one with %s", last, wantLast)
			}
			if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
				t.Errorf("no fallback after output (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("not streaming, error after output is 502", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{Text: []string{"one", " two"}, Cut: &providertest.Cut{After: 1, How: providertest.CutError}})
		expectError(t, g.post(t, chatBody("")), 502, "all_providers_failed", "")
		if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
			t.Errorf("no fallback after output (-want +got):\n%s", diff)
		}
	})
	t.Run("not streaming, cut after output is incomplete", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{Text: []string{"one", " two"}, Cut: &providertest.Cut{After: 1, How: providertest.CutClose}})
		resp := g.post(t, chatBody(""))
		c := decodeJSON[completion](t, resp)
		if resp.StatusCode != 200 || *c.Choices[0].Message.Content != "one" || c.Choices[0].FinishReason != "incomplete" {
			t.Errorf("status %d completion %+v", resp.StatusCode, c)
		}
	})
	t.Run("ceiling after output ends the stream with request_timeout", func(t *testing.T) {
		// The ceiling leaves room for the provider call and the first output
		// on a loaded machine; the stall then lasts until the ceiling.
		g := newGateway(t, setup{extraYAML: "server: {request_timeout: 1s}\n"})
		g.ups[0].Script(providertest.Response{Text: []string{"one", " two"}, Cut: &providertest.Cut{After: 1, How: providertest.CutStall}})
		resp := g.post(t, chatBody(`"stream":true`))
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("status %d %q %s: the ceiling came before any output", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		evs := events(t, resp)
		if len(evs) == 0 {
			t.Fatal("an empty stream")
		}
		last := evs[len(evs)-1]
		if !strings.Contains(last, `"code":"request_timeout"`) || !strings.Contains(last, `"finish_reason":"error"`) {
			t.Errorf("last event %q", last)
		}
	})
}

func TestBadInput(t *testing.T) {
	g := newGateway(t, setup{extraYAML: "server: {max_body_bytes: 2048}\n"})
	tests := []struct {
		name, body    string
		status        int
		code, param   string
		header        []string
		method, path_ string
	}{
		{name: "malformed JSON", body: `{"model":`, status: 400, code: "invalid_request"},
		{name: "not JSON", body: `model=m`, status: 400, code: "invalid_request"},
		{name: "wrong type", body: `{"model":"m","messages":[{"role":"user"}],"stream":"yes"}`, status: 400, code: "invalid_request", param: "stream"},
		{name: "out of range", body: chatBody(`"gateway":{"retry":{"max_total_attempts":0}}`), status: 400, code: "invalid_request", param: "gateway.retry.max_total_attempts"},
		{name: "unknown provider", body: chatBody(`"provider":{"only":["nope"]}`), status: 400, code: "invalid_request", param: "provider.only[0]"},
		{name: "too large", body: chatBody(`"pad":"` + strings.Repeat("x", 4096) + `"`), status: 413, code: "request_too_large"},
		{name: "unknown model", body: `{"model":"nope","messages":[{"role":"user"}]}`, status: 404, code: "model_not_found", param: "model"},
		{name: "no key", body: chatBody(""), status: 401, code: "invalid_api_key", header: []string{"Authorization", ""}},
		{name: "wrong key", body: chatBody(""), status: 401, code: "invalid_api_key", header: []string{"Authorization", "Bearer sk-wrong-key-1234"}},
		{name: "not bearer", body: chatBody(""), status: 401, code: "invalid_api_key", header: []string{"Authorization", "Basic " + testKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectError(t, g.post(t, tt.body, tt.header...), tt.status, tt.code, tt.param)
		})
	}
	if diff := cmp.Diff([]int{0, 0}, g.calls()); diff != "" {
		t.Errorf("refused requests reached a provider (-want +got):\n%s", diff)
	}

	t.Run("unknown path", func(t *testing.T) {
		resp, err := http.Get(g.url + "/api/v1/nope")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		expectError(t, resp, 404, "not_found", "")
	})
	t.Run("wrong method", func(t *testing.T) {
		resp, err := http.Get(g.url + "/api/v1/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		expectError(t, resp, 405, "method_not_allowed", "")
		if resp.Header.Get("Allow") != "POST" {
			t.Errorf("Allow %q", resp.Header.Get("Allow"))
		}
	})
}

func TestAdmission(t *testing.T) {
	g := newGateway(t, setup{extraYAML: "server: {max_in_flight: 1}\n"})
	// The first request holds the only slot until it is released.
	release := holdFirstCall(t, g.ups[0])
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, g.url+"/api/v1/chat/completions", strings.NewReader(chatBody("")))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	// Wait until the first request holds the only slot.
	waitCalls(t, g.ups[0], 1)
	// Bounded: a request queued for the held slot would never be answered.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := postCtx(t, ctx, g.url, chatBody(""))
	expectError(t, resp, 429, "capacity", "")
	if resp.Header.Get("X-Gateway-Admission-Refused") != "true" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("admission headers: %v", resp.Header)
	}
	// A body is decoded only once admitted: an invalid one, on every API,
	// is refused for capacity, not read as a 400 (which would mean the
	// gateway did the decoding work without a slot).
	for _, path := range []string{"/api/v1/chat/completions", "/api/v1/messages", "/api/v1/responses"} {
		big := `{"model":"m","max_tokens":1,"messages":[` + strings.Repeat(`{"role":"user","content":"x"},`, 20000) + `7]}`
		a := callPath(t, g.url+path, big)
		if a.status != 429 || a.code != "capacity" {
			t.Errorf("%s with an invalid body while full: %d %s, want 429 capacity", path, a.status, a.code)
		}
	}
	release()
	if s := <-done; s != 200 {
		t.Errorf("the admitted request got %d", s)
	}
	g.settle(t) // its handler ends (and frees the slot) after its answer
	if resp := g.post(t, chatBody("")); resp.StatusCode != 200 {
		t.Errorf("after the slot freed: %d", resp.StatusCode)
	}
}

func TestNoLiveProvider(t *testing.T) {
	g := newGateway(t, setup{extraYAML: "health: {failure_threshold: 2, cooldown: 1h}\n"})
	for _, u := range g.ups {
		u.SetDefault(providertest.Response{Status: 500})
	}
	for i := 0; i < 2; i++ {
		expectError(t, g.post(t, chatBody("")), 502, "all_providers_failed", "")
	}
	resp := g.post(t, chatBody(""))
	expectError(t, resp, 503, "no_live_provider", "")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no retry-after on 503")
	}
	if diff := cmp.Diff([]int{2, 2}, g.calls()); diff != "" {
		t.Errorf("providers in cool-down were called (-want +got):\n%s", diff)
	}
}

func TestModels(t *testing.T) {
	g := newGateway(t, setup{})
	req, _ := http.NewRequest(http.MethodGet, g.url+"/api/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := decodeJSON[map[string]any](t, resp)
	want := map[string]any{"object": "list", "data": []any{map[string]any{
		"id": "m", "object": "model", "created": 0.0, "owned_by": "buzzgate",
		"providers": []any{
			map[string]any{"name": "p0", "model": "up-0", "input_price": 1.0, "output_price": 2.0, "cache_read_price": 1.0, "cache_write_price": 1.0, "zdr": false, "data_collection": "allow"},
			map[string]any{"name": "p1", "model": "up-1", "input_price": 2.0, "output_price": 4.0, "cache_read_price": 2.0, "cache_write_price": 2.0, "zdr": false, "data_collection": "allow"},
		},
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	resp2, err := http.Get(g.url + "/api/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	expectError(t, resp2, 401, "invalid_api_key", "")
}

func TestClientGoneStopsUpstream(t *testing.T) {
	g := newGateway(t, setup{})
	g.ups[0].Script(providertest.Response{Text: []string{"a", "b", "c"}, ChunkDelay: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/api/v1/chat/completions", strings.NewReader(chatBody(`"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := sse.NewReader(resp.Body, 1<<20)
	for {
		ev, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(ev.Data), `"content":"a"`) {
			break
		}
	}
	cancel()
	resp.Body.Close()
	// The gateway logs the request once its handler has returned: it only
	// can once it stopped reading from the provider.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(g.logs.String(), `"status":499`) {
		if time.Now().After(deadline) {
			t.Fatalf("the handler did not end after the client left; logs: %s", g.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLogsCarryNoSecrets(t *testing.T) {
	g := newGateway(t, setup{})
	g.post(t, `{"model":"m","messages":[{"role":"user","content":"my secret prompt"}]}`)
	g.post(t, chatBody(""), "Authorization", "Bearer sk-not-a-real-key-42")
	g.settle(t)
	logs := g.logs.String()
	for _, secret := range []string{testKey, "sk-not-a-real-key-42", "my secret prompt", "Hello world", "upstream-secret-0"} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, `"request_id":"req_`) || !strings.Contains(logs, `"provider":"p0"`) {
		t.Errorf("logs lack the request id or provider:\n%s", logs)
	}
}

func TestLargeAnswer(t *testing.T) {
	g := newGateway(t, setup{})
	g.ups[0].Script(providertest.Response{PadBytes: 2 << 20})
	c := decodeJSON[completion](t, g.post(t, chatBody("")))
	if n := len(*c.Choices[0].Message.Content); n != 2<<20+len("Hello world") {
		t.Errorf("content length %d", n)
	}
}

// TestNeverA500 sends hostile bodies through the real handler: each gets a
// documented 4xx, never a 5xx.
func TestNeverA500(t *testing.T) {
	g := newGateway(t, setup{})
	for _, body := range []string{"", "{", "[]", "null", `"x"`, "{}", `{"model":null}`, `{"model":"m","messages":null}`,
		`{"model":"m","messages":[null]}`, `{"model":"m","messages":[{"role":1}]}`, `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":null,"routing":{"allow_fallbacks":null}}}`,
		"\x00\xff", `{"model":"m","messages":[{"role":"user"}],"provider":{"order":[]}}`} {
		resp := g.post(t, body)
		if resp.StatusCode >= 500 {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("body %q: status %d %s", body, resp.StatusCode, b)
		}
	}
}

// TestMetrics: one EMF line per chat completion (and one per failed
// provider, one for the protocol pair of an answered one, and one for the
// caller's project), with the numbers the dashboard and alarms read.
func TestMetrics(t *testing.T) {
	buf := &syncBuffer{}
	g := newGateway(t, setup{metrics: buf})
	g.ups[0].Script(providertest.Response{Status: 500})
	for _, body := range []string{chatBody(""), chatBody(""), chatBody(`"temperature":1`)} {
		g.post(t, body, "Idempotency-Key", "metrics-key")
		g.settle(t) // each request's metric line is written after its answer
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 8 {
		t.Fatalf("%d metric lines, want 8 (3 requests, 1 failed provider, 1 protocol pair, 3 of the project): %s", len(lines), buf.String())
	}
	pick := func(m map[string]any, names ...string) map[string]any {
		out := map[string]any{}
		for _, n := range names {
			out[n] = m[n]
		}
		return out
	}
	want := []map[string]any{
		{"Requests": 1.0, "Fallbacks": 1.0, "RouteDepth": 1.0, "ProviderErrors": 1.0, "Replays": 0.0, "IdempotencyConflicts": 0.0},
		{"Provider": "p0", "ProviderErrors": 1.0},
		{"ClientAPI": "chat", "UpstreamAPI": "openai", "PairRequests": 1.0, "PassThrough": 1.0},
		{"Project": "proj", "ProjectRequests": 1.0, "ProjectCost": 2.8e-05, "BudgetRefusals": 0.0, "BalanceRefusals": 0.0},
		{"Requests": 1.0, "Fallbacks": 0.0, "RouteDepth": nil, "ProviderErrors": 0.0, "Replays": 1.0, "IdempotencyConflicts": 0.0},
		{"Project": "proj", "ProjectRequests": 1.0, "ProjectCost": nil},
		{"Requests": 1.0, "Fallbacks": 0.0, "RouteDepth": nil, "ProviderErrors": 0.0, "Replays": 0.0, "IdempotencyConflicts": 1.0},
		{"Project": "proj", "ProjectRequests": 1.0, "ProjectCost": nil},
	}
	for i, w := range want {
		names := make([]string, 0, len(w))
		for n := range w {
			names = append(names, n)
		}
		if diff := cmp.Diff(w, pick(lines[i], names...)); diff != "" {
			t.Errorf("metric line %d (-want +got):\n%s", i, diff)
		}
	}
	if c, _ := lines[0]["Cost"].(float64); c != 2.8e-05 {
		t.Errorf("Cost %v, want the answer's 2.8e-05", lines[0]["Cost"])
	}
}

// TestProjectMaxInFlight: a project at its max_in_flight on an instance gets
// 429 capacity, before any provider call, while another project is served;
// its slot comes back when its request ends.
func TestProjectMaxInFlight(t *testing.T) {
	g := newGateway(t, setup{projectYAML: "    max_in_flight: 1\n"})
	release := holdFirstCall(t, g.ups[0])
	first := make(chan answer, 1)
	go func() { first <- call(context.Background(), g.url, chatBody("")) }()
	for deadline := time.Now().Add(10 * time.Second); g.ups[0].Calls() < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached the provider")
		}
	}
	a := mustCall(t, g.url, chatBody(`"n":2`))
	if a.status != 429 || a.code != "capacity" || a.header.Get("Retry-After") == "" || !strings.Contains(a.body, "max_in_flight") {
		t.Errorf("the project's second request while its first runs: %d %q %v %s, want 429 capacity", a.status, a.code, a.header, a.body)
	}
	if a := mustCall(t, g.url, chatBody(""), "Authorization", "Bearer "+otherProjectKey); a.status != 200 {
		t.Errorf("another project meanwhile: %d %s", a.status, a.body)
	}
	if got := g.ups[0].Calls(); got != 2 {
		t.Errorf("%d provider calls, want 2 (the held one and the other project's)", got)
	}
	release()
	if a := <-first; a.status != 200 {
		t.Fatalf("the first request: %d %s", a.status, a.body)
	}
	if a := mustCall(t, g.url, chatBody(`"n":3`)); a.status != 200 {
		t.Errorf("after the first ended: %d %s", a.status, a.body)
	}
}
