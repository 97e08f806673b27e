package systemtest_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/metrics"
	"github.com/buzzgate/buzzgate/pkg/metrics/prom"
)

// BenchmarkMetricsSinks is a whole unkeyed request through the handler (as
// BenchmarkIdempotency's unkeyed one) with each metrics sink: none, the
// EMF lines, Prometheus (BUZZGATE_METRICS_ADDR), and both at once. The
// differences are what each sink adds to a request.
func BenchmarkMetricsSinks(b *testing.B) {
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
	body := `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`
	for _, s := range []struct {
		name string
		sink func() metrics.Recorder
	}{
		{"none", func() metrics.Recorder { return metrics.Discard{} }},
		{"emf", func() metrics.Recorder { return metrics.NewEMF(io.Discard, "bench") }},
		{"prometheus", func() metrics.Recorder { return prom.New() }},
		{"both", func() metrics.Recorder { return metrics.Tee(metrics.NewEMF(io.Discard, "bench"), prom.New()) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			a, err := app.FromConfig(cfg, app.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: s.sink()})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if w := serveBench(b, a.Handler, body); w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
