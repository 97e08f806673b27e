package systemtest_test

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// TestFailureAfterFinishKeepsTheAnswer: the upstream streams a whole answer
// (text, finish_reason "stop", its usage chunk) and then, instead of
// "data: [DONE]", its connection is reset or it sends an error event. As
// after a clean close at that point, the answer is whole: a non-streaming
// client gets it (before: 502, the answer lost and unbilled) and a stream
// ends with [DONE] (before: a second finish chunk, "finish_reason":"error").
func TestFailureAfterFinishKeepsTheAnswer(t *testing.T) {
	for _, ending := range []string{"error event", "reset"} {
		t.Run(ending, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				for _, c := range []string{
					`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"u","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
					`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"u","choices":[{"index":0,"delta":{"content":"Hello world"},"finish_reason":null}]}`,
					`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"u","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
					`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"u","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`,
				} {
					fmt.Fprintf(w, "data: %s\n\n", c)
				}
				if ending == "error event" {
					fmt.Fprint(w, "data: {\"error\":{\"message\":\"internal error after finish\",\"type\":\"server_error\"}}\n\n")
					return
				}
				http.NewResponseController(w).Flush()
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					panic(err)
				}
				buf.Flush()
				conn.(*net.TCPConn).SetLinger(0) // RST
				conn.Close()
			}))
			t.Cleanup(up.Close)
			cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: p0, api: openai, base_url: %q}
models:
  - id: m
    routes:
      - {provider: p0, model: u, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %s}]
`, up.URL, testKey))
			if err != nil {
				t.Fatal(err)
			}
			a, err := app.FromConfig(cfg, app.Options{Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(a.Handler)
			t.Cleanup(srv.Close)

			ns := mustCall(t, srv.URL, chatBody(""))
			if ns.status != 200 || !strings.Contains(ns.body, "Hello world") {
				t.Errorf("non-streaming: %d %s; want the finished answer", ns.status, ns.body)
			}
			s := mustCall(t, srv.URL, chatBody(`"stream":true`))
			if !strings.HasSuffix(strings.TrimSpace(s.body), "data: [DONE]") || strings.Contains(s.body, `"finish_reason":"error"`) {
				t.Errorf("streaming: want the finished answer ending with [DONE], got %s", s.body)
			}
		})
	}
}
