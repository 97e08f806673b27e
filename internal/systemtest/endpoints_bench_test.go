package systemtest_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// cannedAnthropic answers every Messages request at once with the same
// short streamed answer (the gateway always streams from providers).
func cannedAnthropic(b *testing.B) *httptest.Server {
	events := [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
	var stream bytes.Buffer
	for _, e := range events {
		stream.WriteString("event: " + e[0] + "\ndata: " + e[1] + "\n\n")
	}
	body := stream.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkEndpoints: every client API (Chat Completions, Messages,
// Responses) against every upstream protocol (OpenAI, Anthropic), through
// the handler in process, non-streaming and streaming. A same-protocol pair
// (chat→openai, messages→anthropic) is the baseline a translated one is
// compared with.
func BenchmarkEndpoints(b *testing.B) {
	oa, an := cannedUpstream(b), cannedAnthropic(b)
	cfg, err := catalog.Parse(fmt.Appendf(nil, `
providers:
  - {name: oa, api: openai, base_url: %q}
  - {name: an, api: anthropic, base_url: %q}
models:
  - id: openai
    routes: [{provider: oa, model: up-model, input_price: 1, output_price: 2}]
  - id: anthropic
    routes: [{provider: an, model: up-model, input_price: 1, output_price: 2}]
projects:
  - id: p
    keys: [{key: %s}]
`, oa.URL+"/v1", an.URL, testKey))
	if err != nil {
		b.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	apis := []struct{ name, path, body string }{
		{"chat", "/api/v1/chat/completions", `{"model":"%s","messages":[{"role":"user","content":"Say hello"}]%s}`},
		{"messages", "/api/v1/messages", `{"model":"%s","max_tokens":64,"messages":[{"role":"user","content":"Say hello"}]%s}`},
		{"responses", "/api/v1/responses", `{"model":"%s","input":"Say hello","store":false%s}`},
	}
	for _, api := range apis {
		for _, up := range []string{"openai", "anthropic"} {
			for _, stream := range []string{"", `,"stream":true`} {
				name := api.name + "-to-" + up
				if stream != "" {
					name += "-stream"
				}
				body := fmt.Sprintf(api.body, up, stream)
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						req := httptest.NewRequest(http.MethodPost, api.path, strings.NewReader(body))
						req.Header.Set("Authorization", "Bearer "+testKey)
						w := httptest.NewRecorder()
						a.Handler.ServeHTTP(w, req)
						if w.Code != 200 || !strings.Contains(w.Body.String(), "Hello") {
							b.Fatalf("status %d: %s", w.Code, w.Body.String())
						}
					}
				})
			}
		}
	}
}
