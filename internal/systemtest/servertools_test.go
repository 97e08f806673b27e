package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// A Claude answer that searched the web three times (Anthropic bills $10
// per 1,000 searches) and wrote 1,100 prompt tokens to the cache, 1,000 of
// them to the one-hour cache (billed at twice the input price, against
// 1.25 times for the five-minute one): as Anthropic streams it, the counts
// in message_start and again, final, in message_delta.
const searchingClaudeStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_s1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":1100,"cache_read_input_tokens":9000,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":1000},"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"buzzgate\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","title":"Buzzgate","url":"https://example.com/","encrypted_content":"EqgfCioIARgB","page_age":null}]}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Done."}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":12,"cache_creation_input_tokens":1100,"cache_read_input_tokens":9000,"output_tokens":40,"server_tool_use":{"web_search_requests":3,"web_fetch_requests":0}}}

event: message_stop
data: {"type":"message_stop"}

`

// searchingClaudeNanos is its cost at Claude Sonnet 4.5's list prices
// (input $3, 5-minute cache write $3.75, 1-hour cache write $6, cache read
// $0.30, output $15 per million tokens; $0.01 a search):
// 12×3 + 100×3.75 + 1,000×6 + 9,000×0.30 + 40×15 = 9,711 USD per million
// tokens' worth, plus 3 × $0.01.
const (
	claudeSearchPrices   = "input_price: 3, output_price: 15, cache_read_price: 0.30, cache_write_price: 3.75, cache_write_1h_price: 6, tool_prices: {web_search: 0.01}"
	searchingClaudeNanos = 9_711_000 + 30_000_000
)

// A Responses answer that searched the web twice and ran code in two
// containers (three code_interpreter_call items, two in one container),
// as OpenAI streams it: each item done as it ends, then the Response
// with every item and the usage.
var searchingResponsesStream = func() string {
	items := []string{
		`{"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"buzzgate"}}`,
		`{"id":"ws_2","type":"web_search_call","status":"completed","action":{"type":"search","query":"buzzgate docs"}}`,
		`{"id":"ci_1","type":"code_interpreter_call","status":"completed","code":"print(1)","container_id":"cntr_a","outputs":null}`,
		`{"id":"ci_2","type":"code_interpreter_call","status":"completed","code":"print(2)","container_id":"cntr_a","outputs":null}`,
		`{"id":"ci_3","type":"code_interpreter_call","status":"completed","code":"print(3)","container_id":"cntr_b","outputs":null}`,
	}
	msg := `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Done.","annotations":[]}]}`
	resp := func(status, output, usage string) string {
		return `{"id":"resp_s1","object":"response","created_at":1700000000,"status":"` + status + `","model":"gpt-5","output":` + output + `,"usage":` + usage + `}`
	}
	var b strings.Builder
	seq := 0
	ev := func(typ, rest string) {
		fmt.Fprintf(&b, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, rest)
		seq++
	}
	ev("response.created", `"response":`+resp("in_progress", "[]", "null"))
	for i, it := range items {
		ev("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":%s`, i, strings.Replace(it, `"completed"`, `"in_progress"`, 1)))
		ev("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, i, it))
	}
	n := len(items)
	ev("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}`, n))
	ev("response.output_text.delta", fmt.Sprintf(`"item_id":"msg_1","output_index":%d,"content_index":0,"delta":"Done."`, n))
	ev("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, n, msg))
	all := "[" + strings.Join(append(items, msg), ",") + "]"
	ev("response.completed", `"response":`+resp("completed", all,
		`{"input_tokens":100,"input_tokens_details":{"cached_tokens":0},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":150}`))
	return b.String()
}()

// Its cost: 100×2 + 50×8 USD per million tokens' worth ($0.0006), two
// searches at $0.01 and two containers at $0.03.
const (
	responsesToolPrices     = "input_price: 2, output_price: 8, tool_prices: {web_search: 0.01, code_interpreter: 0.03}"
	searchingResponsesNanos = 600_000 + 20_000_000 + 60_000_000
)

func sseResponse(body string) providertest.Response {
	return providertest.Response{Body: body, Header: map[string]string{"Content-Type": "text/event-stream"}}
}

