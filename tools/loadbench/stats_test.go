package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var l Latencies
	if got := l.Percentile(50); got != 0 {
		t.Fatalf("empty: %v", got)
	}
	// 1..1000 ms, shuffled: the p-th percentile of n values is the
	// ceil(p/100*n)-th smallest.
	for _, i := range rand.Perm(1000) {
		l.Add(time.Duration(i+1) * time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{
		{50, 500 * time.Millisecond},
		{99, 990 * time.Millisecond},
		{99.9, 999 * time.Millisecond},
		{100, 1000 * time.Millisecond},
		{0.01, 1 * time.Millisecond},
		{0, 1 * time.Millisecond},
	} {
		if got := l.Percentile(c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if l.Max() != time.Second || l.Count() != 1000 {
		t.Errorf("max %v count %d", l.Max(), l.Count())
	}
}

func TestPercentileAfterMoreValues(t *testing.T) {
	var a, b Latencies
	a.Add(3)
	a.Add(1)
	if a.Percentile(100) != 3 {
		t.Fatal("max of 1, 3")
	}
	b.Add(10)
	b.Add(2)
	a.Merge(&b) // 1 2 3 10: sorted again after the merge
	if got := a.Percentile(50); got != 2 {
		t.Errorf("p50 of 1 2 3 10 = %v, want 2", got)
	}
	if got := a.Percentile(100); got != 10 {
		t.Errorf("max = %v, want 10", got)
	}
	a.Add(0)
	if got := a.Percentile(20); got != 0 {
		t.Errorf("p20 of 0 1 2 3 10 = %v, want 0", got)
	}
}
