package main

import (
	"bytes"
	"image/color"
	"image/png"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMarkdownTableAligned(t *testing.T) {
	got := markdownTable([]string{"name", "ms"}, [][]string{{"a", "1.5"}, {"longer", "12.250"}}, []bool{false, true})
	want := "" +
		"| name   |     ms |\n" +
		"|--------|-------:|\n" +
		"| a      |    1.5 |\n" +
		"| longer | 12.250 |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// constant is a summary whose every latency is d.
func constant(d time.Duration, n int) *summary {
	s := &summary{n: n, rps: float64(n)}
	for range n {
		s.ttfb.Add(d / 2)
		s.ttlb.Add(d)
	}
	return s
}

func sampleResults() *results {
	res := newResults()
	res.rates, res.streamRates, res.conns, res.rssResets = []int{500, 2000}, []int{500}, 64, true
	ms := time.Millisecond
	for _, r := range []int{500, 2000, 0} {
		res.direct[runKey{unkeyed, r}] = constant(ms, 100)
		res.gateway[runKey{unkeyed, r}] = constant(ms+200*time.Microsecond, 100) // +0.2 ms: met
		res.gateway[runKey{keyed, r}] = constant(2*ms, 100)                      // +67 %: not met
		res.gateway[runKey{replay, r}] = constant(ms, 100)                       // faster: met
	}
	res.gateway[runKey{unkeyed, 0}].rps = 12000
	res.gateway[runKey{unkeyed, 0}].rssKB = 60 * 1024 // over 50 MiB
	res.direct[runKey{stream, 500}] = constant(ms, 100)
	res.gateway[runKey{stream, 500}] = constant(3*ms, 100) // first byte +0.5 ms: not met
	return res
}

func TestVerdicts(t *testing.T) {
	got := map[string]bool{}
	for _, v := range sampleResults().verdicts() {
		if !v.known {
			t.Errorf("%s: not measured", v.target)
		}
		got[v.target] = v.met
	}
	for target, want := range map[string]bool{
		"overhead p50 <= 0.25 ms at 500/s":                     true,
		"overhead p50 <= 0.25 ms at 2000/s":                    true,
		"overhead p99 <= 1 ms at 2000/s":                       true,
		"closed loop >= 10,000 req/s at 64 conns":              true,
		"gateway peak RSS <= 50 MiB under that closed loop":    false,
		"keyed p50 <= unkeyed p50 + 10 % at 2000/s":            false,
		"keyed p99 <= 2 x unkeyed p99 at 2000/s":               true,
		"replay p50 < unkeyed p50 (gateway), every rate":       true,
		"stream first byte p50 <= direct + 0.3 ms, every rate": false,
	} {
		met, ok := got[target]
		if !ok {
			t.Errorf("no verdict %q (have %v)", target, got)
		} else if met != want {
			t.Errorf("%q met = %v, want %v", target, met, want)
		}
	}
}

func TestVerdictsNotMeasured(t *testing.T) {
	res := newResults()
	res.rates, res.conns = []int{500}, 64
	for _, v := range res.verdicts() {
		if v.known {
			t.Errorf("%s: known with no runs (%s)", v.target, v.measured)
		}
	}
	for _, r := range verdictRows(res.verdicts()) {
		if r[2] != "not measured" {
			t.Errorf("row %v", r)
		}
	}
}

func TestMainRows(t *testing.T) {
	rows := sampleResults().mainRows()
	var labels []string
	for _, r := range rows {
		if len(r) != len(mainHeader) {
			t.Fatalf("row %v has %d cells, want %d", r, len(r), len(mainHeader))
		}
		labels = append(labels, r[0]+" "+r[1])
	}
	want := []string{
		"unkeyed 500/s", "unkeyed 2000/s", "unkeyed closed, 64 conns",
		"keyed (new key) 500/s", "keyed (new key) 2000/s", "keyed (new key) closed, 64 conns",
		"replay 500/s", "replay 2000/s", "replay closed, 64 conns",
		"stream, first byte 500/s", "stream, last byte 500/s",
	}
	if !slices.Equal(labels, want) {
		t.Fatalf("rows\n%q\nwant\n%q", labels, want)
	}
	// unkeyed 500/s: direct 1 ms, gateway 1.2 ms, overhead +0.2 ms.
	if r := rows[0]; r[2] != "1.000" || r[5] != "1.200" || r[8] != "+0.200" {
		t.Errorf("unkeyed 500/s row %v", r)
	}
	// keyed rows compare with the unkeyed direct run, and say so.
	if r := rows[3]; r[2] != "1.000 (unkeyed)" || r[8] != "+1.000" {
		t.Errorf("keyed 500/s row %v", r)
	}
	// stream first byte is ttfb (half of ttlb here), last byte ttlb.
	if r := rows[9]; r[2] != "0.500" || r[5] != "1.500" || r[8] != "+1.000" {
		t.Errorf("stream first byte row %v", r)
	}
	if r := rows[10]; r[2] != "1.000" || r[5] != "3.000" {
		t.Errorf("stream last byte row %v", r)
	}
	if r := rows[2]; r[13] != "60.0" {
		t.Errorf("closed loop RSS cell %q", r[13])
	}
	// CPU per request sent (the warm-up's included); keyed rows have no
	// direct run of their own, and an unknown CPU time is an empty cell.
	res := sampleResults()
	res.direct[runKey{unkeyed, 500}].cpu, res.direct[runKey{unkeyed, 500}].cpuKnown, res.direct[runKey{unkeyed, 500}].sent = 30*time.Millisecond, true, 1000
	res.gateway[runKey{unkeyed, 500}].cpu, res.gateway[runKey{unkeyed, 500}].cpuKnown, res.gateway[runKey{unkeyed, 500}].sent = 250*time.Millisecond, true, 2000
	res.gateway[runKey{keyed, 500}].cpu, res.gateway[runKey{keyed, 500}].cpuKnown, res.gateway[runKey{keyed, 500}].sent = 300*time.Millisecond, true, 2000
	res.gateway[runKey{unkeyed, 2000}].cpu, res.gateway[runKey{unkeyed, 2000}].sent = 300*time.Millisecond, 2000
	rows = res.mainRows()
	for i, want := range map[int][2]string{0: {"30", "125"}, 1: {"", ""}, 3: {"", "150"}} {
		if got := [2]string{rows[i][14], rows[i][15]}; got != want {
			t.Errorf("row %q: CPU cells %q, want %q", rows[i][0]+" "+rows[i][1], got, want)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// utime 250 and stime 30 ticks; the command name holds ") (" and spaces.
	line := "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 9 0 1000 2000000 500\n"
	got, err := parseStatCPU(line)
	if err != nil || got != 2800*time.Millisecond {
		t.Errorf("parseStatCPU = %v, %v; want 2.8s", got, err)
	}
	for _, bad := range []string{"", "4242 (a) S 1 2", "4242 (a) S 1 2 3 4 5 6 7 8 9 10 x 0"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
}

func TestReportMentionsEverything(t *testing.T) {
	h := header{label: "baseline", date: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), gatewayID: "abc1234 (go1.26, sha256 0)", harness: "def5678",
		opts: options{out: "bench/load-before", rates: []int{500, 2000}, streamRates: []int{500}, conns: 64, logLevel: "warn"}}
	md := report(h, sampleResults())
	for _, s := range []string{"# buzzgate load benchmark: baseline", "[load-before.png](load-before.png)", "2026-01-02", "abc1234", "BUZZGATE_LOG_LEVEL=warn", "## Targets", "| no ", "| yes "} {
		if !strings.Contains(md, s) {
			t.Errorf("report lacks %q:\n%s", s, md)
		}
	}
}

func TestLogTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0.3, 4, []float64{0.2, 0.5, 1, 2, 5}},
		{1, 1, []float64{1, 2}},
		{0.05, 0.05, []float64{0.05, 0.1}},
		{0.6, 130, []float64{0.5, 1, 2, 5, 10, 20, 50, 100, 200}},
		{0.0013, 0.004, []float64{0.001, 0.002, 0.005}},
	} {
		if got := logTicks(c.lo, c.hi); !slices.Equal(got, c.want) {
			t.Errorf("logTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	var labels []string
	for _, tk := range (oneTwoFive{}).Ticks(0.2, 5) {
		labels = append(labels, tk.Label)
	}
	if want := []string{"0.2", "0.5", "1", "2", "5"}; !slices.Equal(labels, want) {
		t.Errorf("tick labels %q, want %q", labels, want)
	}
}

func TestPlotSeries(t *testing.T) {
	res := sampleResults()
	delete(res.gateway, runKey{replay, 500}) // a line with a missing rate
	got := res.plotSeries(50)
	want := []series{
		{name: "direct", color: palette[0], x: []float64{500, 2000}, y: []float64{1, 1}},
		{name: "gateway", color: palette[1], x: []float64{500, 2000}, y: []float64{1.2, 1.2}},
		{name: "gateway keyed", color: palette[2], x: []float64{500, 2000}, y: []float64{2, 2}},
		{name: "gateway replay", color: palette[3], dash: true, x: []float64{2000}, y: []float64{1}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.name != w.name || g.color != w.color || g.dash != w.dash || !slices.Equal(g.x, w.x) {
			t.Errorf("series %d = %+v, want %+v", i, g, w)
		}
		for j := range w.y {
			if j >= len(g.y) || math.Abs(g.y[j]-w.y[j]) > 0.01*w.y[j] {
				t.Errorf("series %s latencies %v, want %v", w.name, g.y, w.y)
				break
			}
		}
	}
	// The closed loop (rate 0) and the stream runs are not open-loop rates.
	res = newResults()
	res.rates = []int{500}
	res.gateway[runKey{unkeyed, 0}] = constant(time.Millisecond, 10)
	res.gateway[runKey{stream, 500}] = constant(time.Millisecond, 10)
	if got := res.plotSeries(50); len(got) != 0 {
		t.Errorf("series from runs that are not open-loop unkeyed, keyed or replay: %+v", got)
	}
}

func TestPlotDrawsEverySeries(t *testing.T) {
	res := sampleResults()
	for _, r := range res.rates { // apart from direct's line, which it would hide
		res.gateway[runKey{replay, r}] = constant(1500*time.Microsecond, 100)
	}
	b, err := plotPNG(res, "test")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if sz := img.Bounds().Size(); sz.X != plotW || sz.Y != plotH {
		t.Fatalf("size %v, want %dx%d", sz, plotW, plotH)
	}
	seen := map[color.RGBA]int{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, a := img.At(x, y).RGBA()
			seen[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}]++
		}
	}
	white, dark := color.RGBA{255, 255, 255, 255}, 0
	if all := plotW * plotH; seen[white] > all*97/100 || seen[white] < all/2 {
		t.Errorf("%d of %d pixels white: blank or not on a white ground", seen[white], all)
	}
	for c, n := range seen {
		if max(c.R, c.G, c.B) < 96 {
			dark += n
		}
	}
	// Axes, ticks and text, antialiased: few pure black pixels.
	if dark < 2000 {
		t.Errorf("%d dark pixels: no axes or text", dark)
	}
	for i, c := range palette {
		// Two lines and their markers: well over 400 pixels each. (The
		// two legend entries alone are about 150.)
		if seen[c] < 400 {
			t.Errorf("series %d's color %v: %d pixels", i, c, seen[c])
		}
	}
	if _, err := plotPNG(newResults(), "empty"); err == nil {
		t.Error("an empty plot did not fail")
	}
}

func TestVerdictsWithFailedRequestsAreNotMet(t *testing.T) {
	res := sampleResults()
	res.gateway[runKey{replay, 2000}].errs = 3 // replay was met
	for _, v := range res.withErrors(res.verdicts()) {
		if strings.HasPrefix(v.target, "replay") {
			if v.met || !strings.Contains(v.measured, "failed requests") {
				t.Errorf("replay verdict with failed requests: %+v", v)
			}
		} else if strings.HasPrefix(v.target, "overhead p50 <= 0.25 ms at 500/s") && !v.met {
			t.Errorf("a verdict without failures changed: %+v", v)
		}
	}
}
