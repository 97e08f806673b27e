package systemtest_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// anthropicFirst is a gateway whose model "m" routes first to an
// Anthropic-protocol upstream (claude), then to an OpenAI one (p1).
func anthropicFirst(t *testing.T) (url string, claude, p1 *providertest.Server) {
	t.Helper()
	claude, p1 = providertest.NewAnthropic(t), providertest.New(t)
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: claude, api: anthropic, base_url: %q, api_key_env: CLAUDE_KEY}
  - {name: p1, api: openai, base_url: %q}
models:
  - id: m
    routes:
      - {provider: claude, model: claude-x, input_price: 1, output_price: 2}
      - {provider: p1, model: up-1, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %s}]
`, claude.URL(), p1.URL(), testKey))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Getenv: func(k string) string {
		if k == "CLAUDE_KEY" {
			return "claude-secret"
		}
		return ""
	}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL, claude, p1
}

// TestAnthropicUpstream: a Chat Completions client routed to a native
// Anthropic Messages upstream gets an OpenAI answer (text, stream, tool
// call) with its cost; the upstream got a Messages request with its key;
// a 529 overloaded answer falls back to the next provider, and a 400 is
// passed through as provider_rejected.
func TestAnthropicUpstream(t *testing.T) {
	url, claude, p1 := anthropicFirst(t)

	a := mustCall(t, url, chatBody(`"max_tokens":50`))
	c := decodeJSONString[completion](t, a.body)
	if a.status != 200 || a.provider != "claude" || *c.Choices[0].Message.Content != "Hello world" || c.Usage.Cost <= 0 {
		t.Fatalf("answer: %d from %q: %s", a.status, a.provider, a.body)
	}
	req := claude.Requests()[0]
	if req.Header.Get("X-Api-Key") != "claude-secret" || req.Header.Get("Anthropic-Version") == "" ||
		req.JSON["model"] != "claude-x" || req.JSON["max_tokens"] != 50.0 || req.JSON["stream"] != true {
		t.Errorf("upstream request: %v %v", req.Header, req.JSON)
	}

	s := mustCall(t, url, chatBody(`"stream":true,"stream_options":{"include_usage":true}`))
	if s.status != 200 || !strings.Contains(s.body, `"content":"Hello"`) || !strings.HasSuffix(strings.TrimSpace(s.body), "data: [DONE]") || costOf(t, s) <= 0 {
		t.Errorf("stream: %d %s", s.status, s.body)
	}

	claude.Script(providertest.Response{ToolCall: &providertest.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}})
	tc := mustCall(t, url, chatBody(`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`))
	tcc := decodeJSONString[completion](t, tc.body)
	if tc.status != 200 || len(tcc.Choices[0].Message.ToolCalls) != 1 || tcc.Choices[0].FinishReason != "tool_calls" ||
		tcc.Choices[0].Message.ToolCalls[0].Function.Name != "get_weather" || tcc.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Errorf("tool call: %d %s", tc.status, tc.body)
	}

	claude.Script(providertest.Response{Status: 529})
	fb := mustCall(t, url, chatBody(""))
	if fb.status != 200 || fb.provider != "p1" || fb.depth != "1" {
		t.Errorf("after a 529: %d from %q at depth %q", fb.status, fb.provider, fb.depth)
	}

	claude.Script(providertest.Response{Status: 400})
	rej := mustCall(t, url, chatBody(""))
	if rej.status != 400 || rej.code != "provider_rejected" {
		t.Errorf("after a 400: %d %q", rej.status, rej.code)
	}
	if diff := cmp.Diff([]int{5, 1}, []int{claude.Calls(), p1.Calls()}); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

func decodeJSONString[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("body %q: %v", s, err)
	}
	return v
}
