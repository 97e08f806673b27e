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

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// The providers' own error bodies: 404s for a reference the client named
// (a Messages document's file_id, a Responses item_reference and
// conversation, and, for a Chat Completions file, the words of OpenAI's
// Files API), for the route's model, and a refused key's 401.
const (
	anthropicFileNotFound  = `{"type":"error","error":{"type":"not_found_error","message":"File not found: file_011CNbogusbogusbogus"},"request_id":"req_011CVzbogus"}`
	anthropicModelNotFound = `{"type":"error","error":{"type":"not_found_error","message":"model: claude-y"},"request_id":"req_011CVzmodel"}`
	openaiItemNotFound     = `{"error":{"message":"Item with id 'msg_bogus0123' not found.","type":"invalid_request_error","param":"input","code":null}}`
	openaiConvNotFound     = `{"error":{"message":"Conversation with id 'conv_bogus0123' not found.","type":"invalid_request_error","param":null,"code":null}}`
	openaiFileNotFound     = `{"error":{"message":"No such File object: file-bogus0123","type":"invalid_request_error","param":"id","code":null}}`
	openaiModelNotFound    = "{\"error\":{\"message\":\"The model `gpt-r` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}"
	openaiKeyRefused       = `{"error":{"message":"Incorrect API key provided: sk-proj-upstreamsecret. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
)

// faultGateway is a gateway with two projects (testKey's and
// otherProjectKey's) and one route per client API, each to an upstream of
// that API's protocol, so that a request passes through as the client
// wrote it: claude-m (Anthropic), chat-m (OpenAI Chat Completions), resp-m
// (OpenAI Responses); and chat-fb and claude-fb, the same first routes
// then an OpenAI backup. It
// returns the URL, the upstreams by provider name, and the gateway's log.
func faultGateway(t *testing.T) (string, map[string]*providertest.Server, *syncBuffer) {
	t.Helper()
	ups := map[string]*providertest.Server{
		"claude": providertest.NewAnthropic(t),
		"oai":    providertest.New(t),
		"resp":   providertest.NewResponses(t),
		"backup": providertest.New(t),
	}
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: claude, api: anthropic, base_url: %q, provider_objects: allow}
  - {name: oai, api: openai, base_url: %q, provider_objects: allow}
  - {name: resp, api: openai-responses, base_url: %q, provider_objects: allow}
  - {name: backup, api: openai, base_url: %q, provider_objects: allow}
models:
  - id: claude-m
    routes: [{provider: claude, model: claude-x, input_price: 1, output_price: 2}]
  - id: chat-m
    routes: [{provider: oai, model: gpt-x, input_price: 1, output_price: 2}]
  - id: resp-m
    routes: [{provider: resp, model: gpt-r, input_price: 1, output_price: 2}]
  - id: chat-fb
    routes:
      - {provider: oai, model: gpt-x, input_price: 1, output_price: 2}
      - {provider: backup, model: up-1, input_price: 1, output_price: 2}
  - id: claude-fb
    routes:
      - {provider: claude, model: claude-y, input_price: 1, output_price: 2}
      - {provider: backup, model: up-1, input_price: 1, output_price: 2}
projects:
  - id: tenant-a
    keys: [{key: %s}]
  - id: tenant-b
    keys: [{key: %s}]
`, ups["claude"].URL(), ups["oai"].URL(), ups["resp"].URL(), ups["backup"].URL(), testKey, otherProjectKey))
	if err != nil {
		t.Fatal(err)
	}
	logs := new(syncBuffer)
	a, err := app.FromConfig(cfg, app.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Once the server is closed (cleanups run last first), the gateway's
	// finishing writes stop, as a process's do, so none outlives the test.
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		a.Finisher.Drain(ctx)
	})
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL, ups, logs
}

// asTenant sends body to path with key, as the client API's SDK would
// (Messages: x-api-key and anthropic-version).
func asTenant(t *testing.T, url, path, key, body string) answer {
	t.Helper()
	h := []string{"Authorization", "Bearer " + key, "Content-Type", "application/json"}
	if path == "/api/v1/messages" {
		h = []string{"X-Api-Key", key, "Anthropic-Version", "2023-06-01", "Anthropic-Beta", "files-api-2025-04-14", "Content-Type", "application/json"}
	}
	return send(t, http.MethodPost, url+path, body, h...)
}

