package systemtest_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestDuplicateKeyHeaders: a request that carries its key twice, in two
// Authorization headers or two x-api-key headers, is served when both are
// the same key and refused (401 invalid_api_key, in the endpoint's
// envelope) when they are two keys, whichever comes first and even when
// both are valid keys of the project.
func TestDuplicateKeyHeaders(t *testing.T) {
	g := newGateway(t, setup{})
	for _, e := range []struct {
		method, path, body string
		anthropic          bool
	}{
		{"POST", "/api/v1/chat/completions", chatBody(""), false},
		{"POST", "/api/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true},
		{"GET", "/api/v1/models", "", false},
		{"GET", "/api/v1/usage", "", false},
	} {
		for _, c := range []struct {
			name   string
			header []string
			ok     bool
		}{
			{"two bearers, the same key", []string{"Authorization", "Bearer " + testKey, "Authorization", "Bearer " + testKey}, true},
			{"two x-api-keys, the same key", []string{"X-Api-Key", testKey, "X-Api-Key", testKey}, true},
			{"two bearers, two valid keys", []string{"Authorization", "Bearer " + testKey, "Authorization", "Bearer " + otherKey}, false},
			{"two bearers, an unknown key second", []string{"Authorization", "Bearer " + testKey, "Authorization", "Bearer sk-nope"}, false},
			{"two bearers, an unknown key first", []string{"Authorization", "Bearer sk-nope", "Authorization", "Bearer " + testKey}, false},
			{"two x-api-keys, two valid keys", []string{"X-Api-Key", otherKey, "X-Api-Key", testKey}, false},
			{"bearer twice and another x-api-key", []string{"Authorization", "Bearer " + testKey, "Authorization", "Bearer " + testKey, "X-Api-Key", otherKey}, false},
		} {
			what := e.method + " " + e.path + " with " + c.name
			a := send(t, e.method, g.url+e.path, e.body, c.header...)
			if c.ok {
				if a.status != http.StatusOK {
					t.Errorf("%s: %d %s", what, a.status, a.body)
				}
				continue
			}
			if e.anthropic {
				expectAnthropicError(t, what, a, 401, "authentication_error", "invalid_api_key")
				continue
			}
			var oe apiError
			json.Unmarshal([]byte(a.body), &oe)
			if a.status != 401 || oe.Error.Code != "invalid_api_key" || oe.Error.Type != "authentication_error" {
				t.Errorf("%s: %d %s, want 401 invalid_api_key", what, a.status, a.body)
			}
		}
	}
}
