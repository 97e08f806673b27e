package metrics

// Tee returns a Recorder that records each request in every one of rs, in
// order: one request's metrics feed several sinks (CloudWatch's EMF lines
// and Prometheus' registry). Discard recorders and nils are left out; with
// none left it returns Discard, with one that one. The result is also a
// Counter, forwarding each count to those of rs that are Counters.
func Tee(rs ...Recorder) Recorder {
	var keep []Recorder
	for _, r := range rs {
		switch r.(type) {
		case nil, Discard:
			continue
		}
		keep = append(keep, r)
	}
	switch len(keep) {
	case 0:
		return Discard{}
	case 1:
		return keep[0]
	}
	return tee(keep)
}

type tee []Recorder

var (
	_ Recorder = tee(nil)
	_ Counter  = tee(nil)
)

// Record records r in each sink. Each sink gets its own copy of r (a
// Request is passed by value), and none keeps its slices.
func (t tee) Record(r Request) {
	for _, s := range t {
		s.Record(r)
	}
}

// Count counts in each sink that is a Counter.
func (t tee) Count(metric string, n float64) {
	for _, s := range t {
		if c, ok := s.(Counter); ok {
			c.Count(metric, n)
		}
	}
}
