package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// claudeGateway is a gateway whose providers are an Anthropic-protocol
// upstream (claude), an OpenAI one (p1) and an in-process simulated one
// that speaks the Anthropic protocol (sim), with the models m (claude, then
// p1), vendor/b (p1) and s (sim), in that order.
type claudeGateway struct {
	*gateway
	claude, p1 *providertest.Server
}

// newClaudeGateway adds claudeYAML to claude's entry and extraYAML to the
// config.
func newClaudeGateway(t *testing.T, claudeYAML, extraYAML string) *claudeGateway {
	t.Helper()
	cg := &claudeGateway{gateway: &gateway{logs: &syncBuffer{}}, claude: providertest.NewAnthropic(t), p1: providertest.New(t)}
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: claude, api: anthropic, base_url: %q, api_key_env: CLAUDE_KEY%s}
  - {name: p1, api: openai, base_url: %q}
  - {name: sim, api: simulated, simulated: {protocol: anthropic}}
models:
  - id: m
    routes:
      - {provider: claude, model: claude-x, input_price: 1, output_price: 2}
      - {provider: p1, model: up-1, input_price: 1, output_price: 2}
  - id: vendor/b
    routes:
      - {provider: p1, model: up-b, input_price: 1, output_price: 2}
  - id: s
    routes:
      - {provider: sim, model: sim-x, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %s}, {key: %s}]
