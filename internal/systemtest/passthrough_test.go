package systemtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/metrics"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/sse"
	"github.com/buzzgate/buzzgate/pkg/tokenize"
)

// agentFixture is one agent request as it reached a provider
// (testdata/agents: recorded from Claude Code and Codex CLI).
type agentFixture struct {
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

func loadFixture(t *testing.T, name string) agentFixture {
	t.Helper()
	b, err := os.ReadFile("testdata/agents/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var f agentFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// withTop returns body with top-level members replaced (encoding/json
// keeps raw values as written).
func withTop(t *testing.T, body []byte, set map[string]string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		m[k] = json.RawMessage(v)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameMembers fails unless got and want have the same top-level members
// with byte-identical values, but for the keys in except, whose values must
// be as given ("": absent; "*": present, any value).
func sameMembers(t *testing.T, got, want []byte, except map[string]string) {
	t.Helper()
	var g, w map[string]json.RawMessage
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("upstream body is not JSON: %v", err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	for k, v := range except {
		if v == "" {
			delete(w, k) // the upstream must not get it
			continue
		}
		w[k] = json.RawMessage(v)
	}
	for k, v := range w {
		if string(v) == "*" {
			if len(g[k]) == 0 {
				t.Errorf("upstream body has no member %q", k)
			}
			continue
		}
		if !bytes.Equal(g[k], v) {
			t.Errorf("upstream body member %q = %.200s, want %.200s", k, g[k], v)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("upstream body has member %q the client did not send", k)
		}
	}
}

// claudeStream is an Anthropic event stream with what Claude Code reads:
// a thinking block with its signature, text, a tool call, cache usage, and
// an event type the gateway does not know.
const claudeStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_up1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":9000,"output_tokens":1,"service_tier":"standard"}}}

event: ping
data: {"type": "ping"}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"I will print "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"the word."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYIBxgCKkA-sig"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Running it."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01X","name":"Bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":" \"echo hi\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: future_event
data: {"type":"future_event","note":"unknown to the gateway"}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}

event: message_stop
data: {"type":"message_stop"}

`

type sseEvent struct{ name, data string }

func readEvents(t *testing.T, body string) []sseEvent {
	t.Helper()
	r := sse.NewReader(strings.NewReader(body), 1<<24)
	var out []sseEvent
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		out = append(out, sseEvent{ev.Event, string(ev.Data)})
	}
}

// TestClaudeCodePassesThrough replays Claude Code's two recorded turns
// against an Anthropic route: the upstream gets the body as the agent sent
// it (the route's model in place of the client's) and its protocol headers,
// and the agent gets every event as the upstream sent it, the final usage
// with the gateway's cost added.
func TestClaudeCodePassesThrough(t *testing.T) {
	for _, turn := range []string{"claude-code-2.1.328-turn1.json", "claude-code-2.1.328-turn2.json"} {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", turn, stream), func(t *testing.T) {
				f := loadFixture(t, turn)
				url, claude, openai := pairGateway(t, "anthropic")
				claude.Script(providertest.Response{Body: claudeStream, Header: map[string]string{"Content-Type": "text/event-stream"}})
				body := withTop(t, f.Body, map[string]string{"model": `"m"`, "stream": fmt.Sprint(stream)})
				hdr := []string{"x-api-key", testKey, "Authorization", ""}
				for k, v := range f.Headers {
					hdr = append(hdr, k, v)
				}
				a := callPath(t, url+"/api"+f.Path, string(body), hdr...)
				if a.status != 200 {
					t.Fatalf("status %d: %s", a.status, a.body)
				}
				if claude.Calls() != 1 || openai.Calls() != 0 {
					t.Fatalf("upstream calls: anthropic %d, openai %d; want 1, 0", claude.Calls(), openai.Calls())
				}
				got := claude.Requests()[0]
				sameMembers(t, got.Body, body, map[string]string{"model": `"claude-x"`, "stream": "true"})
				for _, h := range []string{"anthropic-beta", "anthropic-version"} {
					if g := got.Header.Get(h); g != f.Headers[h] {
						t.Errorf("upstream %s = %q, want %q", h, g, f.Headers[h])
					}
				}
				if got.Header.Get("X-Api-Key") != "claude-secret" {
					t.Errorf("upstream x-api-key is not the provider's key")
				}
				if stream {
					checkPassedEvents(t, readEvents(t, claudeStream), readEvents(t, a.body))
				} else {
					checkClaudeMessage(t, a.body)
				}
			})
		}
	}
}

// checkPassedEvents: the same events, names and data, but for the cost the
// gateway adds to message_delta's usage.
func checkPassedEvents(t *testing.T, want, got []sseEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d:\n%v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		if want[i].name == "message_delta" {
			var m struct {
				Usage map[string]any `json:"usage"`
			}
			if err := json.Unmarshal([]byte(g.data), &m); err != nil {
				t.Fatal(err)
			}
			// 12 input at 1, 40 output at 2 USD per million; cache reads
			// and writes at the input price.
			if cost, ok := m.Usage["cost"].(float64); !ok || cost <= 0 {
				t.Errorf("message_delta usage has no cost: %s", g.data)
			}
			g.data = strings.Replace(g.data, fmt.Sprintf(`,"cost":%v`, m.Usage["cost"]), "", 1)
		}
		if g != want[i] {
			t.Errorf("event %d = %q %s\nwant %q %s", i, g.name, g.data, want[i].name, want[i].data)
		}
	}
}

func checkClaudeMessage(t *testing.T, body string) {
	t.Helper()
	var m struct {
		ID         string            `json:"id"`
		Model      string            `json:"model"`
		Content    []json.RawMessage `json:"content"`
		StopReason string            `json:"stop_reason"`
		Usage      map[string]any    `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	want := []string{
		`{"type":"thinking","thinking":"I will print the word.","signature":"EqQBCkYIBxgCKkA-sig"}`,
		`{"type":"text","text":"Running it."}`,
		`{"type":"tool_use","id":"toolu_01X","name":"Bash","input":{"command": "echo hi"}}`,
	}
	if len(m.Content) != len(want) {
		t.Fatalf("content = %s", body)
	}
	for i, w := range want {
		if string(m.Content[i]) != w {
			t.Errorf("block %d = %s, want %s", i, m.Content[i], w)
		}
	}
	if m.ID != "msg_up1" || m.Model != "claude-x" || m.StopReason != "tool_use" {
		t.Errorf("id, model, stop_reason = %q, %q, %q", m.ID, m.Model, m.StopReason)
	}
	for k, v := range map[string]float64{"input_tokens": 12, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 9000, "output_tokens": 40} {
		if m.Usage[k] != v {
			t.Errorf("usage.%s = %v, want %v", k, m.Usage[k], v)
		}
	}
	if m.Usage["service_tier"] != "standard" {
		t.Errorf("usage lost a field the gateway does not know: %v", m.Usage)
	}
	if c, _ := m.Usage["cost"].(float64); c <= 0 {
		t.Errorf("usage has no cost: %v", m.Usage)
	}
}

// TestMessagesOnOpenAIRouteNamesDroppedHints: a Messages request with a
// hint that Chat Completions has no field for is translated for an OpenAI
// route, and the answer names the hint in x-gateway-dropped; on an
// Anthropic route it passes through and nothing is named.
func TestMessagesOnOpenAIRouteNamesDroppedHints(t *testing.T) {
	body := `{"model":"m","max_tokens":50,"context_management":{"edits":[]},"messages":[{"role":"user","content":"Say hello"}]}`
	for _, first := range []string{"openai", "anthropic"} {
		url, up1, _ := pairGateway(t, first)
		a := callPath(t, url+"/api/v1/messages", body, "anthropic-version", "2023-06-01")
		if a.status != 200 || up1.Calls() != 1 {
			t.Fatalf("%s route: status %d, calls %d: %s", first, a.status, up1.Calls(), a.body)
		}
		got, want := a.header.Get("X-Gateway-Dropped"), "context_management"
		if first == "anthropic" {
			want = ""
			if _, ok := up1.Requests()[0].JSON["context_management"]; !ok {
				t.Errorf("anthropic route: context_management did not reach the upstream")
			}
		}
		if got != want {
			t.Errorf("%s route: x-gateway-dropped = %q, want %q", first, got, want)
		}
	}
}

// TestCaseVariantsOfGatewayFieldsAreRefused: on every API, a key that
// differs from one the gateway sets or owns only in case is refused with a
// 400 naming it, and no upstream is called; on Messages and Responses,
// whose bodies pass through as written, so is a repeat of one.
func TestCaseVariantsOfGatewayFieldsAreRefused(t *testing.T) {
	url, up1, up2 := pairGateway(t, "openai")
	for _, tc := range []struct{ path, body, field string }{
		{"/api/v1/chat/completions", `{"model":"m","MODEL":"other","messages":[{"role":"user","content":"hi"}]}`, "MODEL"},
		{"/api/v1/chat/completions", `{"model":"m","Stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Stream"},
		{"/api/v1/messages", `{"model":"m","model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"/api/v1/messages", `{"model":"m","max_tokens":5,"Gateway":{},"messages":[{"role":"user","content":"hi"}]}`, "Gateway"},
		{"/api/v1/responses", `{"model":"m","input":"hi","STREAM":false}`, "STREAM"},
	} {
		a := callPath(t, url+tc.path, tc.body)
		if a.status != 400 || !strings.Contains(a.body, fmt.Sprintf("%q", tc.field)) {
			t.Errorf("%s %s: status %d, body %s; want 400 naming %q", tc.path, tc.body, a.status, a.body, tc.field)
		}
	}
	if n := up1.Calls() + up2.Calls(); n != 0 {
		t.Errorf("%d upstream calls, want 0", n)
	}
}

// TestPassedThroughStreamIsBilledOnProviderUsage: a stream passed through
// is priced at its last usage event, before its end is read, on the
// provider's counts, even when the gateway's byte estimate of the output
// is larger.
func TestPassedThroughStreamIsBilledOnProviderUsage(t *testing.T) {
	text := strings.Repeat("word ", 80) // 400 bytes: an estimate of 100 tokens
	stream := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}

event: message_stop
data: {"type":"message_stop"}

`
	url, claude, _ := pairGateway(t, "anthropic")
	claude.SetDefault(providertest.Response{Body: stream, Header: map[string]string{"Content-Type": "text/event-stream"}})
	a := callPath(t, url+"/api/v1/messages", `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	// 10 input tokens at 1 USD, 3 output at 2 USD per million.
	if !strings.Contains(a.body, `"usage":{"output_tokens":3,"cost":0.000016}`) {
		t.Errorf("message_delta does not bill the provider's usage: %s", a.body)
	}
}

// TestPassThroughExactlyOnce: a keyed Messages stream passed through is
// replayed byte for byte, a retry while it runs joins it, and neither
// calls the provider again; a pass-through route that fails before output
// falls back to a translated one.
func TestPassThroughExactlyOnce(t *testing.T) {
	url, claude, openai := pairGateway(t, "anthropic")
	claude.Script(providertest.Response{Body: claudeStream, HeaderDelay: 300 * time.Millisecond, Header: map[string]string{"Content-Type": "text/event-stream"}})
	body := `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	key := []string{"Idempotency-Key", "pass-once", "anthropic-version", "2023-06-01"}
	var wg sync.WaitGroup
	answers := make([]answer, 2)
	call := func(i int) {
		defer wg.Done()
		answers[i] = callURL(context.Background(), url+"/api/v1/messages", body, key...)
	}
	wg.Add(2)
	go call(0)
	// The second joins while the first waits for the provider's head
	// (HeaderDelay): its call has reached the provider.
	waitCalls(t, claude, 1)
	go call(1)
	wg.Wait()
	replay := callPath(t, url+"/api/v1/messages", body, key...)
	for i, a := range append(answers, replay) {
		if a.err != nil || a.status != 200 || a.body != answers[0].body {
			t.Errorf("answer %d: %v, status %d, same bytes as the first: %v", i, a.err, a.status, a.body == answers[0].body)
		}
	}
	if replay.replayed != "true" || claude.Calls() != 1 || openai.Calls() != 0 {
		t.Errorf("replayed %q; upstream calls anthropic %d, openai %d; want true, 1, 0", replay.replayed, claude.Calls(), openai.Calls())
	}
	checkPassedEvents(t, readEvents(t, claudeStream), readEvents(t, answers[0].body))

	// The anthropic route fails before output: the openai route answers,
	// translated, in the client's protocol.
	claude.Script(providertest.Response{Status: 529})
	a := callPath(t, url+"/api/v1/messages", body, "anthropic-version", "2023-06-01")
	if a.status != 200 || a.provider != "p1" || a.depth != "1" || !strings.Contains(a.body, "event: message_stop") {
		t.Errorf("fallback: status %d, provider %q, depth %q: %.300s", a.status, a.provider, a.depth, a.body)
	}
}

// TestResponsesPassThroughReplay: a keyed Responses stream passed through
// to a Responses upstream is replayed byte for byte, terminal event and
// its cost included, without a second call.
func TestResponsesPassThroughReplay(t *testing.T) {
	up := providertest.NewResponses(t)
	url := oneRouteGateway(t, "openai-responses", up.URL())
	body := `{"model":"m","stream":true,"store":false,"input":"hi","client_metadata":{"k":"v"}}`
	first := callPath(t, url+"/api/v1/responses", body, "Idempotency-Key", "rs-once")
	again := callPath(t, url+"/api/v1/responses", body, "Idempotency-Key", "rs-once")
	if first.status != 200 || again.body != first.body || again.replayed != "true" || up.Calls() != 1 {
		t.Fatalf("status %d, same bytes %v, replayed %q, calls %d", first.status, again.body == first.body, again.replayed, up.Calls())
	}
	if !strings.Contains(first.body, "event: response.completed") || !strings.Contains(first.body, `"cost":`) {
		t.Errorf("the stream lacks its terminal event with the cost: %.400s", first.body)
	}
	if _, ok := up.Requests()[0].JSON["client_metadata"]; !ok {
		t.Errorf("client_metadata did not pass through")
	}
}

// TestTranslatedRoutesNameWhatTheyDrop: a Chat Completions field that a
// translating adapter does not read (one it knows as a hint, one nobody
// knows, a message's name) is named in x-gateway-dropped, on the anthropic
// and openai-responses routes, and does not reach the upstream.
func TestTranslatedRoutesNameWhatTheyDrop(t *testing.T) {
	for _, api := range []string{"anthropic", "openai-responses"} {
		var up *providertest.Server
		if api == "anthropic" {
			up = providertest.NewAnthropic(t)
		} else {
			up = providertest.NewResponses(t)
		}
		url := oneRouteGateway(t, api, up.URL())
		res := callPath(t, url+"/api/v1/chat/completions", `{"model":"m","seed":7,"frobnicate":{"x":1},"messages":[{"role":"user","name":"ann","content":"hi"}]}`)
		if res.status != 200 {
			t.Fatalf("%s: status %d: %s", api, res.status, res.body)
		}
		if got, want := res.header.Get("X-Gateway-Dropped"), "frobnicate, seed, messages[].name"; got != want {
			t.Errorf("%s: x-gateway-dropped = %q, want %q", api, got, want)
		}
		if b := string(up.Requests()[0].Body); strings.Contains(b, "frobnicate") || strings.Contains(b, "ann") {
			t.Errorf("%s: a dropped field reached the upstream: %s", api, b)
		}
	}
}

// oneRouteGateway serves model m from one route, to a provider of the given
// api at baseURL (its key "up-secret"), on loopback, its handler wrapped in
// wrap when given; it returns the server's URL.
func oneRouteGateway(t *testing.T, api, baseURL string, wrap ...func(http.Handler) http.Handler) string {
	t.Helper()
	url, _ := oneRoute{api: api, baseURL: baseURL, wrap: wrap}.start(t)
	return url
}

// oneRoute is a gateway whose model m has one route, to a provider of api
// at baseURL (its key "up-secret").
type oneRoute struct {
	api, baseURL string
	// prices are the route's price members (YAML flow); "" means input 1,
	// output 2, and web_search (which Codex declares on every turn) at
	// $0.01 a call.
	prices string
	// metrics, when set, receives the EMF lines; accounts, when set, are
	// the ledger and key store.
	metrics  io.Writer
	accounts httpapi.Accounts
	wrap     []func(http.Handler) http.Handler
	// tokens, when set, counts an answer billed without usage.
	tokens *tokenize.Counter
}

// start serves the gateway on loopback; it returns its URL and the app.
func (o oneRoute) start(t *testing.T) (string, *app.App) {
	t.Helper()
	if o.prices == "" {
		o.prices = "input_price: 1, output_price: 2, tool_prices: {web_search: 0.01}"
	}
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: up, api: %s, base_url: %q, api_key_env: UP_KEY}
models:
  - id: m
    routes: [{provider: up, model: up-model, %s}]
projects:
  - id: proj
    keys: [{key: %s}]
`, o.api, o.baseURL, o.prices, testKey))
	if err != nil {
		t.Fatal(err)
	}
	opts := app.Options{Getenv: func(string) string { return "up-secret" }, Logger: slog.New(slog.DiscardHandler), Accounts: o.accounts, Tokens: o.tokens}
	if o.metrics != nil {
		opts.Metrics = metrics.NewEMF(o.metrics, "test")
	}
	a, err := app.FromConfig(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler
	for _, w := range o.wrap {
		h = w(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, a
}

// upstreamFor starts a fake upstream speaking api: openai,
// openai-responses or anthropic.
func upstreamFor(t *testing.T, api string) *providertest.Server {
	t.Helper()
	switch api {
	case "anthropic":
		return providertest.NewAnthropic(t)
	case "openai-responses":
		return providertest.NewResponses(t)
	case "openai":
		return providertest.New(t)
	}
	t.Fatalf("no fake upstream for api %q", api)
	return nil
}

// TestPairMetrics: an answered request's metric lines name its client API
// and the answering upstream's, say whether it passed through, and count
// each field its translation dropped, as x-gateway-dropped names them.
func TestPairMetrics(t *testing.T) {
	body := `{"model":"m","max_tokens":50,"context_management":{"edits":[]},"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		api     string
		pass    float64
		dropped []string
	}{
		{"anthropic", 1, nil},
		{"openai", 0, []string{"context_management"}},
	} {
		var up *providertest.Server
		if tc.api == "anthropic" {
			up = providertest.NewAnthropic(t)
		} else {
			up = providertest.New(t)
		}
		buf := &syncBuffer{}
		// The metric lines are written once the handler has answered:
		// served says it returned.
		served := make(chan struct{}, 1)
		url, _ := oneRoute{api: tc.api, baseURL: up.URL(), metrics: buf, wrap: []func(http.Handler) http.Handler{func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r)
				served <- struct{}{}
			})
		}}}.start(t)
		a := callPath(t, url+"/api/v1/messages", body)
		if a.status != 200 {
			t.Fatalf("%s: status %d: %s", tc.api, a.status, a.body)
		}
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the handler never returned", tc.api)
		}
		if got := a.header.Get("X-Gateway-Dropped"); got != strings.Join(tc.dropped, ", ") {
			t.Errorf("%s: x-gateway-dropped %q, want %q", tc.api, got, strings.Join(tc.dropped, ", "))
		}
		var pair map[string]any
		var fields []string
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil {
				continue
			}
			if _, ok := m["PairRequests"]; ok {
				pair = m
			}
			if f, ok := m["Field"].(string); ok && m["DroppedFields"] == 1.0 {
				fields = append(fields, f)
			}
		}
		if pair["ClientAPI"] != "messages" || pair["UpstreamAPI"] != tc.api || pair["PassThrough"] != tc.pass {
			t.Errorf("%s: pair line %v", tc.api, pair)
		}
		if strings.Join(fields, ", ") != strings.Join(tc.dropped, ", ") {
			t.Errorf("%s: DroppedFields lines for %v, want %v", tc.api, fields, tc.dropped)
		}
	}
}