// TestClientReferenceKeepsRouteIn: a request that names an object the
// provider does not hold (an Anthropic document's file_id, a Responses
// item_reference or conversation, a Chat Completions file) gets the
// provider's 404. That is the client's answer: provider_rejected (400, in
// the client API's own envelope, with the provider's words), tried on no
// other provider, and no mark on the route: another project's request on
// the same model, right after, is served by the same provider, however
// often the bogus request is repeated.
func TestClientReferenceKeepsRouteIn(t *testing.T) {
	tests := []struct {
		name, path, provider string
		bogus, fine          string
		upstream404, message string
	}{
		{name: "messages document file_id", path: "/api/v1/messages", provider: "claude",
			bogus:       `{"model":"claude-m","max_tokens":50,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_011CNbogusbogusbogus"}},{"type":"text","text":"Summarize it"}]}]}`,
			fine:        `{"model":"claude-m","max_tokens":50,"messages":[{"role":"user","content":"Say hello"}]}`,
			upstream404: anthropicFileNotFound, message: "File not found: file_011CNbogusbogusbogus"},
		{name: "responses item_reference", path: "/api/v1/responses", provider: "resp",
			bogus:       `{"model":"resp-m","input":[{"type":"item_reference","id":"msg_bogus0123"},{"role":"user","content":"Go on"}]}`,
			fine:        `{"model":"resp-m","input":"Say hello"}`,
			upstream404: openaiItemNotFound, message: "Item with id 'msg_bogus0123' not found."},
		{name: "responses conversation", path: "/api/v1/responses", provider: "resp",
			bogus:       `{"model":"resp-m","conversation":"conv_bogus0123","input":"Go on"}`,
			fine:        `{"model":"resp-m","input":"Say hello"}`,
			upstream404: openaiConvNotFound, message: "Conversation with id 'conv_bogus0123' not found."},
		{name: "chat file", path: "/api/v1/chat/completions", provider: "oai",
			bogus:       `{"model":"chat-m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-bogus0123"}},{"type":"text","text":"Summarize it"}]}]}`,
			fine:        `{"model":"chat-m","messages":[{"role":"user","content":"Say hello"}]}`,
			upstream404: openaiFileNotFound, message: "No such File object: file-bogus0123"},
		// The backup speaks Chat Completions too, and could serve the
		// request: a rejection is still not tried there.
		{name: "chat file, with a fallback route", path: "/api/v1/chat/completions", provider: "oai",
			bogus:       `{"model":"chat-fb","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-bogus0123"}},{"type":"text","text":"Summarize it"}]}]}`,
			fine:        `{"model":"chat-fb","messages":[{"role":"user","content":"Say hello"}]}`,
			upstream404: openaiFileNotFound, message: "No such File object: file-bogus0123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, ups, _ := faultGateway(t)
			up := ups[tt.provider]
			const rounds = 3
			for i := range rounds {
				up.Script(providertest.Response{Status: http.StatusNotFound, Body: tt.upstream404})
				a := asTenant(t, url, tt.path, testKey, tt.bogus)
				checkRejected(t, tt.path, a, tt.message)

				b := asTenant(t, url, tt.path, otherProjectKey, tt.fine)
				if b.status != http.StatusOK || b.provider != tt.provider || b.depth != "0" {
					t.Fatalf("round %d: the other project's request: %d from %q at depth %q, want 200 from %s at depth 0: %s",
						i, b.status, b.provider, b.depth, tt.provider, b.body)
				}
			}
			if up.Calls() != 2*rounds || ups["backup"].Calls() != 0 {
				t.Errorf("calls: %s %d, backup %d; want %d (every request reached it: the route was never out), 0 (a rejection is tried nowhere else)",
					tt.provider, up.Calls(), ups["backup"].Calls(), 2*rounds)
			}
			if got := string(up.Requests()[0].Body); !strings.Contains(got, "bogus0123") && !strings.Contains(got, "file_011CNbogus") {
				t.Errorf("the upstream did not get the client's reference: %s", got)
			}
		})
	}
}

