package prom

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/buzzgate/buzzgate/pkg/metrics"
)

// TestRecord: each request lands in the series its fields name, and the
// text exposition says so.
func TestRecord(t *testing.T) {
	s := New()
	for _, r := range []metrics.Request{
		// Answered by the first route, in the client's own protocol.
		{Status: 200, ClientAPI: "chat", Provider: "openai", UpstreamAPI: "openai", PassThrough: true, Project: "acme",
			Latency: 800 * time.Millisecond, TimeToFirstToken: 40 * time.Millisecond, Cost: 0.25},
		// Answered by the third route after two failures, translated.
		{Status: 200, ClientAPI: "messages", Provider: "p2", UpstreamAPI: "openai", RouteDepth: 2, Project: "acme",
			FailedProviders: []string{"p0", "p1"}, ConfigErrors: []string{"p1"}, Dropped: []string{"thinking", "top_k"},
			Latency: 3 * time.Second, TimeToFirstToken: 2 * time.Second, Cost: 0.5},
		{Status: 200, ClientAPI: "chat", Replayed: true, Project: "acme", Latency: time.Millisecond},
		{Status: 409, ClientAPI: "chat", Conflict: true, Project: "acme"},
		{Status: 409, ClientAPI: "chat", ReplayUnavailable: true, Project: "acme"},
		{Status: 409, ClientAPI: "responses", InProgress: true, Project: "acme"},
		{Status: 503, ClientAPI: "chat", StoreError: true, Project: "acme"},
		{Status: 402, ClientAPI: "chat", BudgetRefused: true, Project: "acme"},
		{Status: 402, ClientAPI: "chat", BalanceRefused: true, Project: "beta"},
		{Status: 429, ClientAPI: "chat", RateLimited: true, Project: "beta"},
		// Refused before authentication: no project.
		{Status: 401, ClientAPI: "chat"},
		// All routes failed.
		{Status: 502, ClientAPI: "chat", FailedProviders: []string{"p0", "p0"}, Project: "beta"},
	} {
		s.Record(r)
	}
	s.Count(metrics.MetricSecretRefreshFailures, 1)
	s.Count("SomethingElse", 2)

	expect := map[string]string{
		"buzzgate_requests_total": `
# HELP buzzgate_requests_total ` + defRequests.Help + `
# TYPE buzzgate_requests_total counter
buzzgate_requests_total{api="chat",status="200"} 2
buzzgate_requests_total{api="chat",status="401"} 1
buzzgate_requests_total{api="chat",status="402"} 2
buzzgate_requests_total{api="chat",status="409"} 2
buzzgate_requests_total{api="chat",status="429"} 1
buzzgate_requests_total{api="chat",status="502"} 1
buzzgate_requests_total{api="chat",status="503"} 1
buzzgate_requests_total{api="messages",status="200"} 1
buzzgate_requests_total{api="responses",status="409"} 1
`,
		"buzzgate_provider_calls_total": `
# HELP buzzgate_provider_calls_total ` + defProviderCalls.Help + `
# TYPE buzzgate_provider_calls_total counter
buzzgate_provider_calls_total{outcome="answered",provider="openai"} 1
buzzgate_provider_calls_total{outcome="answered",provider="p2"} 1
buzzgate_provider_calls_total{outcome="config_error",provider="p1"} 1
buzzgate_provider_calls_total{outcome="error",provider="p0"} 3
`,
		"buzzgate_idempotency_refusals_total": `
# HELP buzzgate_idempotency_refusals_total ` + defIdemRefusals.Help + `
# TYPE buzzgate_idempotency_refusals_total counter
buzzgate_idempotency_refusals_total{reason="conflict"} 1
buzzgate_idempotency_refusals_total{reason="in_progress"} 1
buzzgate_idempotency_refusals_total{reason="replay_unavailable"} 1
`,
		"buzzgate_admission_refusals_total": `
# HELP buzzgate_admission_refusals_total ` + defRefusals.Help + `
# TYPE buzzgate_admission_refusals_total counter
buzzgate_admission_refusals_total{project="acme",reason="budget"} 1
buzzgate_admission_refusals_total{project="beta",reason="balance"} 1
buzzgate_admission_refusals_total{project="beta",reason="rate_limit"} 1
`,
		"buzzgate_project_requests_total": `
# HELP buzzgate_project_requests_total ` + defProjectRequests.Help + `
# TYPE buzzgate_project_requests_total counter
buzzgate_project_requests_total{project="acme"} 8
buzzgate_project_requests_total{project="beta"} 3
`,
		"buzzgate_project_cost_usd_total": `
# HELP buzzgate_project_cost_usd_total ` + defProjectCost.Help + `
# TYPE buzzgate_project_cost_usd_total counter
buzzgate_project_cost_usd_total{project="acme"} 0.75
`,
		"buzzgate_protocol_pairs_total": `
# HELP buzzgate_protocol_pairs_total ` + defPairs.Help + `
# TYPE buzzgate_protocol_pairs_total counter
buzzgate_protocol_pairs_total{api="chat",pass_through="true",upstream_api="openai"} 1
buzzgate_protocol_pairs_total{api="messages",pass_through="false",upstream_api="openai"} 1
`,
		"buzzgate_dropped_fields_total": `
# HELP buzzgate_dropped_fields_total ` + defDropped.Help + `
# TYPE buzzgate_dropped_fields_total counter
buzzgate_dropped_fields_total{api="messages",field="thinking"} 1
buzzgate_dropped_fields_total{api="messages",field="top_k"} 1
`,
		"buzzgate_events_total": `
# HELP buzzgate_events_total ` + defEvents.Help + `
# TYPE buzzgate_events_total counter
buzzgate_events_total{event="SomethingElse"} 2
`,
	}
	for name, want := range expect {
		if err := testutil.GatherAndCompare(s.Registry(), strings.NewReader(want), name); err != nil {
			t.Error(err)
		}
	}
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"replays", testutil.ToFloat64(s.replays), 1},
		{"fallbacks", testutil.ToFloat64(s.fallbacks), 1},
		{"store errors", testutil.ToFloat64(s.storeErrors), 1},
		{"cost", testutil.ToFloat64(s.cost), 0.75},
		{"secret refresh failures", testutil.ToFloat64(s.secretRefresh), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}

	// Histograms: one observation per request (duration), per answer
	// (time to first token, route depth), in seconds.
	h := histogram(t, s, "buzzgate_request_duration_seconds", `api="chat"`)
	if h.GetSampleCount() != 10 || math.Abs(h.GetSampleSum()-0.801) > 1e-9 {
		t.Errorf("chat durations: %d, sum %v; want 10, sum 0.801", h.GetSampleCount(), h.GetSampleSum())
	}
	h = histogram(t, s, "buzzgate_time_to_first_token_seconds", `provider="p2"`)
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 2 {
		t.Errorf("p2's time to first token: %d, sum %v; want 1, sum 2", h.GetSampleCount(), h.GetSampleSum())
	}
	h = histogram(t, s, "buzzgate_route_depth", "")
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 2 {
		t.Errorf("route depths: %d, sum %v; want 2 answers, sum 2", h.GetSampleCount(), h.GetSampleSum())
	}
}

