package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runKey names one run: a kind of request at a rate (0: the closed loop).
type runKey struct {
	kind kind
	rate int
}

// results are every run of one benchmark.
type results struct {
	direct, gateway map[runKey]*summary
	rates           []int // open-loop rates of unkeyed, keyed and replay requests
	streamRates     []int
	conns           int
	rssResets       bool  // per-run peaks (clear_refs works); else peaks since start
	overallRSSKB    int64 // the gateway's peak RSS over the whole run
	profiled        bool  // the gateway's closed loops (unkeyed, keyed) ran under pprof
	sizes           []*sizeResult
}

func newResults() *results {
	return &results{direct: map[runKey]*summary{}, gateway: map[runKey]*summary{}}
}

// pcts are the three percentiles of the table.
type pcts struct {
	p50, p99, p999 time.Duration
	ok             bool
}

func percentiles(l *Latencies) pcts {
	if l.Count() == 0 {
		return pcts{}
	}
	return pcts{l.Percentile(50), l.Percentile(99), l.Percentile(99.9), true}
}

// metric picks the latency a row shows.
type metric int

const (
	total metric = iota // to the last byte
	first               // to the first byte
)

func (s *summary) lat(m metric) pcts {
	if s == nil {
		return pcts{}
	}
	if m == first {
		return percentiles(&s.ttfb)
	}
	return percentiles(&s.ttlb)
}

// ms formats a duration in milliseconds with microsecond resolution.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }

// signedMS is ms with an explicit sign.
func signedMS(d time.Duration) string { return fmt.Sprintf("%+.3f", float64(d)/1e6) }

func mib(kb int64) string {
	if kb == 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f", float64(kb)/1024)
}