%s`, cg.claude.URL(), claudeYAML, cg.p1.URL(), testKey, otherKey, extraYAML))
	if err != nil {
		t.Fatal(err)
	}
	cg.cfg, cg.env = cfg, map[string]string{"CLAUDE_KEY": "claude-secret"}
	cg.url = cg.instance(t, nil)
	return cg
}

// send makes one request with exactly the headers given (pairs; an empty
// value leaves the header out).
func send(t *testing.T, method, url, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Add(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, body: string(b), header: resp.Header,
		reqID: resp.Header.Get("X-Request-Id"), provider: resp.Header.Get("X-Gateway-Provider"),
		depth: resp.Header.Get("X-Gateway-Route-Depth"), replayed: resp.Header.Get("Idempotency-Replayed")}
	if resp.StatusCode >= 400 {
		var e apiError
		json.Unmarshal(b, &e)
		a.code = e.Error.Code
	}
	return a
}

// anthropicError is Anthropic's error envelope with the gateway's code.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type, Message, Code, Param string
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// expectAnthropicError checks that a is an error of status in Anthropic's
// envelope, of Anthropic type typ and gateway code code.
func expectAnthropicError(t *testing.T, what string, a answer, status int, typ, code string) anthropicError {
	t.Helper()
	var e anthropicError
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != status || e.Type != "error" || e.Error.Type != typ ||
		e.Error.Code != code || e.Error.Message == "" || e.RequestID != a.reqID || a.header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: %d %s, want %d in Anthropic's envelope with type %s and code %s", what, a.status, a.body, status, typ, code)
	}
	return e
}

const countBody = `{"model":"m","system":"Be brief.","messages":[{"role":"user","content":"Say hello"}]`

// countEstimate is what the gateway estimates for countBody: "Be brief."
// and "Say hello", 18 bytes, four bytes a token.
const countEstimate = `{"input_tokens":5}`

func countTokens(t *testing.T, url, body string, header ...string) answer {
	t.Helper()
	h := append([]string{"X-Api-Key", testKey, "Anthropic-Version", "2023-06-01", "Content-Type", "application/json"}, header...)
	return send(t, http.MethodPost, url+"/api/v1/messages/count_tokens", body, h...)
}

// TestCountTokensForwarded: count_tokens goes to the first live route that
// speaks Messages, with the route's model, without the gateway's fields and
// with the client's version and betas and the provider's key; the
// upstream's answer comes back as it sent it, with the provider's headers.
// It bills nothing and calls no generation.
func TestCountTokensForwarded(t *testing.T) {
	g := newClaudeGateway(t, "", "")
	g.claude.ScriptCountTokens(providertest.Response{Body: `{"input_tokens": 1234, "extra": true}`})
	body := countBody + `,"tools":[],"provider":{"order":["claude"]},"gateway":{"retry":{"max_total_attempts":2}}}`
	a := countTokens(t, g.url, body, "Anthropic-Beta", "token-counting-2024-11-01", "Anthropic-Beta", "other-beta", "Idempotency-Key", key(t))
	if a.status != 200 || a.body != `{"input_tokens": 1234, "extra": true}` || a.provider != "claude" || a.depth != "0" ||
		a.header.Get("X-Gateway-Estimated") != "" || a.header.Get("Content-Type") != "application/json" || a.reqID == "" {
		t.Errorf("answer: %d %s %v", a.status, a.body, a.header)
	}
	reqs := g.claude.CountTokensRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d count_tokens calls, want 1", len(reqs))
	}
	r := reqs[0]
	if want := `{"model":"claude-x","system":"Be brief.","messages":[{"role":"user","content":"Say hello"}],"tools":[]}`; string(r.Body) != want {
		t.Errorf("upstream body %s, want %s", r.Body, want)
	}
	if r.Header.Get("X-Api-Key") != "claude-secret" || r.Header.Get("Anthropic-Version") != "2023-06-01" || r.Header.Get("Authorization") != "" ||
		!cmp.Equal(r.Header.Values("Anthropic-Beta"), []string{"token-counting-2024-11-01", "other-beta"}) || r.Header.Get("Idempotency-Key") != "" {
		t.Errorf("upstream headers: %v", r.Header)
	}

	// ?beta=true (Claude Code's) and Authorization: Bearer are as good.
	b := send(t, http.MethodPost, g.url+"/api/v1/messages/count_tokens?beta=true", countBody+"}",
		"Authorization", "Bearer "+testKey, "Anthropic-Version", "2023-06-01")
	if b.status != 200 || b.body != `{"input_tokens":37}` || b.provider != "claude" {
		t.Errorf("with ?beta=true: %d %s", b.status, b.body)
	}

	// The simulated provider of the Anthropic protocol counts too (with the
	// estimate's rule, but as an upstream: no estimate header).
	s := countTokens(t, g.url, strings.Replace(countBody, `"m"`, `"s"`, 1)+"}")
	if s.status != 200 || s.body != countEstimate || s.provider != "sim" || s.header.Get("X-Gateway-Estimated") != "" {
		t.Errorf("simulated: %d %s %v", s.status, s.body, s.header)
	}

	if n, m, p := len(g.claude.CountTokensRequests()), g.claude.Calls(), g.p1.Calls(); n != 2 || m != 0 || p != 0 {
		t.Errorf("upstream calls: %d count_tokens, %d messages, %d chat, want 2, 0, 0", n, m, p)
	}
	usage := func() string {
		g.settle(t)
		u := send(t, http.MethodGet, g.url+"/api/v1/usage", "", "X-Api-Key", testKey)
		var v struct{ Total struct{ Requests int } }
		json.Unmarshal([]byte(u.body), &v)
		return fmt.Sprintf("%d requests", v.Total.Requests)
	}
	if got := usage(); got != "0 requests" {
		t.Errorf("usage after counting only: %s", got)
	}
	// A generation is billed: the ledger does show one.
	if m := send(t, http.MethodPost, g.url+"/api/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		"X-Api-Key", testKey); m.status != 200 {
		t.Fatalf("a message: %d %s", m.status, m.body)
	}
	if got := usage(); got != "1 requests" {
		t.Errorf("usage after a message: %s", got)
	}
}

// TestCountTokensEstimated: a route of another protocol, an upstream that
// fails, one that does not answer within its first_token_timeout: the
// answer is the gateway's estimate, marked; the upstream's 400 is passed on.
func TestCountTokensEstimated(t *testing.T) {
	g := newClaudeGateway(t, ", first_token_timeout: 300ms", "")
	for _, c := range []struct {
		name   string
		script []providertest.Response
		body   string
		calls  int // count_tokens calls the request makes
	}{
		{"a route of another protocol", nil, strings.Replace(countBody, `"m"`, `"vendor/b"`, 1) + "}", 0},
		{"provider.only an OpenAI route", nil, countBody + `,"provider":{"only":["p1"]}}`, 0},
		{"529", []providertest.Response{{Status: 529}}, countBody + "}", 1},
		{"500", []providertest.Response{{Status: 500}}, countBody + "}", 1},
		{"401 (the provider's key)", []providertest.Response{{Status: 401}}, countBody + "}", 1},
		{"429", []providertest.Response{{Status: 429, Header: map[string]string{"retry-after": "5"}}}, countBody + "}", 1},
		{"a 200 without input_tokens", []providertest.Response{{Body: `{"count":3}`}}, countBody + "}", 1},
		{"reset", []providertest.Response{{Reset: true}}, countBody + "}", 1},
		{"no answer within first_token_timeout", []providertest.Response{{Hang: true}}, countBody + "}", 1},
	} {
		g.claude.ScriptCountTokens(c.script...)
		before := len(g.claude.CountTokensRequests())
		a := countTokens(t, g.url, c.body)
		if a.status != 200 || a.body != countEstimate+"\n" || a.header.Get("X-Gateway-Estimated") != "true" || a.provider != "" ||
			a.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %q %v", c.name, a.status, a.body, a.header)
		}
		if n := len(g.claude.CountTokensRequests()) - before; n != c.calls {
			t.Errorf("%s: %d count_tokens calls, want %d", c.name, n, c.calls)
		}
	}
	g.claude.ScriptCountTokens(providertest.Response{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.content: Input should be a valid list"}}`})
	a := countTokens(t, g.url, countBody+"}")
	e := expectAnthropicError(t, "the upstream's 400", a, 400, "invalid_request_error", "provider_rejected")
	if e.Error.Message != "provider rejected the request: messages.0.content: Input should be a valid list" {
		t.Errorf("the upstream's 400: %s", e.Error.Message)
	}
	// No generation ran, so no provider's health changed: a count after all
	// those failures still reaches claude.
	if b := countTokens(t, g.url, countBody+"}"); b.status != 200 || b.provider != "claude" {
		t.Errorf("after the failures: %d %s from %q", b.status, b.body, b.provider)
	}
	if m, p := g.claude.Calls(), g.p1.Calls(); m != 0 || p != 0 {
		t.Errorf("generations: claude %d, p1 %d", m, p)
	}
}

