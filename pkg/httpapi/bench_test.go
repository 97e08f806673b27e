package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// cannedUpstream answers every chat completion at once with the same short
// answer, streamed or not as asked, so that a benchmark measures the
// gateway rather than the fake.
func cannedUpstream(b *testing.B) *httptest.Server {
	chunks := []string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`,
	}
	var stream bytes.Buffer
	for _, c := range chunks {
		stream.WriteString("data: " + c + "\n\n")
	}
	stream.WriteString("data: [DONE]\n\n")
	streamBody := stream.Bytes()
	jsonBody := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"Hello world"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(streamBody)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(jsonBody)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkOverhead compares a client calling the upstream directly with the
// same client calling it through buzzgate; the difference is the gateway's
// overhead per request. It also reports goroutines left behind per request.
func BenchmarkOverhead(b *testing.B) {
	up := cannedUpstream(b)
	cfg, err := catalog.Parse([]byte(fmt.Sprintf(`
providers:
  - {name: up, api: openai, base_url: %q}
models:
  - id: m
    routes: [{provider: up, model: up-model, input_price: 1, output_price: 2}]
projects:
  - id: p
    keys: [{key: %s}]
`, up.URL+"/v1", testKey)))
	if err != nil {
		b.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(a.Handler)
	b.Cleanup(gw.Close)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	body := `{"model":"%s","messages":[{"role":"user","content":"Say hello"}]%s}`
	cases := []struct {
		name, url, body string
		auth            bool
	}{
		{"direct", up.URL + "/v1/chat/completions", fmt.Sprintf(body, "up-model", ""), false},
		{"gateway", gw.URL + "/api/v1/chat/completions", fmt.Sprintf(body, "m", ""), true},
		{"direct-stream", up.URL + "/v1/chat/completions", fmt.Sprintf(body, "up-model", `,"stream":true`), false},
		{"gateway-stream", gw.URL + "/api/v1/chat/completions", fmt.Sprintf(body, "m", `,"stream":true`), true},
	}
	// In process: the client's own hop to the gateway is left out, so what
	// is measured beyond the direct call is the gateway's own work.
	for _, c := range []struct{ name, body string }{
		{"gateway-inprocess", fmt.Sprintf(body, "m", "")},
		{"gateway-inprocess-stream", fmt.Sprintf(body, "m", `,"stream":true`)},
	} {
		b.Run(c.name, func(b *testing.B) {
			do := func() {
				req := httptest.NewRequest(http.MethodPost, "/api/v1/chat/completions", strings.NewReader(c.body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				w := httptest.NewRecorder()
				a.Handler.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d", w.Code)
				}
			}
			do()
			before := settledGoroutines()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				do()
			}
			b.StopTimer()
			b.ReportMetric(float64(settledGoroutines()-before)/float64(b.N), "goroutines-left/op")
		})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			do := func() {
				req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(c.body))
				if c.auth {
					req.Header.Set("Authorization", "Bearer "+testKey)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			do() // warm the connections
			before := settledGoroutines()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				do()
			}
			b.StopTimer()
			left := settledGoroutines() - before
			b.ReportMetric(float64(left)/float64(b.N), "goroutines-left/op")
		})
	}
}

// settledGoroutines waits briefly for finished handlers to exit and counts
// the goroutines.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for i := 0; i < 50; i++ {
		time.Sleep(2 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return m
		}
		n = m
	}
	return n
}
