package idempotency

import (
	"testing"
	"time"
)

// The lease renewals keep a ticker's cadence: the next is due an interval
// after the last one began, and at once when the last store call took the
// whole interval or more (a slow store must not push the renewals past the
// lease's end).
func TestUntilNextRenewal(t *testing.T) {
	began := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const interval = 10 * time.Second
	for _, c := range []struct {
		took, want time.Duration
	}{
		{0, interval},
		{3 * time.Second, 7 * time.Second},
		{interval, 0},
		{25 * time.Second, 0},
	} {
		if got := untilNextRenewal(began, began.Add(c.took), interval); got != c.want {
			t.Errorf("a renewal that took %v: next in %v, want %v", c.took, got, c.want)
		}
	}
}
