package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// A Claude answer whose prompt was mostly read from the cache, as Claude
// Code's turns are: 12 uncached input tokens, 100 written to the cache,
// 9,000 read from it, 40 output tokens.
const cachedClaudeStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_c1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":9000,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":40}}

event: message_stop
data: {"type":"message_stop"}

`

// An OpenAI answer of a reasoning model: a prompt of 100 tokens, 80 of
// them read from the cache; 50 completion tokens, 30 of them reasoning.
var cachedReasoningChunks = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Done."},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"o-mini","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":80,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":30}}}`,
}

// TestPricing: the cost of an answer is the upstream's own counts at the
// route's prices (uncached input, cache reads, cache writes, output with
// reasoning), on every client API and upstream protocol, whole and
// streamed; the answer's usage.cost and the ledger agree to the
// nano-dollar. The Claude prices are Anthropic's list prices for Claude
// Sonnet 4.5 (input $3, 5-minute cache write $3.75, cache read $0.30,
// output $15 per million tokens).
func TestPricing(t *testing.T) {
	ups := []struct {
		name, api, prices string
		script            func(up *providertest.Server)
		wantNanos         int64
	}{
		{"anthropic", "anthropic", "input_price: 3, output_price: 15, cache_read_price: 0.30, cache_write_price: 3.75",
			func(up *providertest.Server) {
				up.SetDefault(providertest.Response{Body: cachedClaudeStream, Header: map[string]string{"Content-Type": "text/event-stream"}})
			},
			// 12×3 + 100×3.75 + 9,000×0.30 + 40×15 = 3,711 USD per
			// million tokens' worth: $0.003711.
			3_711_000},
		{"openai", "openai", "input_price: 2, output_price: 8, cache_read_price: 0.5",
			func(up *providertest.Server) { up.SetDefault(scriptedSSE(cachedReasoningChunks...)) },
			// 20×2 + 80×0.5 + 50×8 = 480: $0.00048.
			480_000},
		{"openai-responses", "openai-responses", "input_price: 2, output_price: 8, cache_read_price: 0.5",
			func(up *providertest.Server) {
				up.SetDefault(providertest.Response{Text: []string{"Done."}, Usage: &providertest.Usage{PromptTokens: 100, CompletionTokens: 50},
					Responses: &providertest.ResponsesAnswer{CachedTokens: 80, ReasoningTokens: 30}})
			},
			480_000},
		{"openai, no cache price", "openai", "input_price: 2, output_price: 8",
			func(up *providertest.Server) { up.SetDefault(scriptedSSE(cachedReasoningChunks...)) },
			// Cache reads at the input price: 100×2 + 50×8.
			600_000},
	}
	clients := []struct{ name, path, body string }{
		{"chat", "/api/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"chat-stream", "/api/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
		{"messages", "/api/v1/messages", `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages-stream", "/api/v1/messages", `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/api/v1/responses", `{"model":"m","input":"hi"}`},
		{"responses-stream", "/api/v1/responses", `{"model":"m","input":"hi","stream":true}`},
	}
	for _, u := range ups {
		t.Run(u.name, func(t *testing.T) {
			up := upstreamFor(t, u.api)
			u.script(up)
			ledger := memledger.New(memledger.Options{})
			url, gw := oneRoute{api: u.api, baseURL: up.URL(), prices: u.prices, accounts: httpapi.Accounts{Ledger: ledger, Keys: ledger}}.start(t)
			settle := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := gw.Finisher.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range clients {
				t.Run(c.name, func(t *testing.T) {
					a := callPath(t, url+c.path, c.body, "anthropic-version", "2023-06-01")
					if a.status != 200 {
						t.Fatalf("%d %s", a.status, a.body)
					}
					cost, err := costIn(a.body)
					if err != nil {
						t.Fatal(err)
					}
					if got := billing.USDToNanos(cost); got != u.wantNanos {
						t.Errorf("usage.cost %v ($%.9f), want %d nano-USD", cost, cost, u.wantNanos)
					}
					settle()
					e, err := ledger.Entry(context.Background(), a.reqID)
					if err != nil || e.CostNanos != u.wantNanos {
						t.Errorf("ledger entry %+v, %v; want %d nano-USD", e, err, u.wantNanos)
					}
				})
			}
		})
	}
}

// costIn is the usage.cost of an answer of any client API, whole or
// streamed (the last event that carries one).
func costIn(body string) (float64, error) {
	type withCost struct {
		Usage *struct {
			Cost *float64 `json:"cost"`
		} `json:"usage"`
		Message  *withCost `json:"message"`
		Response *withCost `json:"response"`
	}
	find := func(w withCost) *float64 {
		for _, v := range []*withCost{&w, w.Message, w.Response} {
			if v != nil && v.Usage != nil && v.Usage.Cost != nil {
				return v.Usage.Cost
			}
		}
		return nil
	}
	var whole withCost
	if json.Unmarshal([]byte(body), &whole) == nil {
		if c := find(whole); c != nil {
			return *c, nil
		}
	}
	var last *float64
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev withCost
		if json.Unmarshal([]byte(data), &ev) == nil {
			if c := find(ev); c != nil {
				last = c
			}
		}
	}
	if last == nil {
		return 0, fmt.Errorf("no usage.cost in %q", body)
	}
	return *last, nil
}

// TestServiceTier: a service_tier the provider bills at other prices than
// the route's (OpenAI's flex, priority, scale) is refused with a 400 naming
// it, before any provider call; the standard tiers of each API pass.
func TestServiceTier(t *testing.T) {
	g := newGateway(t, setup{})
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/api/v1/chat/completions", chatBody(`"service_tier":"auto"`), 200},
		{"/api/v1/chat/completions", chatBody(`"service_tier":"default"`), 200},
		{"/api/v1/chat/completions", chatBody(`"service_tier":null`), 200},
		{"/api/v1/chat/completions", chatBody(`"service_tier":"priority"`), 400},
		{"/api/v1/chat/completions", chatBody(`"service_tier":"flex"`), 400},
		{"/api/v1/chat/completions", chatBody(`"service_tier":"scale"`), 400},
		{"/api/v1/chat/completions", chatBody(`"service_tier":1`), 400},
		{"/api/v1/responses", `{"model":"m","input":"hi","service_tier":"default"}`, 200},
		{"/api/v1/responses", `{"model":"m","input":"hi","service_tier":"priority"}`, 400},
		{"/api/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"service_tier":"standard_only"}`, 200},
		{"/api/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"service_tier":"priority"}`, 400},
	} {
		before := g.ups[0].Calls()
		a := callPath(t, g.url+c.path, c.body)
		if a.status != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.path, c.body, a.status, a.body, c.status)
			continue
		}
		if c.status != 400 {
			continue
		}
		if !strings.Contains(a.body, `service_tier`) || a.code != "invalid_request" && !strings.Contains(a.body, "invalid_request_error") {
			t.Errorf("%s %s: %s, want invalid_request naming service_tier", c.path, c.body, a.body)
		}
		if g.ups[0].Calls() != before {
			t.Errorf("%s %s: the provider was called", c.path, c.body)
		}
	}
}
