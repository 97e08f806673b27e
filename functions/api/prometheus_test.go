package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
)

// get is GET url: its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestPrometheusMetrics starts the gateway as `make run` does with
// BUZZGATE_METRICS_ADDR on a free loopback port, sends requests, and
// scrapes GET /metrics there: the counters count exactly those requests;
// the API's port has no /metrics.
func TestPrometheusMetrics(t *testing.T) {
	maddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "BUZZGATE_CONFIG=", "BUZZGATE_STORE=", "BUZZGATE_METRICS=", "BUZZGATE_METRICS_ADDR="+maddr)
	metricsURL := "http://" + maddr + "/metrics"

	// Before any request: the runtime's metrics, none of the requests'.
	code, body := get(t, metricsURL)
	if code != 200 || !strings.Contains(body, "go_goroutines ") || !strings.Contains(body, "process_resident_memory_bytes ") {
		t.Fatalf("GET /metrics before any request: %d\n%s", code, body)
	}
	if strings.Contains(body, "buzzgate_requests_total{") {
		t.Errorf("requests counted before any was sent:\n%s", body)
	}

	send := func(path, key, body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, g.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	const chat = `{"model":"demo/chat","messages":[{"role":"user","content":"Hello"}]}`
	for range 3 {
		send("/api/v1/chat/completions", "sk-demo", chat)
	}
	send("/api/v1/chat/completions", "sk-demo", `{"model":"demo/fallback","messages":[{"role":"user","content":"Hello"}]}`)
	send("/api/v1/chat/completions", "sk-wrong", chat)
	send("/api/v1/messages", "sk-demo", `{"model":"demo/chat","max_tokens":50,"messages":[{"role":"user","content":"Hello"}]}`)
	// Not a generation request: not counted, as in CloudWatch.
	if code, _ := get(t, g.base+"/healthz"); code != 200 {
		t.Errorf("GET /healthz: %d", code)
	}

	// The API's port does not serve the metrics.
	if code, body := get(t, g.base+"/metrics"); code != 404 || strings.Contains(body, "buzzgate_requests_total") {
		t.Errorf("GET /metrics on the API port: %d %s; want 404", code, body)
	}
	if code, body := get(t, g.base+"/api/v1/metrics"); code != 404 || strings.Contains(body, "buzzgate_requests_total") {
		t.Errorf("GET /api/v1/metrics on the API port: %d %s; want 404", code, body)
	}

	code, body = get(t, metricsURL)
	if code != 200 {
		t.Fatalf("GET /metrics: %d\n%s", code, body)
	}
	for _, want := range []string{
		`buzzgate_requests_total{api="chat",status="200"} 4`,
		`buzzgate_requests_total{api="chat",status="401"} 1`,
		`buzzgate_requests_total{api="messages",status="200"} 1`,
		`buzzgate_request_duration_seconds_count{api="chat"} 5`,
		`buzzgate_project_requests_total{project="demo"} 5`,
		`buzzgate_fallbacks_total 1`,
		`buzzgate_route_depth_count 5`,
		`buzzgate_route_depth_sum 1`,
		`buzzgate_provider_calls_total{outcome="answered",provider="alpha"} 5`,
		`buzzgate_protocol_pairs_total{api="messages",pass_through="false",upstream_api="simulated"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
	if n := strings.Count(body, "buzzgate_requests_total{"); n != 3 {
		t.Errorf("%d series of buzzgate_requests_total, want 3", n)
	}
	if strings.Contains(body, "sk-demo") || strings.Contains(body, "sk-wrong") || strings.Contains(body, "Hello") || strings.Contains(body, "req_") {
		t.Errorf("the metrics carry a key, a prompt or a request id:\n%s", body)
	}
	// The local reconciler's first run, at start-up, is counted (it runs
	// beside the first requests, so it is waited for).
	const run = `buzzgate_reconcile_runs_total{outcome="ok"} 1` + "\n"
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(body, run) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		_, body = get(t, metricsURL)
	}
	if !strings.Contains(body, run) {
		t.Errorf("GET /metrics lacks %q", run)
	}
	if !strings.Contains(g.logs.String(), `"msg":"buzzgate serving Prometheus metrics"`) {
		t.Errorf("no start-up line for the metrics listener:\n%s", g.logs.String())
	}
	if t.Failed() {
		t.Logf("GET /metrics:\n%s", body)
	}
}

// TestPrometheusAddrInUse: a metrics address the gateway cannot listen on
// (here the API's own) stops start-up with an error that names the
// variable, rather than serving without the metrics.
func TestPrometheusAddrInUse(t *testing.T) {
	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(bootstrap(t))
	cmd.Env = append(os.Environ(), "AWS_LAMBDA_RUNTIME_API=", "BUZZGATE_CONFIG=", "BUZZGATE_STORE=", "BUZZGATE_ADDR=127.0.0.1:0", "BUZZGATE_METRICS_ADDR="+addr)
	logs := &proc.SyncBuffer{}
	cmd.Stderr = logs
	p, err := proc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(0)
	select {
	case <-p.Exited():
	case <-time.After(15 * time.Second):
		t.Fatalf("the gateway still runs with %s in use:\n%s", addr, logs.String())
	}
	if p.Err() == nil || !strings.Contains(logs.String(), `BUZZGATE_METRICS_ADDR=\"`+addr+`\"`) {
		t.Errorf("exit %v; want a failure naming BUZZGATE_METRICS_ADDR:\n%s", p.Err(), logs.String())
	}
}