// TestCountTokensRefused: what count_tokens refuses, in Anthropic's
// envelope, before any upstream call.
func TestCountTokensRefused(t *testing.T) {
	g := newClaudeGateway(t, "", "")
	withKey := []string{"X-Api-Key", testKey, "Anthropic-Version", "2023-06-01"}
	for _, c := range []struct {
		name, body string
		header     []string
		status     int
		typ, code  string
	}{
		{"no key", countBody + "}", []string{"Anthropic-Version", "2023-06-01"}, 401, "authentication_error", "invalid_api_key"},
		{"an unknown key", countBody + "}", []string{"Authorization", "Bearer sk-nope", "Anthropic-Version", "2023-06-01"}, 401, "authentication_error", "invalid_api_key"},
		{"an unknown model", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, withKey, 404, "not_found_error", "model_not_found"},
		{"no messages", `{"model":"m"}`, withKey, 400, "invalid_request_error", "invalid_request"},
		{"not JSON", `{"model":`, withKey, 400, "invalid_request_error", "invalid_request"},
		{"an unknown provider", countBody + `,"provider":{"order":["nobody"]}}`, withKey, 400, "invalid_request_error", "invalid_request"},
	} {
		expectAnthropicError(t, c.name, send(t, http.MethodPost, g.url+"/api/v1/messages/count_tokens", c.body, c.header...), c.status, c.typ, c.code)
	}
	a := send(t, http.MethodGet, g.url+"/api/v1/messages/count_tokens", "", "X-Api-Key", testKey)
	expectAnthropicError(t, "GET", a, 405, "invalid_request_error", "method_not_allowed")
	if a.header.Get("Allow") != "POST" {
		t.Errorf("GET: Allow %q", a.header.Get("Allow"))
	}
	if n := len(g.claude.CountTokensRequests()); n != 0 {
		t.Errorf("%d count_tokens calls, want none", n)
	}
}

// TestCountTokensAtCapacity: with every server.max_in_flight slot taken by
// a generation, count_tokens is refused as a generation is (429 capacity,
// in Anthropic's envelope) and calls no upstream.
func TestCountTokensAtCapacity(t *testing.T) {
	g := newClaudeGateway(t, "", "server: {max_in_flight: 1}\n")
	g.claude.Script(providertest.Response{Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		callURL(ctx, g.url+"/api/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	}()
	defer func() { cancel(); <-done }()
	for g.claude.Calls() == 0 { // the generation holds the one slot
		select {
		case <-done:
			t.Fatal("the generation ended before it reached the upstream")
		default:
		}
		time.Sleep(time.Millisecond)
	}
	a := countTokens(t, g.url, countBody+"}")
	expectAnthropicError(t, "at capacity", a, 429, "rate_limit_error", "capacity")
	if a.header.Get("X-Gateway-Admission-Refused") != "true" || a.header.Get("Retry-After") == "" {
		t.Errorf("at capacity: %d %s %v", a.status, a.body, a.header)
	}
	if n := len(g.claude.CountTokensRequests()); n != 0 {
		t.Errorf("%d count_tokens calls at capacity, want none", n)
	}
	// The generation itself is refused for capacity, as ever.
	if b := mustCall(t, g.url, chatBody("")); b.status != 429 || b.code != "capacity" {
		t.Errorf("a generation at capacity: %d %s", b.status, b.body)
	}
}

// The estimate is the rule messages.EstimateInputTokens documents.
func TestCountEstimateIsTheDocumentedRule(t *testing.T) {
	if got := fmt.Sprintf(`{"input_tokens":%d}`, messages.EstimateInputTokens([]byte(countBody+"}"))); got != countEstimate {
		t.Errorf("estimate %s, want %s", got, countEstimate)
	}
}