// histogram returns the series of family name whose labels, written as
// in the exposition, are labels.
func histogram(t *testing.T, s *Sink, name, labels string) *dto.Histogram {
	t.Helper()
	fams, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+`="`+lp.GetValue()+`"`)
			}
			if strings.Join(ls, ",") == labels {
				return m.GetHistogram()
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, labels)
	return nil
}

// TestRecordSweep: the reconciler's runs, their holds by result, what the
// settled bills came to (nano-USD in, USD out), and their durations; the
// runs' and holds' series exist at 0 before any run.
func TestRecordSweep(t *testing.T) {
	s := New()
	zero := `
# HELP buzzgate_reconcile_holds_total ` + defReconcileHolds.Help + `
# TYPE buzzgate_reconcile_holds_total counter
buzzgate_reconcile_holds_total{result="settled"} 0
buzzgate_reconcile_holds_total{result="skipped"} 0
buzzgate_reconcile_holds_total{result="written_off"} 0
# HELP buzzgate_reconcile_runs_total ` + defReconcileRuns.Help + `
# TYPE buzzgate_reconcile_runs_total counter
buzzgate_reconcile_runs_total{outcome="failed"} 0
buzzgate_reconcile_runs_total{outcome="ok"} 0
`
	if err := testutil.GatherAndCompare(s.Registry(), strings.NewReader(zero), "buzzgate_reconcile_runs_total", "buzzgate_reconcile_holds_total"); err != nil {
		t.Error(err)
	}
	s.RecordSweep(metrics.Sweep{Duration: 2 * time.Second})
	s.RecordSweep(metrics.Sweep{Settled: 3, WrittenOff: 1, SettledCostNanos: 1_500_000_000, Duration: time.Second})
	s.RecordSweep(metrics.Sweep{Settled: 1, Skipped: 2, SettledCostNanos: 250_000_000, Failed: true})
	want := `
# HELP buzzgate_reconcile_holds_total ` + defReconcileHolds.Help + `
# TYPE buzzgate_reconcile_holds_total counter
buzzgate_reconcile_holds_total{result="settled"} 4
buzzgate_reconcile_holds_total{result="skipped"} 2
buzzgate_reconcile_holds_total{result="written_off"} 1
# HELP buzzgate_reconcile_runs_total ` + defReconcileRuns.Help + `
# TYPE buzzgate_reconcile_runs_total counter
buzzgate_reconcile_runs_total{outcome="failed"} 1
buzzgate_reconcile_runs_total{outcome="ok"} 2
# HELP buzzgate_reconcile_settled_cost_usd_total ` + defReconcileCost.Help + `
# TYPE buzzgate_reconcile_settled_cost_usd_total counter
buzzgate_reconcile_settled_cost_usd_total 1.75
`
	if err := testutil.GatherAndCompare(s.Registry(), strings.NewReader(want),
		"buzzgate_reconcile_runs_total", "buzzgate_reconcile_holds_total", "buzzgate_reconcile_settled_cost_usd_total"); err != nil {
		t.Error(err)
	}
	if h := histogram(t, s, "buzzgate_reconcile_duration_seconds", ""); h.GetSampleCount() != 3 || h.GetSampleSum() != 3 {
		t.Errorf("reconcile durations: %d, sum %v; want 3, sum 3", h.GetSampleCount(), h.GetSampleSum())
	}
}

