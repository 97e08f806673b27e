package httpapi_test

import (
	"strings"
	"testing"
)

// TestGenerateRefusals: each generation endpoint authenticates, then
// decodes and plans its body in its own protocol, refusing in its own
// envelope what routing reads (the model, stream, the gateway-owned
// objects) as the Chat Completions decoder does.
func TestGenerateRefusals(t *testing.T) {
	h := routesHandler(t)
	tests := []struct {
		name, path, body string
		key              bool
		status           int
		anthropic        bool
		code, message    string
	}{
		{"chat without key", "/api/v1/chat/completions", `{"model":"vendor/chat","messages":[{"role":"user","content":"hi"}]}`, false, 401, false, "invalid_api_key", ""},
		{"messages without key", "/api/v1/messages", `{"model":"vendor/chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, false, 401, true, "invalid_api_key", ""},
		{"chat unknown model", "/api/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, true, 404, false, "model_not_found", `"nope"`},
		{"messages unknown model", "/api/v1/messages", `{"model":"nope:floor","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, true, 404, true, "model_not_found", `"nope:floor"`},
		{"responses unknown model", "/api/v1/responses", `{"model":"nope","input":"hi"}`, true, 404, false, "model_not_found", `"nope"`},
		{"messages unknown provider", "/api/v1/messages", `{"model":"vendor/chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"provider":{"only":["x"]}}`, true, 400, true, "invalid_request", "unknown provider"},
		{"responses bad gateway option", "/api/v1/responses", `{"model":"vendor/chat","input":"hi","gateway":{"retry":{"max_total_attempts":9}}}`, true, 400, false, "invalid_request", "gateway.retry.max_total_attempts"},
		{"messages stream not a boolean", "/api/v1/messages", `{"model":"vendor/chat","max_tokens":5,"stream":"yes","messages":[{"role":"user","content":"hi"}]}`, true, 400, true, "invalid_request", "stream must be a boolean"},
		{"messages planned and served", "/api/v1/messages", `{"model":"vendor/chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"provider":{"only":["sim"]}}`, true, 200, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var header []string
			if tt.key {
				header = []string{"Authorization", "Bearer " + routesKey}
			}
			a := serve(h, "POST", tt.path, tt.body, header...)
			if a.status != tt.status || a.code != tt.code || a.anthropic != tt.anthropic || !strings.Contains(a.message, tt.message) {
				t.Errorf("%d %q (anthropic %v) %q; want %d %q (anthropic %v) with %q", a.status, a.code, a.anthropic, a.message, tt.status, tt.code, tt.anthropic, tt.message)
			}
		})
	}
}
