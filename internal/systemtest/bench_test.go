package systemtest_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
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
// overhead per request. It fails if the requests leave a goroutine behind.
func BenchmarkOverhead(b *testing.B) {
	handler, upURL := benchGateway(b, nil)
	gw := httptest.NewServer(handler)
	b.Cleanup(gw.Close)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	body := `{"model":"%s","messages":[{"role":"user","content":"Say hello"}]%s}`
	cases := []struct {
		name, url, body string
		auth            bool
	}{
		{"direct", upURL + "/chat/completions", fmt.Sprintf(body, "up-model", ""), false},
		{"gateway", gw.URL + "/api/v1/chat/completions", fmt.Sprintf(body, "m", ""), true},
		{"direct-stream", upURL + "/chat/completions", fmt.Sprintf(body, "up-model", `,"stream":true`), false},
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
				handler.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d", w.Code)
				}
			}
			do()
			leftBehind := goroutinesSince(b)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				do()
			}
			b.StopTimer()
			// CPU time of the whole process (the gateway, the canned
			// upstream, the GC) per request: unlike ns/op, it hardly moves
			// when other processes share the machine.
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e3, "cpu-µs/op")
			leftBehind()
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
			leftBehind := goroutinesSince(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				do()
			}
			b.StopTimer()
			// The client's keep-alive connections are its own, not the
			// requests': closed, they end with the server's side of them.
			client.CloseIdleConnections()
			leftBehind()
		})
	}
}

// goroutinesSince notes the goroutines running now; the func it returns
// fails b if any goroutine started since is still running (goleak waits a
// little for those just ending).
func goroutinesSince(b *testing.B) (check func()) {
	before := goleak.IgnoreCurrent()
	return func() {
		b.Helper()
		closeUpstreamPool()
		if err := goleak.Find(before); err != nil {
			b.Errorf("goroutines left behind by %d requests: %v", b.N, err)
		}
	}
}

// benchGateway is a gateway handler in front of a canned upstream, on store
// (nil: a memory store), and the upstream's base URL.
func benchGateway(b *testing.B, store idempotency.Store) (http.Handler, string) {
	up := cannedUpstream(b)
	return oneRouteApp(b, up.URL+"/v1", store).Handler, up.URL + "/v1"
}

// oneRouteApp is a gateway with one model, m, on one OpenAI-protocol
// upstream at upstreamURL, and one project with testKey.
func oneRouteApp(tb testing.TB, upstreamURL string, store idempotency.Store) *app.App {
	tb.Helper()
	cfg, err := catalog.Parse([]byte(fmt.Sprintf(`
providers:
  - {name: up, api: openai, base_url: %q}
models:
  - id: m
    routes: [{provider: up, model: up-model, input_price: 1, output_price: 2}]
projects:
  - id: p
    keys: [{key: %s}]
`, upstreamURL, testKey)))
	if err != nil {
		tb.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Store: store})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func serveBench(b *testing.B, h http.Handler, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/api/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// BenchmarkIdempotency is the idempotency layer's cost on the memory store,
// through the whole handler: unkeyed, keyed with a new key each time (a
// reservation, a recorded answer, a completion), and a replay.
func BenchmarkIdempotency(b *testing.B) {
	h, _ := benchGateway(b, memstore.New(1<<30))
	body := `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`
	b.Run("unkeyed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if w := serveBench(b, h, body); w.Code != 200 {
				b.Fatal(w.Code)
			}
		}
	})
	b.Run("keyed-new", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if w := serveBench(b, h, body, "Idempotency-Key", fmt.Sprintf("new-%d-%d", b.N, i)); w.Code != 200 {
				b.Fatal(w.Code)
			}
		}
	})
	b.Run("keyed-replay", func(b *testing.B) {
		serveBench(b, h, body, "Idempotency-Key", "replayed")
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if w := serveBench(b, h, body, "Idempotency-Key", "replayed"); w.Code != 200 || w.Header().Get("Idempotency-Replayed") != "true" {
				b.Fatal(w.Code)
			}
		}
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
