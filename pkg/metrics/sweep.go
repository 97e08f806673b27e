package metrics

import "time"

// Sweep is one run of the local server's reconciler (gateway.Reconcile),
// the counterpart of the sweep function's own EMF lines under Lambda.
type Sweep struct {
	// Settled, WrittenOff, Skipped: the holds the run billed, wrote off
	// at zero, and left for the next run.
	Settled, WrittenOff, Skipped int
	// SettledCostNanos is what the settled bills came to, in nano-USD.
	SettledCostNanos int64
	// Duration is the run's.
	Duration time.Duration
	// Failed: the run stopped with an error; what it did before is
	// counted all the same.
	Failed bool
}

// SweepRecorder records reconciler runs. The Prometheus sink is one; the
// EMF one is not (under Lambda the sweep function writes its own lines).
type SweepRecorder interface {
	RecordSweep(Sweep)
}

var _ SweepRecorder = tee(nil)

// RecordSweep records s in each sink that is a SweepRecorder.
func (t tee) RecordSweep(s Sweep) {
	for _, r := range t {
		if sr, ok := r.(SweepRecorder); ok {
			sr.RecordSweep(s)
		}
	}
}
