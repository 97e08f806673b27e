package metrics

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// recording keeps what it is given.
type recording struct {
	reqs   []Request
	counts []string
}

func (r *recording) Record(q Request)               { r.reqs = append(r.reqs, q) }
func (r *recording) Count(metric string, _ float64) { r.counts = append(r.counts, metric) }

// recordOnly is a Recorder that is not a Counter.
type recordOnly struct{ n int }

func (r *recordOnly) Record(Request) { r.n++ }

// TestTee: one request reaches every sink, the EMF lines included; counts
// reach the sinks that are Counters.
func TestTee(t *testing.T) {
	var buf bytes.Buffer
	e := NewEMF(&buf, "prod")
	e.now = func() time.Time { return time.UnixMilli(1700000000000) }
	rec, plain := &recording{}, &recordOnly{}
	r := Tee(e, nil, Discard{}, rec, plain)
	req := Request{Status: 200, Provider: "p1", FailedProviders: []string{"p0"}, Latency: time.Second}
	r.Record(req)
	if len(rec.reqs) != 1 || rec.reqs[0].Provider != "p1" || !slices.Equal(rec.reqs[0].FailedProviders, []string{"p0"}) || plain.n != 1 {
		t.Errorf("sinks got %+v and %d requests; want the request once each", rec.reqs, plain.n)
	}
	if n := strings.Count(buf.String(), "\n"); n != 2 || !strings.Contains(buf.String(), `"Requests":1`) {
		t.Errorf("EMF lines: %d, want the request's and its provider error's:\n%s", n, buf.String())
	}
	c, ok := r.(Counter)
	if !ok {
		t.Fatalf("Tee(...) is not a Counter")
	}
	buf.Reset()
	c.Count(MetricSecretRefreshFailures, 1)
	if !slices.Equal(rec.counts, []string{MetricSecretRefreshFailures}) || !strings.Contains(buf.String(), `"SecretRefreshFailures":1`) {
		t.Errorf("counts: %v and EMF %q; want the count in both", rec.counts, buf.String())
	}
}

// TestTeeOfOne: with one sink left Tee is that sink, with none Discard, so
// the usual configurations cost nothing more than before.
func TestTeeOfOne(t *testing.T) {
	e := NewEMF(&bytes.Buffer{}, "prod")
	if got := Tee(e, Discard{}, nil); got != Recorder(e) {
		t.Errorf("Tee(emf, Discard, nil) = %T, want the EMF itself", got)
	}
	if got := Tee(nil, Discard{}); got != Recorder(Discard{}) {
		t.Errorf("Tee(nil, Discard) = %T, want Discard", got)
	}
}
