package prom

import (
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/metrics"
)

// benchRequests are the requests of pkg/metrics' BenchmarkRecord, with a
// client API and a project as the gateway sets them.
var benchRequests = []struct {
	name string
	req  metrics.Request
}{
	{"answer", metrics.Request{Status: 200, ClientAPI: "chat", UpstreamAPI: "openai", Provider: "openai", Project: "acme",
		Latency: 850 * time.Millisecond, TimeToFirstToken: 120 * time.Millisecond, Cost: 0.00042}},
	{"fallback", metrics.Request{Status: 200, ClientAPI: "messages", UpstreamAPI: "openai", Provider: "p2", RouteDepth: 2, Project: "acme",
		FailedProviders: []string{"p0", "p1", "p0"}, Dropped: []string{"thinking"},
		Latency: 3 * time.Second, TimeToFirstToken: 2500 * time.Millisecond, Cost: 0.01}},
	{"replay", metrics.Request{Status: 200, ClientAPI: "chat", Replayed: true, Project: "acme", Latency: 3 * time.Millisecond}},
}

// BenchmarkRecord: what a request's metrics cost in the Prometheus sink,
// and in both sinks at once (metrics.Tee) as the local server with
// BUZZGATE_METRICS=emf and BUZZGATE_METRICS_ADDR records them.
func BenchmarkRecord(b *testing.B) {
	for _, bb := range benchRequests {
		b.Run("prometheus/"+bb.name, func(b *testing.B) {
			s := New()
			b.ReportAllocs()
			for b.Loop() {
				s.Record(bb.req)
			}
		})
		b.Run("tee/"+bb.name, func(b *testing.B) {
			r := metrics.Tee(metrics.NewEMF(discard{}, "prod"), New())
			b.ReportAllocs()
			for b.Loop() {
				r.Record(bb.req)
			}
		})
	}
	b.Run("prometheus/answer/parallel", func(b *testing.B) {
		s := New()
		r := benchRequests[0].req
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s.Record(r)
			}
		})
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
