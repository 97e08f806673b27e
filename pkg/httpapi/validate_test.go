package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

const validateKey = "sk-validate"

// validateGateway is a gateway with a model of each protocol: chat, on a
// simulated provider, which takes Chat Completions (a Messages request to
// it is translated), and claude, on an Anthropic upstream (claude), which
// takes a Messages request as the client sent it.
func validateGateway(t *testing.T) (http.Handler, *providertest.Server) {
	t.Helper()
	claude := providertest.NewAnthropic(t)
	cfg, err := catalog.Parse(fmt.Appendf(nil, `
providers:
  - {name: sim, api: simulated, simulated: {words: 3}}
  - {name: claude, api: anthropic, base_url: %q}
models:
  - id: chat
    routes: [{provider: sim, model: sim-1, input_price: 1, output_price: 2}]
  - id: claude
    routes: [{provider: claude, model: claude-x, input_price: 1, output_price: 2}]
projects:
  - id: p
    keys: [{key: %s}]
`, claude.URL(), validateKey))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a.Handler, claude
}

// TestValidateSteps: each step of a generation request's validation
// (httpapi.validateBody), through the handler: a body of another protocol
// is split and its members checked, planned from them, and passed through
// to a route that speaks it, as the client sent it; any other is
// translated, decoded, checked, planned and answered in its client's API.
// Each refusal comes from its step, in the API's envelope, before any
// upstream call.
func TestValidateSteps(t *testing.T) {
	h, claude := validateGateway(t)
	messages := func(model, extra string) string {
		return `{"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	chat := func(extra string) string {
		return `{"model":"chat","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	const (
		messagesPath = "/api/v1/messages"
		chatPath     = "/api/v1/chat/completions"
	)
	badKey := []string{"Idempotency-Key", strings.Repeat("k", idempotency.MaxKeyLength+1)}
	for _, tt := range []struct {
		name, path, body string
		header           []string
		status           int
		anthropic        bool   // the refusal is in Anthropic's envelope
		message          string // in the refusal's message, or in the answer's body
		upstream         string // in the body the Anthropic upstream got; "" when it got no call
	}{
		// The members of a body of another protocol.
		{"a member given twice", messagesPath, messages("claude", `,"model":"chat"`), nil,
			400, true, `the member "model" twice`, ""},
		{"a member given twice, keyed", messagesPath, messages("claude", `,"model":"chat"`), []string{"Idempotency-Key", "k-twice"},
			400, true, `field "model" repeats`, ""},
		{"a gateway field in another case", messagesPath, messages("claude", `,"Gateway":{}`), nil,
			400, true, `field "Gateway" repeats, or differs only in case from, a field the gateway sets or owns`, ""},
		{"a service tier at other prices", messagesPath, messages("claude", `,"service_tier":"priority"`), nil,
			400, true, `service_tier "priority" is not served`, ""},
		{"a mode billed above the route's prices", messagesPath, messages("claude", `,"speed":"fast"`), nil,
			400, true, `speed "fast" is not served`, ""},
		{"a beta billed above the route's prices", messagesPath, messages("claude", ""), []string{"Anthropic-Beta", "context-1m-2025-08-07"},
			400, true, "the beta context-1m-2025-08-07 is not served", ""},
		{"a server tool the gateway cannot price", messagesPath, messages("claude", `,"tools":[{"type":"code_execution_20250522","name":"code_execution"}]`), nil,
			400, true, "tools[0] declares the server tool code_execution, which this gateway does not serve", ""},
		// The plan made from them.
		{"a provider's object no route accepts", messagesPath, `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_01"}}]}]}`, nil,
			400, true, `messages[0].content[0].source.file_id refers to a file stored in the provider's account, which no provider of model "claude" accepts`, ""},
		{"a server tool no route prices", messagesPath, messages("claude", `,"tools":[{"type":"web_search_20250305","name":"web_search"}]`), nil,
			400, true, "tools[0] declares the server tool web_search, which the provider bills per call", ""},
		// Passed through to the route that speaks it.
		{"passed through as sent", messagesPath, messages("claude", `,"x_unmodelled":{"a":1}`), nil,
			200, false, `"type":"message"`, `"x_unmodelled":{"a":1}`},
		{"passed through, keyed", messagesPath, messages("claude", ""), []string{"Idempotency-Key", "k-pass"},
			200, false, `"type":"message"`, `"model":"claude-x"`},
		{"passed through, a bad key", messagesPath, messages("claude", ""), badKey,
			400, true, "send one Idempotency-Key header", ""},
		// Translated to Chat Completions for a route of another protocol.
		{"a translation refused", messagesPath, `{"model":"chat","max_tokens":5,"messages":[{"role":"user","content":[{"type":"mystery"}]}]}`, nil,
			400, true, `content block type "mystery" is not supported`, ""},
		{"translated and answered in Messages", messagesPath, messages("chat", ""), nil,
			200, false, `"type":"message"`, ""},
		{"translated, a bad key", messagesPath, messages("chat", ""), badKey,
			400, true, "send one Idempotency-Key header", ""},
		// A Chat Completions body, decoded and checked.
		{"a chat body not decoded", chatPath, `{"model":"chat","messages":"hi"}`, nil,
			400, false, "messages must be an array", ""},
		{"a chat gateway field in another case", chatPath, chat(`,"GATEWAY":{}`), nil,
			400, false, `field "GATEWAY" repeats`, ""},
		{"a chat service tier at other prices", chatPath, chat(`,"service_tier":"flex"`), nil,
			400, false, `service_tier "flex" is not served`, ""},
		{"chat audio", chatPath, chat(`,"audio":{"voice":"alloy","format":"mp3"}`), nil,
			400, false, "audio is not served", ""},
		{"a chat provider's object no route accepts", chatPath, `{"model":"chat","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, nil,
			400, false, `messages[0].content[0].file.file_id refers to a file stored in the provider's account, which no provider of model "chat" accepts`, ""},
		{"a chat bad key", chatPath, chat(""), badKey,
			400, false, "send one Idempotency-Key header", ""},
		{"chat answered", chatPath, chat(""), nil,
			200, false, `"object":"chat.completion"`, ""},
		// What a translation resolves from outside the body.
		{"a previous response not kept", "/api/v1/responses", `{"model":"chat","input":"hi","previous_response_id":"resp_x"}`, nil,
			400, false, `previous response "resp_x" not found`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := claude.Calls()
			a := serve(h, "POST", tt.path, tt.body, append([]string{"Authorization", "Bearer " + validateKey}, tt.header...)...)
			got := a.message
			if tt.status == 200 {
				got = a.body
			}
			if a.status != tt.status || a.anthropic != tt.anthropic || !strings.Contains(got, tt.message) {
				t.Errorf("%d (anthropic %v) %s; want %d (anthropic %v) with %s", a.status, a.anthropic, got, tt.status, tt.anthropic, tt.message)
			}
			if tt.status != 200 && a.code != "invalid_request" {
				t.Errorf("code %q, want invalid_request", a.code)
			}
			switch reqs := claude.Requests(); {
			case tt.upstream == "" && len(reqs) != calls:
				t.Errorf("the upstream got %d calls, want none", len(reqs)-calls)
			case tt.upstream != "" && (len(reqs) != calls+1 || !strings.Contains(string(reqs[len(reqs)-1].Body), tt.upstream)):
				t.Errorf("the upstream got %d calls, the last with %s; want one, with %s", len(reqs)-calls, reqs[len(reqs)-1].Body, tt.upstream)
			}
		})
	}
}
