package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSizeList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"10KB,200KB,1MB", []int{10 << 10, 200 << 10, 1 << 20}, false},
		{" 512 , 2 mb", []int{512, 2 << 20}, false},
		{"none", []int{}, false},
		{"0", nil, true},
		{"5MB", nil, true},
		{"1GB", nil, true},
		{"", nil, true},
	} {
		var got []int
		err := sizeList(&got)(c.in)
		if (err != nil) != c.err {
			t.Errorf("%q: error %v, want error %v", c.in, err, c.err)
			continue
		}
		if !c.err && !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.in, got, c.want)
		}
	}
}

func TestSizeString(t *testing.T) {
	for n, want := range map[int]string{10 << 10: "10 KB", 1 << 20: "1 MB", 1500: "1500 B", 3 << 19: "1536 KB"} {
		if got := sizeString(n); got != want {
			t.Errorf("sizeString(%d) = %q, want %q", n, got, want)
		}
	}
}

// sizeRunOf is a run whose every latency is d.
func sizeRunOf(d time.Duration, n int) sizeRun {
	var r sizeRun
	for range n {
		r.lat.Add(d)
		r.n++
	}
	return r
}

func TestSizeVerdictsAndRows(t *testing.T) {
	ms := time.Millisecond
	sizes := []*sizeResult{
		{size: 10 << 10, direct: sizeRunOf(ms, 10), unkeyed: sizeRunOf(2*ms, 10), keyed: sizeRunOf(9*ms, 10)},
		{size: 1 << 20, direct: sizeRunOf(3*ms, 10), unkeyed: sizeRunOf(5*ms, 10), keyed: sizeRunOf(7500*time.Microsecond, 10)},
	}
	vs := sizeVerdicts(sizes)
	if len(vs) != 2 {
		t.Fatalf("%d verdicts, want the two of 1 MB: %+v", len(vs), vs)
	}
	for i, want := range []struct {
		target, measured string
		met              bool
	}{
		{"1 MB body, unkeyed: overhead p50 <= 2 ms", "+2.000 ms", true},
		{"1 MB body, keyed: overhead p50 <= 4 ms", "+4.500 ms", false},
	} {
		if v := vs[i]; v.target != want.target || v.measured != want.measured || v.met != want.met || !v.known {
			t.Errorf("verdict %d = %+v, want %+v", i, v, want)
		}
	}
	sizes[1].unkeyed.errs = 1
	if v := sizeVerdicts(sizes)[0]; v.met {
		t.Errorf("a run with failed requests met its target: %+v", v)
	}
	rows := sizeRows(sizes)
	if len(rows) != 2 || rows[0][0] != "10 KB" || rows[0][3] != "+1.000" || rows[0][5] != "+8.000" || rows[1][0] != "1 MB" {
		t.Errorf("rows %q", rows)
	}
	if md := sizeSection(sizes, options{warmup: time.Second, sizeDuration: 3 * time.Second}); !strings.Contains(md, "| 1 MB ") {
		t.Errorf("section without the 1 MB row:\n%s", md)
	}
}
