package main

import (
	"testing"
	"time"
)

func TestScheduleEvenAndWithoutDrift(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, rate := range []int{500, 1000, 2000, 3, 7777} {
		s := Schedule{Start: start, Rate: rate}
		if !s.At(0).Equal(start) {
			t.Errorf("rate %d: first request at %v", rate, s.At(0))
		}
		// Exactly one second after `rate` requests, whatever rounding.
		if got := s.Offset(rate); got != time.Second {
			t.Errorf("rate %d: request %d at %v, want 1s", rate, rate, got)
		}
		if got := s.Offset(10 * rate); got != 10*time.Second {
			t.Errorf("rate %d: request %d at %v, want 10s", rate, 10*rate, got)
		}
		interval := time.Second / time.Duration(rate)
		for i := 1; i < 3*rate; i++ {
			d := s.Offset(i) - s.Offset(i-1)
			if d < interval || d > interval+1 {
				t.Fatalf("rate %d: gap %v before request %d, want %v", rate, d, i, interval)
			}
		}
	}
}

func TestScheduleCount(t *testing.T) {
	for _, c := range []struct {
		rate int
		d    time.Duration
		want int
	}{
		{2000, 3 * time.Second, 6000},
		{2000, 500 * time.Millisecond, 1000},
		{500, 0, 0},
		{3, time.Second, 3},
		{3, 1001 * time.Millisecond, 4},
		{1000, 1500 * time.Microsecond, 2}, // requests at 0 and 1 ms
	} {
		s := Schedule{Rate: c.rate}
		got := s.Count(c.d)
		if got != c.want {
			t.Errorf("Count(%v) at %d/s = %d, want %d", c.d, c.rate, got, c.want)
		}
		// The definition: every counted request is due before d, the next
		// one is not.
		if got > 0 && s.Offset(got-1) >= c.d {
			t.Errorf("rate %d d %v: request %d is due at %v", c.rate, c.d, got-1, s.Offset(got-1))
		}
		if s.Offset(got) < c.d {
			t.Errorf("rate %d d %v: request %d, due at %v, was not counted", c.rate, c.d, got, s.Offset(got))
		}
	}
}