// checkRejected: a is provider_rejected, 400, in the envelope of path's
// client API, its message the provider's after the documented prefix.
func checkRejected(t *testing.T, path string, a answer, message string) {
	t.Helper()
	var msg string
	if path == "/api/v1/messages" {
		msg = expectAnthropicError(t, "a bogus reference", a, http.StatusBadRequest, "invalid_request_error", "provider_rejected").Error.Message
	} else {
		var e apiError
		var raw map[string]map[string]any
		if err := json.Unmarshal([]byte(a.body), &e); err != nil || json.Unmarshal([]byte(a.body), &raw) != nil ||
			a.status != http.StatusBadRequest || e.Error.Code != "provider_rejected" || e.Error.Type != "invalid_request_error" {
			t.Fatalf("a bogus reference: %d %s, want 400 provider_rejected in OpenAI's envelope", a.status, a.body)
		}
		if _, ok := raw["error"]["param"]; !ok {
			t.Errorf("no param in %s", a.body)
		}
		msg = e.Error.Message
	}
	if want := "provider rejected the request: " + message; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
}

// TestOperatorFaultTakesRouteOut: a failure that says the operator's setup
// is wrong still takes the route out for the health cooldown: the route's
// model unknown to the provider (Anthropic's "model: <name>", OpenAI's
// model_not_found), or the provider's key refused. The request falls back
// where the model has another route; the next request, from another
// project, does not call the route again, and gets 503 no_live_provider
// where there is no other. A refused key's body, which may quote the key,
// stays out of the log.
func TestOperatorFaultTakesRouteOut(t *testing.T) {
	t.Run("anthropic model not found, with a fallback", func(t *testing.T) {
		url, ups, _ := faultGateway(t)
		ups["claude"].Script(providertest.Response{Status: http.StatusNotFound, Body: anthropicModelNotFound})
		body := `{"model":"claude-fb","max_tokens":50,"messages":[{"role":"user","content":"Say hello"}]}`
		for i, key := range []string{testKey, otherProjectKey} {
			a := asTenant(t, url, "/api/v1/messages", key, body)
			if a.status != http.StatusOK || a.provider != "backup" {
				t.Fatalf("request %d: %d from %q, want 200 from backup: %s", i, a.status, a.provider, a.body)
			}
		}
		if ups["claude"].Calls() != 1 || ups["backup"].Calls() != 2 {
			t.Errorf("calls: claude %d, backup %d; want 1 (then out), 2", ups["claude"].Calls(), ups["backup"].Calls())
		}
	})
	for _, tt := range []struct {
		name, path, provider, body string
		resp                       providertest.Response
	}{
		{"responses model not found", "/api/v1/responses", "resp", `{"model":"resp-m","input":"Say hello"}`,
			providertest.Response{Status: http.StatusNotFound, Body: openaiModelNotFound}},
		{"chat key refused", "/api/v1/chat/completions", "oai", `{"model":"chat-m","messages":[{"role":"user","content":"Say hello"}]}`,
			providertest.Response{Status: http.StatusUnauthorized, Body: openaiKeyRefused}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url, ups, logs := faultGateway(t)
			ups[tt.provider].Script(tt.resp)
			a := asTenant(t, url, tt.path, testKey, tt.body)
			if a.status != http.StatusBadGateway || a.code != "all_providers_failed" {
				t.Fatalf("first: %d %s, want 502 all_providers_failed", a.status, a.body)
			}
			b := asTenant(t, url, tt.path, otherProjectKey, tt.body)
			if b.status != http.StatusServiceUnavailable || b.code != "no_live_provider" || b.header.Get("Retry-After") == "" {
				t.Fatalf("other project: %d %s, want 503 no_live_provider with retry-after", b.status, b.body)
			}
			if n := ups[tt.provider].Calls(); n != 1 {
				t.Errorf("%s called %d times, want 1 (then out)", tt.provider, n)
			}
			if !strings.Contains(logs.String(), "provider configuration error") {
				t.Errorf("no configuration error logged:\n%s", logs.String())
			}
			if strings.Contains(logs.String(), "upstreamsecret") {
				t.Errorf("the refused key's body reached the log:\n%s", logs.String())
			}
		})
	}
}
