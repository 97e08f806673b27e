package main

import (
	"math"
	"slices"
	"time"
)

// Latencies holds every latency of one run; percentiles are exact (nearest
// rank over the sorted values), which is cheap at these counts.
type Latencies struct {
	d      []time.Duration
	sorted bool
}

// Add records one latency.
func (l *Latencies) Add(d time.Duration) {
	l.d = append(l.d, d)
	l.sorted = false
}

// Merge adds every latency of o.
func (l *Latencies) Merge(o *Latencies) {
	l.d = append(l.d, o.d...)
	l.sorted = false
}

// Count is the number of latencies recorded.
func (l *Latencies) Count() int { return len(l.d) }

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100): the
// smallest recorded value with at least p % of the values at or below it;
// 0 when nothing was recorded.
func (l *Latencies) Percentile(p float64) time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	if !l.sorted {
		slices.Sort(l.d)
		l.sorted = true
	}
	// The epsilon keeps 99.9/100*1000 (999.0000000000001) at rank 999.
	rank := int(math.Ceil(p/100*float64(len(l.d)) - 1e-9))
	rank = min(max(rank, 1), len(l.d))
	return l.d[rank-1]
}

// Max is the largest latency recorded, 0 when none.
func (l *Latencies) Max() time.Duration { return l.Percentile(100) }