// TestRecordOddValues: what no request should carry (a NaN or infinite
// cost, a negative duration or depth, a status out of range, names that
// are not UTF-8, a negative count) is recorded without a panic and without
// making a counter go down.
func TestRecordOddValues(t *testing.T) {
	s := New()
	for _, c := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1} {
		s.Record(metrics.Request{Status: 0, ClientAPI: "chat", Provider: "p\xff", UpstreamAPI: "x\xfe", Project: "j\xff",
			RouteDepth: -3, Latency: -time.Second, TimeToFirstToken: -time.Second, Cost: c, Dropped: []string{"\xff"}})
	}
	s.Count(metrics.MetricSecretRefreshFailures, -1)
	s.Count(metrics.MetricSecretRefreshFailures, math.NaN())
	if err := testutil.GatherAndCompare(s.Registry(), strings.NewReader(`
# HELP buzzgate_requests_total `+defRequests.Help+`
# TYPE buzzgate_requests_total counter
buzzgate_requests_total{api="chat",status="other"} 4
`), "buzzgate_requests_total"); err != nil {
		t.Error(err)
	}
	if v := testutil.ToFloat64(s.cost); v != 0 {
		t.Errorf("cost = %v, want 0", v)
	}
	if v := testutil.ToFloat64(s.projectCost.WithLabelValues("j_")); v != 0 {
		t.Errorf("project cost = %v, want 0", v)
	}
	if v := testutil.ToFloat64(s.secretRefresh); v != 0 {
		t.Errorf("secret refresh failures = %v, want 0", v)
	}
	if v := testutil.ToFloat64(s.providerCalls.WithLabelValues("p_", "answered")); v != 4 {
		t.Errorf("answers of p_ = %v, want 4", v)
	}
	if h := histogram(t, s, "buzzgate_route_depth", ""); h.GetSampleSum() != 0 {
		t.Errorf("route depth sum = %v, want 0", h.GetSampleSum())
	}
	if problems, err := testutil.GatherAndLint(s.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestDefinitions: the registry holds exactly the metrics Definitions
// lists, with their types and labels, besides the Go runtime's and the
// process's; and promlint finds nothing to say about them.
func TestDefinitions(t *testing.T) {
	s := New()
	// One request that reaches every series, and one count of each kind.
	s.Record(metrics.Request{Status: 200, ClientAPI: "messages", Provider: "p1", UpstreamAPI: "openai", RouteDepth: 1,
		Project: "acme", FailedProviders: []string{"p0"}, Dropped: []string{"thinking"}, Cost: 1, Replayed: true,
		Conflict: true, StoreError: true, BudgetRefused: true})
	s.Count(metrics.MetricSecretRefreshFailures, 1)
	s.Count("Other", 1)
	s.RecordSweep(metrics.Sweep{Settled: 1, SettledCostNanos: 1})
	fams, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Def{}
	var runtime, process bool
	for _, f := range fams {
		switch name := f.GetName(); {
		case strings.HasPrefix(name, "go_"):
			runtime = true
		case strings.HasPrefix(name, "process_"):
			process = true
		default:
			d := Def{Name: name, Type: strings.ToLower(f.GetType().String())}
			for _, lp := range f.GetMetric()[0].GetLabel() {
				d.Labels = append(d.Labels, lp.GetName())
			}
			got[name] = d
		}
	}
	if !runtime || !process {
		t.Errorf("go_* metrics: %v, process_* metrics: %v; want both", runtime, process)
	}
	for _, d := range Definitions() {
		g, ok := got[d.Name]
		if !ok {
			t.Errorf("%s is not registered", d.Name)
			continue
		}
		delete(got, d.Name)
		want := slices.Sorted(slices.Values(d.Labels))
		if g.Type != d.Type || !slices.Equal(g.Labels, want) {
			t.Errorf("%s: registered as %s %v, defined as %s %v", d.Name, g.Type, g.Labels, d.Type, want)
		}
	}
	for name := range got {
		t.Errorf("%s is registered but not in Definitions", name)
	}
	problems, err := testutil.GatherAndLint(s.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "buzzgate_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}

// TestDocsTable: docs/operations.md lists the metrics as Definitions
// does, so the table cannot drift from the code.
func TestDocsTable(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	want := DocsTable()
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/operations.md's Prometheus table differs from the registered metrics; want:\n%s", want)
	}
}

// DocsTable is the Markdown table of the metrics for docs/operations.md.
func DocsTable() string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning | CloudWatch |\n|---|---|---|---|---|\n")
	for _, d := range Definitions() {
		labels := "none"
		if len(d.Labels) > 0 {
			labels = "`" + strings.Join(d.Labels, "`, `") + "`"
		}
		b.WriteString("| `" + d.Name + "` | " + d.Type + " | " + labels + " | " + d.Help + " | " + d.CloudWatch + " |\n")
	}
	return b.String()
}

// TestHandler: GET /metrics answers in the text format with the
// gateway's, the runtime's and the process's metrics; other paths are 404.
func TestHandler(t *testing.T) {
	s := New()
	s.Record(metrics.Request{Status: 200, ClientAPI: "chat"})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Errorf("GET /metrics: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`buzzgate_requests_total{api="chat",status="200"} 1`, "go_goroutines ", "process_cpu_seconds_total "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
	for _, path := range []string{"/", "/metrics/x", "/healthz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// TestRecordAllocs: recording a request allocates nothing once its series
// exist.
func TestRecordAllocs(t *testing.T) {
	for _, bb := range benchRequests {
		s := New()
		s.Record(bb.req)
		if n := testing.AllocsPerRun(200, func() { s.Record(bb.req) }); n > 0 {
			t.Errorf("%s: Record allocates %v times, want 0", bb.name, n)
		}
	}
}

// TestRecordConcurrent: requests recorded from many goroutines while the
// registry is scraped are all counted.
func TestRecordConcurrent(t *testing.T) {
	s := New()
	const workers, each = 8, 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			if _, err := s.Registry().Gather(); err != nil {
				t.Error(err)
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				s.Record(metrics.Request{Status: 200 + (i%2)*300, ClientAPI: "chat", Provider: "p", Project: "j",
					FailedProviders: []string{"q"}, Cost: 0.5, Latency: time.Duration(w) * time.Millisecond})
			}
		})
	}
	wg.Wait()
	<-done
	if got := testutil.ToFloat64(s.requests.WithLabelValues("chat", "200")) + testutil.ToFloat64(s.requests.WithLabelValues("chat", "500")); got != workers*each {
		t.Errorf("requests counted: %v, want %d", got, workers*each)
	}
	if got := testutil.ToFloat64(s.projectCost.WithLabelValues("j")); got != workers*each*0.5 {
		t.Errorf("project cost: %v, want %v", got, workers*each*0.5)
	}
}

// Definitions returns the metrics the sink registers (besides the Go
// runtime's go_* and the process's process_* ones), in the docs' order.
func Definitions() []Def {
	return []Def{defRequests, defDuration, defTTFT, defProviderCalls, defFallbacks, defRouteDepth,
		defReplays, defIdemRefusals, defStoreErrors, defCost, defPairs, defDropped,
		defProjectRequests, defProjectCost, defRefusals, defSecretRefresh,
		defReconcileRuns, defReconcileHolds, defReconcileCost, defReconcileDuration, defEvents}
}