// markdownTable renders a Markdown table with each column padded to one
// width, so that it reads as well on a terminal; the columns right marks are
// right-aligned (and marked so for Markdown), the others left-aligned.
func markdownTable(header []string, rows [][]string, right []bool) string {
	width := make([]int, len(header))
	for c, h := range header {
		width[c] = max(len([]rune(h)), 3)
	}
	for _, r := range rows {
		for c, v := range r {
			width[c] = max(width[c], len([]rune(v)))
		}
	}
	pad := func(v string, c int) string {
		n := width[c] - len([]rune(v))
		if c < len(right) && right[c] {
			return strings.Repeat(" ", n) + v
		}
		return v + strings.Repeat(" ", n)
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for c := range header {
			v := ""
			if c < len(cells) {
				v = cells[c]
			}
			b.WriteString(" " + pad(v, c) + " |")
		}
		b.WriteString("\n")
	}
	line(header)
	b.WriteString("|")
	for c := range header {
		if c < len(right) && right[c] {
			b.WriteString(strings.Repeat("-", width[c]+1) + ":|")
		} else {
			b.WriteString(strings.Repeat("-", width[c]+2) + "|")
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

var mainHeader = []string{
	"requests", "load",
	"direct p50", "p99", "p99.9",
	"gateway p50", "p99", "p99.9",
	"overhead p50", "p99", "p99.9",
	"direct req/s", "gateway req/s", "gateway peak RSS MiB",
	"mock CPU µs/req", "gateway CPU µs/req", "errors d/g",
}

// cpuCell is a run's CPU time per request sent, in µs; empty when unknown.
func cpuCell(s *summary) string {
	c := s.cpuPerRequest()
	if c == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f", float64(c)/float64(time.Microsecond))
}

// mainRows are the rows of the main table: per kind, the open-loop rates
// then the closed loop.
func (res *results) mainRows() [][]string {
	var rows [][]string
	add := func(label string, k kind, m metric, rate int, directFrom kind) {
		key := runKey{k, rate}
		g := res.gateway[key]
		if g == nil {
			return
		}
		d := res.direct[runKey{directFrom, rate}]
		load := fmt.Sprintf("%d/s", rate)
		if rate == 0 {
			load = fmt.Sprintf("closed, %d conns", res.conns)
		}
		dl, gl := d.lat(m), g.lat(m)
		dCells := []string{"", "", ""}
		if dl.ok {
			dCells = []string{ms(dl.p50), ms(dl.p99), ms(dl.p999)}
			if directFrom != k {
				dCells[0] += " (" + directFrom.String() + ")"
			}
		}
		gCells := []string{"", "", ""}
		if gl.ok {
			gCells = []string{ms(gl.p50), ms(gl.p99), ms(gl.p999)}
		}
		oCells := []string{"", "", ""}
		if dl.ok && gl.ok {
			oCells = []string{signedMS(gl.p50 - dl.p50), signedMS(gl.p99 - dl.p99), signedMS(gl.p999 - dl.p999)}
		}
		drps, derrs, dcpu := "", "-", ""
		if d != nil && directFrom == k {
			drps, derrs, dcpu = fmt.Sprintf("%.0f", d.rps), fmt.Sprint(d.errs), cpuCell(d)
		}
		row := []string{label, load}
		row = append(row, dCells...)
		row = append(row, gCells...)
		row = append(row, oCells...)
		row = append(row, drps, fmt.Sprintf("%.0f", g.rps), mib(g.rssKB), dcpu, cpuCell(g), derrs+"/"+fmt.Sprint(g.errs))
		rows = append(rows, row)
	}
	for _, k := range []kind{unkeyed, keyed, replay} {
		label := map[kind]string{unkeyed: "unkeyed", keyed: "keyed (new key)", replay: "replay"}[k]
		// The mock ignores Idempotency-Key: a keyed request or a replay
		// sent directly would be an unkeyed one.
		for _, rate := range append(slices.Clone(res.rates), 0) {
			add(label, k, total, rate, unkeyed)
		}
	}
	for _, rate := range append(slices.Clone(res.streamRates), 0) {
		add("stream, first byte", stream, first, rate, stream)
		add("stream, last byte", stream, total, rate, stream)
	}
	return rows
}

// verdict is one of the performance targets and whether this run meets it.
type verdict struct {
	target, measured string
	met, known       bool
}

// topRate is the rate the targets name (2,000/s), or the highest run.
func topRate(rates []int) int {
	if slices.Contains(rates, 2000) {
		return 2000
	}
	if len(rates) == 0 {
		return 0
	}
	return slices.Max(rates)
}

func (res *results) verdicts() []verdict {
	var vs []verdict
	lat := func(m map[runKey]*summary, k kind, rate int, mt metric) pcts {
		return m[runKey{k, rate}].lat(mt)
	}
	for _, rate := range res.rates {
		if rate < 500 || rate > 2000 {
			continue
		}
		d, g := lat(res.direct, unkeyed, rate, total), lat(res.gateway, unkeyed, rate, total)
		v := verdict{target: fmt.Sprintf("overhead p50 <= 0.25 ms at %d/s", rate), known: d.ok && g.ok}
		if v.known {
			v.measured = signedMS(g.p50-d.p50) + " ms"
			v.met = g.p50-d.p50 <= 250*time.Microsecond
		}
		vs = append(vs, v)
	}
	top := topRate(res.rates)
	{
		d, g := lat(res.direct, unkeyed, top, total), lat(res.gateway, unkeyed, top, total)
		v := verdict{target: fmt.Sprintf("overhead p99 <= 1 ms at %d/s", top), known: d.ok && g.ok}
		if v.known {
			v.measured = signedMS(g.p99-d.p99) + " ms"
			v.met = g.p99-d.p99 <= time.Millisecond
		}
		vs = append(vs, v)
	}
	if g := res.gateway[runKey{unkeyed, 0}]; g != nil {
		vs = append(vs, verdict{
			target:   fmt.Sprintf("closed loop >= 10,000 req/s at %d conns", res.conns),
			measured: fmt.Sprintf("%.0f req/s", g.rps), met: g.rps >= 10000, known: true,
		})
		v := verdict{target: "gateway peak RSS <= 50 MiB under that closed loop", known: g.rssKB > 0}
		if v.known {
			v.measured = mib(g.rssKB) + " MiB"
			if !res.rssResets {
				v.measured += " (peak since start)"
			}
			v.met = g.rssKB <= 50*1024
		}
		vs = append(vs, v)
	}
	{
		u, k := lat(res.gateway, unkeyed, top, total), lat(res.gateway, keyed, top, total)
		v50 := verdict{target: fmt.Sprintf("keyed p50 <= unkeyed p50 + 10 %% at %d/s", top), known: u.ok && k.ok}
		v99 := verdict{target: fmt.Sprintf("keyed p99 <= 2 x unkeyed p99 at %d/s", top), known: u.ok && k.ok}
		if v50.known {
			v50.measured = fmt.Sprintf("%s vs %s ms (%+.0f %%)", ms(k.p50), ms(u.p50), 100*(float64(k.p50)/float64(u.p50)-1))
			v50.met = float64(k.p50) <= 1.10*float64(u.p50)
			v99.measured = fmt.Sprintf("%s vs %s ms (%.2fx)", ms(k.p99), ms(u.p99), float64(k.p99)/float64(u.p99))
			v99.met = k.p99 <= 2*u.p99
		}
		vs = append(vs, v50, v99)
	}
	vs = append(vs, everyRate("replay p50 < unkeyed p50 (gateway), every rate", res.rates, func(rate int) (string, bool, bool) {
		u, r := lat(res.gateway, unkeyed, rate, total), lat(res.gateway, replay, rate, total)
		return fmt.Sprintf("%d/s %s vs %s", rate, ms(r.p50), ms(u.p50)), r.p50 < u.p50, u.ok && r.ok
	}))
	vs = append(vs, everyRate("stream first byte p50 <= direct + 0.3 ms, every rate", res.streamRates, func(rate int) (string, bool, bool) {
		d, g := lat(res.direct, stream, rate, first), lat(res.gateway, stream, rate, first)
		return fmt.Sprintf("%d/s %s", rate, signedMS(g.p50-d.p50)), g.p50-d.p50 <= 300*time.Microsecond, d.ok && g.ok
	}))
	return vs
}

// failed says whether a run a verdict rests on had failed requests.
func (res *results) failed(k kind, rates ...int) bool {
	for _, rate := range rates {
		for _, m := range []map[runKey]*summary{res.direct, res.gateway} {
			if s := m[runKey{k, rate}]; s != nil && s.errs > 0 {
				return true
			}
		}
	}
	return false
}

// withErrors marks the verdicts resting on runs with failed requests as not
// met: their percentiles leave the failures out.
func (res *results) withErrors(vs []verdict) []verdict {
	top := topRate(res.rates)
	for i := range vs {
		v := &vs[i]
		var bad bool
		switch t := v.target; {
		case strings.HasPrefix(t, "overhead"):
			var rate int
			fmt.Sscanf(t[strings.LastIndex(t, " at ")+4:], "%d", &rate)
			bad = res.failed(unkeyed, rate)
		case strings.HasPrefix(t, "closed loop"), strings.HasPrefix(t, "gateway peak RSS"):
			bad = res.failed(unkeyed, 0)
		case strings.HasPrefix(t, "keyed"):
			bad = res.failed(unkeyed, top) || res.failed(keyed, top)
		case strings.HasPrefix(t, "replay"):
			bad = res.failed(unkeyed, res.rates...) || res.failed(replay, res.rates...)
		case strings.HasPrefix(t, "stream"):
			bad = res.failed(stream, res.streamRates...)
		}
		if bad && v.known {
			v.met = false
			v.measured += " (runs with failed requests)"
		}
	}
	return vs
}

func verdictRows(vs []verdict) [][]string {
	var rows [][]string
	for _, v := range vs {
		met := "no"
		switch {
		case !v.known:
			met, v.measured = "not measured", "-"
		case v.met:
			met = "yes"
		}
		rows = append(rows, []string{v.target, v.measured, met})
	}
	return rows
}

// generatorNotes reports the open-loop runs whose pacer fell behind (more
// than 1 % of the requests sent over 1 ms late) or whose requests had to
// wait for a connection (maxOpenConns busy).
func (res *results) generatorNotes() []string {
	var notes []string
	var worst time.Duration
	check := func(target string, k runKey, s *summary) {
		worst = max(worst, s.lagP99)
		if k.rate == 0 || s.n == 0 {
			return
		}
		if frac := float64(s.late) / float64(s.n); frac > 0.01 {
			notes = append(notes, fmt.Sprintf("  - %s %s %d/s: %.1f %% of requests sent over 1 ms late (lag p99 %s ms, max %s ms)",
				target, k.kind, k.rate, 100*frac, ms(s.lagP99), ms(s.lagMax)))
		}
		if s.connWaits > 0 {
			notes = append(notes, fmt.Sprintf("  - %s %s %d/s: %d requests (warm-up included) waited for a connection, all %d busy: the loop was not open for them",
				target, k.kind, k.rate, s.connWaits, s.conns))
		}
	}
	for _, m := range []struct {
		name string
		runs map[runKey]*summary
	}{{"direct", res.direct}, {"gateway", res.gateway}} {
		keys := make([]runKey, 0, len(m.runs))
		for k := range m.runs {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b runKey) int {
			if a.kind != b.kind {
				return int(a.kind) - int(b.kind)
			}
			return a.rate - b.rate
		})
		for _, k := range keys {
			check(m.name, k, m.runs[k])
		}
	}
	head := fmt.Sprintf("Pacer: the worst open-loop run's send lag p99 was %s ms (included in its latencies).", ms(worst))
	if len(notes) == 0 {
		return []string{head + " No run fell behind (over 1 % of requests sent more than 1 ms late, or any waiting for a connection)."}
	}
	return append([]string{head + " Runs that fell behind:"}, notes...)
}

// errorNotes lists the first error of every run that had errors.
func (res *results) errorNotes() []string {
	var notes []string
	for _, m := range []struct {
		name string
		runs map[runKey]*summary
	}{{"direct", res.direct}, {"gateway", res.gateway}} {
		for k, s := range m.runs {
			if s.errs > 0 {
				notes = append(notes, fmt.Sprintf("%s %s rate %d: %d of %d failed, first: %s", m.name, k.kind, k.rate, s.errs, s.n, s.firstErr))
			}
		}
	}
	slices.Sort(notes)
	return notes
}

// header is what the report says about the run.
type header struct {
	label              string
	date               time.Time
	elapsed            time.Duration
	loadStart, loadEnd string
	gatewayBin         string
	gatewayID          string
	built              bool // built from this worktree by the run
	harness            string
	args               []string
	opts               options
	replayKeys         int
}

func intsString(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// report is the whole Markdown report: the header, the main table, the
// targets and the notes.
func report(h header, res *results) string {
	var b strings.Builder
	title := "buzzgate load benchmark"
	if h.label != "" {
		title += ": " + h.label
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	b.WriteString("Written by `make bench-load` (tools/loadbench)")
	if h.opts.out != "" {
		png := filepath.Base(h.opts.out) + ".png"
		fmt.Fprintf(&b, "; the plot of latency against rate is [%s](%s)", png, png)
	}
	b.WriteString(".\n\n")
	bin := h.gatewayBin
	if h.built {
		bin = "./functions/api built by the run"
	}
	flags := "none (defaults)"
	if len(h.args) > 0 {
		flags = "`" + strings.Join(h.args, " ") + "`"
	}
	o := h.opts
	settings := fmt.Sprintf("open loop %s per run after %s warm-up at rates %s/s (streams %s/s); closed loop %s after %s warm-up, %d conns; gateway BUZZGATE_LOG_LEVEL=%s, memory store; mock flush-each=%v, chunk-words=%d (%s); %d keys primed for replays",
		o.duration, o.warmup, intsString(o.rates), intsString(o.streamRates), o.closed, o.warmup, o.conns, o.logLevel, o.flushEach, o.chunkWords, chunkText(o.chunkWords), h.replayKeys)
	if o.sizesOnly {
		settings = fmt.Sprintf("the size section only; gateway BUZZGATE_LOG_LEVEL=%s, memory store", o.logLevel)
	}
	for _, kv := range [][2]string{
		{"date", h.date.UTC().Format("2006-01-02 15:04 MST") + fmt.Sprintf(" (run took %s)", h.elapsed.Round(time.Second))},
		{"machine", fmt.Sprintf("%d CPUs, %s, %s/%s, generator built with %s", runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version())},
		{"load average", fmt.Sprintf("%s at the start, %s at the end (the generator, the gateway and the mock share these CPUs)", h.loadStart, h.loadEnd)},
		{"gateway", fmt.Sprintf("%s: commit %s", bin, h.gatewayID)},
		{"harness", "commit " + h.harness},
		{"flags", flags},
		{"settings", settings},
	} {
		fmt.Fprintf(&b, "- %s: %s\n", kv[0], kv[1])
	}
	var verdicts []verdict
	if !o.sizesOnly {
		b.WriteString(mainSection(res))
		verdicts = res.withErrors(res.verdicts())
	}
	if len(res.sizes) > 0 {
		b.WriteString(sizeSection(res.sizes, o))
		verdicts = append(verdicts, sizeVerdicts(res.sizes)...)
	}
	b.WriteString("\n## Targets\n\n")
	b.WriteString(markdownTable([]string{"target", "measured", "met"}, verdictRows(verdicts), nil))
	b.WriteString("\n")
	var notes []string
	if !o.sizesOnly {
		notes = res.generatorNotes()
	}
	if res.profiled {
		notes = append(notes, fmt.Sprintf("The gateway's unkeyed and keyed closed loops and its largest body size ran while pprof collected CPU and allocation profiles into %s: their figures include the profiler's cost.", o.profile))
	}
	notes = append(notes, res.errorNotes()...)
	notes = append(notes, sizeErrorNotes(res.sizes)...)
	for _, n := range notes {
		if !strings.HasPrefix(n, "  - ") {
			n = "- " + n
		}
		b.WriteString(n + "\n")
	}
	return b.String()
}

// mainSection is the explanation and the table of the rate and
// closed-loop runs.
func mainSection(res *results) string {
	var b strings.Builder
	b.WriteString(`
Three processes on 127.0.0.1: this generator, the mock upstream
(tools/loadbench/mockupstream: a 448-byte chat.completion, or the same text
as SSE chunks, -chunk-words words each, with a usage chunk) and the gateway binary (one
openai provider pointing at the mock). "direct" sends the same request to the
mock; the gateway asks the mock for a stream even for a non-streaming client.
The generator's client is a minimal HTTP/1.1 keep-alive one over TCP (one write
a request, the answer's body discarded; open loop: a connection per request in
flight, from a pool that grows on demand; closed loop: one goroutine per
connection), to take little of the CPUs the three share. First byte: the first
byte of the body; last byte: its end.
Open-loop latencies run from each request's intended send time (start + i/rate),
so stalls are not hidden (no coordinated omission); closed-loop latencies from
the send time. Times in ms; overhead = gateway - direct per percentile. Keyed
requests and replays are compared with the unkeyed direct run (the mock ignores
Idempotency-Key). Peak RSS is the gateway's VmHWM during the run`)
	if res.rssResets {
		b.WriteString(" (reset before each run through /proc/PID/clear_refs)")
	} else {
		b.WriteString(" (clear_refs not allowed here: the peak since the gateway started)")
	}
	fmt.Fprintf(&b, "; over the whole benchmark it was %s MiB.\n", mib(res.overallRSSKB))
	b.WriteString(`CPU µs/req is the process's user and system CPU time over the run (its
warm-up included, from /proc/PID/stat in 10 ms ticks) divided by the requests
sent to it: the mock's in the direct runs, the gateway's through it. It moves
far less with the machine's noise than the latencies do, and it is what caps
the closed loop, where the three processes share the CPUs.

`)
	right := make([]bool, len(mainHeader))
	for i := 2; i < len(right); i++ {
		right[i] = true
	}
	b.WriteString(markdownTable(mainHeader, res.mainRows(), right))
	return b.String()
}

func plotTitle(h header) string {
	t := "buzzgate latency vs rate"
	if h.label != "" {
		t += ": " + h.label
	}
	return t + " (" + h.date.UTC().Format("2006-01-02") + ", gateway " + strings.SplitN(h.gatewayID, " (", 2)[0] + ")"
}

// chunkText says how the mock splits its streamed text.
func chunkText(words int) string {
	switch {
	case words <= 0:
		return "the text in one chunk"
	case words == 1:
		return "a chunk per word"
	}
	return fmt.Sprintf("%d words a chunk", words)
}

// everyRate is a target met when it is met at each rate: check gives a
// rate's figures, whether it is met there, and whether both runs exist (a
// rate without them leaves the target unknown).
func everyRate(target string, rates []int, check func(rate int) (part string, met, ok bool)) verdict {
	v := verdict{target: target, known: len(rates) > 0, met: true}
	var parts []string
	for _, rate := range rates {
		part, met, ok := check(rate)
		if !ok {
			v.known = false
			continue
		}
		parts = append(parts, part)
		v.met = v.met && met
	}
	v.measured = strings.Join(parts, "; ")
	if v.measured != "" {
		v.measured += " ms"
	}
	return v
}
