package main

import "time"

// Schedule is an open-loop pacing: request i is due at Start + i/Rate,
// whenever the previous ones finish. Latency is measured from that intended
// time, so a stall delays the requests due during it and counts against
// them (no coordinated omission).
type Schedule struct {
	Start time.Time
	Rate  int // requests per second
}

// At is request i's intended send time. It is computed from i, not by
// adding intervals, so it does not drift.
func (s Schedule) At(i int) time.Time {
	return s.Start.Add(s.Offset(i))
}

// Offset is request i's intended time after Start.
func (s Schedule) Offset(i int) time.Duration {
	return time.Duration(int64(i) * int64(time.Second) / int64(s.Rate))
}

// Count is how many requests fall in the first d: those with Offset(i) < d.
func (s Schedule) Count(d time.Duration) int {
	// The smallest i with i*1e9/rate >= d, i.e. ceil(d*rate/1e9).
	n := (int64(d)*int64(s.Rate) + int64(time.Second) - 1) / int64(time.Second)
	return int(n)
}