// TestServerToolsBilled: an answer is billed what the provider bills for
// it beyond the tokens, its server tool calls at the route's tool_prices
// and its one-hour cache writes at cache_write_1h_price, on the pairs that
// pass through (Messages to anthropic, Responses to openai-responses) and
// on translated ones, whole and streamed; the answer's usage.cost and the
// ledger entry agree to the nano-dollar.
func TestServerToolsBilled(t *testing.T) {
	const (
		msgTools = `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]`
		rsTools  = `,"tools":[{"type":"web_search"},{"type":"code_interpreter","container":{"type":"auto"}}]`
	)
	cases := []struct {
		name, api, prices, stream string
		clients                   []struct{ name, path, body string }
		wantNanos                 int64
		// usage is a member the answer's usage must report ("" none).
		usage string
	}{
		{"messages to anthropic", "anthropic", claudeSearchPrices, searchingClaudeStream, []struct{ name, path, body string }{
			{"whole", "/api/v1/messages", `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"search","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]` + msgTools + `}`},
			{"stream", "/api/v1/messages", `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"search"}]` + msgTools + `}`},
		}, searchingClaudeNanos, `"server_tool_use":{"web_search_requests":3`},
		{"responses to openai-responses", "openai-responses", responsesToolPrices, searchingResponsesStream, []struct{ name, path, body string }{
			{"whole", "/api/v1/responses", `{"model":"m","input":"search"` + rsTools + `}`},
			{"stream", "/api/v1/responses", `{"model":"m","input":"search","stream":true` + rsTools + `}`},
		}, searchingResponsesNanos, ""},
		// Chat Completions' search models search before every answer,
		// and OpenAI bills a call per answer, which the answer does not
		// count: 100×2 + 50×8 less 80 cached at 0.5, and one search.
		{"chat to openai", "openai", "input_price: 2, output_price: 8, cache_read_price: 0.5, tool_prices: {web_search: 0.025}", "", []struct{ name, path, body string }{
			{"whole", "/api/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"search"}],"web_search_options":{}}`},
			{"stream", "/api/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"search"}],"web_search_options":{}}`},
		}, 480_000 + 25_000_000, `"server_tool_use":{"web_search_requests":1}`},
		// Translated: the provider's counts are billed whichever client
		// API the answer goes back in.
		{"chat to anthropic", "anthropic", claudeSearchPrices, searchingClaudeStream, []struct{ name, path, body string }{
			{"whole", "/api/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"search"}]}`},
			{"stream", "/api/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"search"}]}`},
		}, searchingClaudeNanos, `"server_tool_use":{"web_search_requests":3`},
		{"responses to anthropic", "anthropic", claudeSearchPrices, searchingClaudeStream, []struct{ name, path, body string }{
			{"whole", "/api/v1/responses", `{"model":"m","input":"search"}`},
			{"stream", "/api/v1/responses", `{"model":"m","input":"search","stream":true}`},
		}, searchingClaudeNanos, ""},
		{"messages to openai-responses", "openai-responses", responsesToolPrices, searchingResponsesStream, []struct{ name, path, body string }{
			{"whole", "/api/v1/messages", `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"search"}]}`},
			{"stream", "/api/v1/messages", `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"search"}]}`},
		}, searchingResponsesNanos, `"server_tool_use":{"code_interpreter_requests":2,"web_search_requests":2}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := upstreamFor(t, c.api)
			if c.api == "openai" {
				up.SetDefault(scriptedSSE(cachedReasoningChunks...))
			} else {
				up.SetDefault(sseResponse(c.stream))
			}
			ledger := memledger.New(memledger.Options{})
			url, gw := oneRoute{api: c.api, baseURL: up.URL(), prices: c.prices, accounts: httpapi.Accounts{Ledger: ledger, Keys: ledger}}.start(t)
			for _, cl := range c.clients {
				t.Run(cl.name, func(t *testing.T) {
					a := callPath(t, url+cl.path, cl.body, "anthropic-version", "2023-06-01")
					if a.status != 200 {
						t.Fatalf("%d %s", a.status, a.body)
					}
					cost, err := costIn(a.body)
					if err != nil {
						t.Fatal(err)
					}
					if got := billing.USDToNanos(cost); got != c.wantNanos {
						t.Errorf("usage.cost %v, want %d nano-USD", cost, c.wantNanos)
					}
					if c.usage != "" && !strings.Contains(a.body, c.usage) {
						t.Errorf("the answer's usage does not report %s:\n%s", c.usage, a.body)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if err := gw.Finisher.Wait(ctx); err != nil {
						t.Fatal(err)
					}
					e, err := ledger.Entry(context.Background(), a.reqID)
					if err != nil || e.CostNanos != c.wantNanos {
						t.Errorf("ledger entry %+v, %v; want %d nano-USD", e, err, c.wantNanos)
					}
				})
			}
		})
	}
}

// errorParam is the param of an error answer in the OpenAI or the
// Anthropic envelope.
func errorParam(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Param *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Param == nil {
		t.Fatalf("no error param in %s", body)
	}
	return *e.Error.Param
}

// TestServerToolsUnpricedRefused: a request that declares a server tool
// the provider bills per call, or a mode it bills above the route's
// prices, on a route that would carry it and does not price it, is refused
// with a 400 invalid_request naming the field, before any provider call;
// streamed or not, on every client API.
func TestServerToolsUnpricedRefused(t *testing.T) {
	msg := func(extra string) string {
		return `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	cases := []struct {
		name, api, path, body string
		header                []string
		param                 string
	}{
		{"messages web_search", "anthropic", "/api/v1/messages",
			msg(`,"tools":[{"name":"get_time","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}]`), nil, "tools[1]"},
		{"messages web_search streamed", "anthropic", "/api/v1/messages",
			msg(`,"stream":true,"tools":[{"type":"web_search_20260209","name":"web_search"}]`), nil, "tools[0]"},
		{"messages code_execution", "anthropic", "/api/v1/messages",
			msg(`,"tools":[{"type":"code_execution_20250825","name":"code_execution"}]`), nil, "tools[0]"},
		{"messages long-context beta", "anthropic", "/api/v1/messages", msg(""),
			[]string{"anthropic-beta", "interleaved-thinking-2025-05-14,context-1m-2025-08-07"}, "anthropic-beta"},
		{"messages inference_geo us", "anthropic", "/api/v1/messages", msg(`,"inference_geo":"us"`), nil, "inference_geo"},
		{"responses web_search", "openai-responses", "/api/v1/responses",
			`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"web_search"}]}`, nil, "tools[1]"},
		{"responses web_search_preview streamed", "openai-responses", "/api/v1/responses",
			`{"model":"m","input":"hi","stream":true,"tools":[{"type":"web_search_preview_2025_03_11"}]}`, nil, "tools[0]"},
		{"responses code_interpreter", "openai-responses", "/api/v1/responses",
			`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, nil, "tools[0]"},
		{"responses image_generation", "openai-responses", "/api/v1/responses",
			`{"model":"m","input":"hi","tools":[{"type":"image_generation"}]}`, nil, "tools[0]"},
		{"responses background", "openai-responses", "/api/v1/responses", `{"model":"m","input":"hi","background":true}`, nil, "background"},
		{"chat audio output", "openai", "/api/v1/chat/completions",
			`{"model":"m","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},"messages":[{"role":"user","content":"hi"}]}`, nil, "audio"},
		{"chat modalities audio", "openai", "/api/v1/chat/completions",
			`{"model":"m","stream":true,"modalities":["audio","text"],"messages":[{"role":"user","content":"hi"}]}`, nil, "modalities"},
		{"chat web_search_options", "openai", "/api/v1/chat/completions",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`, nil, "web_search_options"},
		{"chat web_search_options streamed", "openai", "/api/v1/chat/completions",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"web_search_options":{"search_context_size":"low"}}`, nil, "web_search_options"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := upstreamFor(t, c.api)
			url, _ := oneRoute{api: c.api, baseURL: up.URL(), prices: "input_price: 1, output_price: 2, tool_prices: {file_search: 0.0025}"}.start(t)
			a := callPath(t, url+c.path, c.body, append([]string{"anthropic-version", "2023-06-01"}, c.header...)...)
			if a.status != 400 || !strings.Contains(a.body, "invalid_request") {
				t.Fatalf("%d %s, want 400 invalid_request", a.status, a.body)
			}
			if got := errorParam(t, a.body); got != c.param {
				t.Errorf("param %q, want %q: %s", got, c.param, a.body)
			}
			if n := up.Calls(); n != 0 {
				t.Errorf("the upstream was called %d times", n)
			}
		})
	}
}

// TestServerToolsSkipUnpricedRoute: of a model's routes, those that would
// carry a declared server tool and do not price it are skipped; the tool
// is refused only when no route is left. A route that translates the
// request (and drops the tool, naming it in x-gateway-dropped) needs no
// price.
func TestServerToolsSkipUnpricedRoute(t *testing.T) {
	unpriced, priced := providertest.NewResponses(t), providertest.NewResponses(t)
	claude := providertest.NewAnthropic(t)
	for _, up := range []*providertest.Server{unpriced, priced} {
		up.SetDefault(sseResponse(searchingResponsesStream))
	}
	claude.SetDefault(sseResponse(cachedClaudeStream))
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: unpriced, api: openai-responses, base_url: %q, api_key_env: UP_KEY}
  - {name: priced, api: openai-responses, base_url: %q, api_key_env: UP_KEY}
  - {name: claude, api: anthropic, base_url: %q, api_key_env: UP_KEY}
models:
  - id: m
    routes:
      - {provider: unpriced, model: gpt-5, input_price: 2, output_price: 8}
      - {provider: priced, model: gpt-5, %s}
  - id: only-unpriced
    routes:
      - {provider: unpriced, model: gpt-5, input_price: 2, output_price: 8}
  - id: translated
    routes:
      - {provider: unpriced, model: gpt-5, input_price: 2, output_price: 8}
      - {provider: claude, model: claude-sonnet-4-5, input_price: 3, output_price: 15}
projects:
  - id: proj
    keys: [{key: %s}]
`, unpriced.URL(), priced.URL(), claude.URL(), responsesToolPrices, testKey))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Getenv: func(string) string { return "up-secret" }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	body := func(model string) string {
		return `{"model":"` + model + `","input":"search","tools":[{"type":"web_search"},{"type":"code_interpreter","container":{"type":"auto"}}]}`
	}

	got := callPath(t, srv.URL+"/api/v1/responses", body("m"))
	if got.status != 200 || got.provider != "priced" {
		t.Fatalf("model m: %d from %q, want 200 from priced: %s", got.status, got.provider, got.body)
	}
	if cost, err := costIn(got.body); err != nil || billing.USDToNanos(cost) != searchingResponsesNanos {
		t.Errorf("usage.cost %v, %v; want %d nano-USD", cost, err, searchingResponsesNanos)
	}

	got = callPath(t, srv.URL+"/api/v1/responses", body("only-unpriced"))
	if got.status != 400 || errorParam(t, got.body) != "tools[0]" || !strings.Contains(got.body, "tool_prices.web_search") {
		t.Errorf("model only-unpriced: %d %s, want 400 naming tools[0] and tool_prices.web_search", got.status, got.body)
	}

	got = callPath(t, srv.URL+"/api/v1/responses", body("translated"))
	if got.status != 200 || got.provider != "claude" || !strings.Contains(got.header.Get("X-Gateway-Dropped"), "tools[web_search]") {
		t.Errorf("model translated: %d from %q, dropped %q, want 200 from claude with tools[web_search] dropped: %s",
			got.status, got.provider, got.header.Get("X-Gateway-Dropped"), got.body)
	}
	if n := unpriced.Calls(); n != 0 {
		t.Errorf("the route without a price was called %d times", n)
	}

	// The model's listing shows each route's tool prices.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/models/m", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var listed struct {
		Providers []struct {
			Name       string             `json:"name"`
			ToolPrices map[string]float64 `json:"tool_prices"`
		} `json:"providers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&listed); err != nil || len(listed.Providers) != 2 ||
		listed.Providers[0].ToolPrices != nil || listed.Providers[1].ToolPrices["code_interpreter"] != 0.03 {
		t.Errorf("GET /api/v1/models/m: %+v, %v; want the priced route's tool_prices only", listed, err)
	}
}
