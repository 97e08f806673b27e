package app

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// chat sends the demo config's chat completion to h.
func chat(t *testing.T, h http.Handler) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/chat/completions", strings.NewReader(`{"model":"demo/chat","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-demo")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Fatalf("chat: %d %s", w.Code, w.Body)
	}
}

// scrape is GET /metrics on h.
func scrape(h http.Handler, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

// TestPrometheusWiring: BUZZGATE_METRICS_ADDR gives the app a /metrics
// handler of its own, fed by the same requests as the EMF lines; unset,
// or under Lambda, there is none; the API handler never serves /metrics.
func TestPrometheusWiring(t *testing.T) {
	const addr = "127.0.0.1:9090"
	t.Run("both sinks", func(t *testing.T) {
		var stdout bytes.Buffer
		a, err := New(context.Background(), Options{Stdout: &stdout, Getenv: env(map[string]string{EnvMetricsAddr: addr, EnvMetrics: "emf"})})
		if err != nil {
			t.Fatal(err)
		}
		if a.MetricsHandler == nil || a.MetricsAddr != addr {
			t.Fatalf("MetricsHandler %v at %q; want one at %s", a.MetricsHandler, a.MetricsAddr, addr)
		}
		chat(t, a.Handler)
		chat(t, a.Handler)
		w := scrape(a.MetricsHandler, "/metrics")
		if want := `buzzgate_requests_total{api="chat",status="200"} 2` + "\n"; w.Code != 200 || !strings.Contains(w.Body.String(), want) {
			t.Errorf("GET /metrics: %d, want %q in\n%s", w.Code, want, w.Body)
		}
		if n := strings.Count(stdout.String(), `"Requests":1`); n != 2 {
			t.Errorf("EMF lines with Requests: %d, want 2:\n%s", n, stdout.String())
		}
		if w := scrape(a.Handler, "/metrics"); w.Code != 404 {
			t.Errorf("GET /metrics on the API handler: %d, want 404", w.Code)
		}
	})
	t.Run("unset", func(t *testing.T) {
		a, err := New(context.Background(), Options{Getenv: env(nil)})
		if err != nil {
			t.Fatal(err)
		}
		if a.MetricsHandler != nil || a.MetricsAddr != "" {
			t.Errorf("MetricsHandler %v at %q; want none", a.MetricsHandler, a.MetricsAddr)
		}
	})
	t.Run("under Lambda", func(t *testing.T) {
		var stdout bytes.Buffer
		a, err := New(context.Background(), Options{Stdout: &stdout, Getenv: env(map[string]string{EnvMetricsAddr: addr, "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"})})
		if err != nil {
			t.Fatal(err)
		}
		if a.MetricsHandler != nil || a.MetricsAddr != "" {
			t.Errorf("MetricsHandler %v at %q under Lambda; want none", a.MetricsHandler, a.MetricsAddr)
		}
		chat(t, a.Handler)
		if !strings.Contains(stdout.String(), `"Requests":1`) {
			t.Errorf("no EMF line under Lambda:\n%s", stdout.String())
		}
	})
	t.Run("bad address", func(t *testing.T) {
		for _, v := range []string{"9090", "localhost", "127.0.0.1:"} {
			_, err := New(context.Background(), Options{Getenv: env(map[string]string{EnvMetricsAddr: v})})
			if want := EnvMetricsAddr + `="` + v + `": want host:port such as 127.0.0.1:9090`; err == nil || err.Error() != want {
				t.Errorf("%s=%q: %v, want %q", EnvMetricsAddr, v, err, want)
			}
		}
	})
}
