package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/buzzgate/buzzgate/internal/benchbody"
)

// The request body size section: sequential requests (one connection per
// kind, one request at a time) with a coding agent's Chat Completions body
// (internal/benchbody: a long conversation with tool calls and tool
// definitions, with escapes and non-ASCII text) of each size in -sizes,
// direct to the mock and through the gateway, unkeyed and keyed. The three
// kinds take turns in batches, so that a change in the machine's speed
// touches them alike.

// sizeBatch is how many requests of one kind go in a row.
const sizeBatch = 5

// defaultSizes are the body sizes measured unless -sizes says otherwise.
var defaultSizes = []int{10 << 10, 200 << 10, 1 << 20}

// sizeRun is one kind of request at one body size.
type sizeRun struct {
	lat      Latencies
	n, errs  int
	firstErr string
	cpu      time.Duration // the measured process's CPU time over its batches
	cpuKnown bool
}

// cpuPerRequest is the CPU time per measured request, 0 when unknown.
func (r *sizeRun) cpuPerRequest() time.Duration {
	if r == nil || !r.cpuKnown || r.n == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.n)
}

// sizeResult is one body size's three runs.
type sizeResult struct {
	size                   int
	direct, unkeyed, keyed sizeRun
}

// sizeKinds are the requests of one size: direct, gateway unkeyed, gateway
// keyed.
type sizeKinds struct {
	direct, unkeyed, keyed *requester
}

// newSizeKinds builds the requests of one body size. The direct request
// carries "stream": true with include_usage, as the gateway's call to the
// mock does, so that the mock does the same work on both paths (it checks
// a non-streaming body with json.Valid, about 3 ms for 1 MB, which the
// gateway's calls never pay).
func newSizeKinds(mockAddr, gwAddr string, size int, prefix string) sizeKinds {
	const streaming = `"stream":true,"stream_options":{"include_usage":true},"max_tokens":128`
	direct := newTargetBody("direct", mockAddr, "/v1", benchbody.Chat(upstreamModel, size, streaming))
	gw := newTargetBody("gateway", gwAddr, "/api/v1", benchbody.Chat(gatewayModel, size, `"max_tokens":128`))
	return sizeKinds{
		direct:  &requester{t: direct, kind: unkeyed},
		unkeyed: &requester{t: gw, kind: unkeyed},
		keyed:   &requester{t: gw, kind: keyed, prefix: prefix},
	}
}

// measureSize runs the three kinds of one size in turns, sizeBatch
// requests at a time, for warmup (unmeasured) and then dur.
func measureSize(ctx context.Context, k sizeKinds, size int, mockPID, gwPID int, warmup, dur time.Duration) *sizeResult {
	res := &sizeResult{size: size}
	conns := []*conn{newConn(k.direct.t.addr), newConn(k.unkeyed.t.addr), newConn(k.keyed.t.addr)}
	for _, c := range conns {
		defer c.close()
	}
	kinds := []struct {
		r   *requester
		run *sizeRun
		pid int
	}{{k.direct, &res.direct, mockPID}, {k.unkeyed, &res.unkeyed, gwPID}, {k.keyed, &res.keyed, gwPID}}
	start := time.Now()
	measureFrom, end := start.Add(warmup), start.Add(warmup+dur)
	i := 0
	for now := start; now.Before(end) && ctx.Err() == nil; now = time.Now() {
		measured := !now.Before(measureFrom)
		for j, kd := range kinds {
			cpu0, cpuErr := cpuTime(kd.pid)
			for range sizeBatch {
				i++
				x := kd.r.do(conns[j], i, time.Now())
				if !measured {
					continue
				}
				kd.run.n++
				if x.err != nil {
					kd.run.errs++
					if kd.run.firstErr == "" {
						kd.run.firstErr = x.err.Error()
					}
					continue
				}
				kd.run.lat.Add(x.ttlb)
			}
			if cpu1, err := cpuTime(kd.pid); measured && err == nil && cpuErr == nil {
				kd.run.cpu += cpu1 - cpu0
				kd.run.cpuKnown = true
			}
		}
	}
	return res
}

// sizeString is a body size as the report writes it: 10 KB, 200 KB, 1 MB
// (KB and MB of 1,024 and 1,048,576 bytes).
func sizeString(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// sizeList parses -sizes: sizes in bytes, or with KB or MB (1,024 and
// 1,048,576 bytes), comma-separated; "none" measures none.
func sizeList(dst *[]int) func(string) error {
	return func(s string) error {
		*dst = []int{}
		if strings.TrimSpace(s) == "none" {
			return nil
		}
		for _, f := range strings.Split(s, ",") {
			f = strings.ToUpper(strings.TrimSpace(f))
			unit := 1
			for suffix, u := range map[string]int{"KB": 1 << 10, "MB": 1 << 20} {
				if v, ok := strings.CutSuffix(f, suffix); ok {
					f, unit = strings.TrimSpace(v), u
				}
			}
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 || n > 4<<20/unit {
				return fmt.Errorf("%q is not a size from 1 byte to 4 MB", f)
			}
			*dst = append(*dst, n*unit)
		}
		return nil
	}
}

var sizeHeader = []string{
	"body", "direct p50", "gateway unkeyed p50", "overhead p50", "keyed p50", "keyed overhead p50",
	"unkeyed p90", "keyed p90", "mock CPU µs/req", "gateway CPU µs/req unkeyed", "keyed", "requests each", "errors d/u/k",
}

// sizeRows are the section's table: per size, the p50s and what the
// gateway adds to them.
func sizeRows(sizes []*sizeResult) [][]string {
	var rows [][]string
	for _, s := range sizes {
		d, u, k := percentiles(&s.direct.lat), percentiles(&s.unkeyed.lat), percentiles(&s.keyed.lat)
		cell := func(ok bool, v string) string {
			if !ok {
				return ""
			}
			return v
		}
		p90 := func(l *Latencies) string { return cell(l.Count() > 0, ms(l.Percentile(90))) }
		cpu := func(r *sizeRun) string {
			c := r.cpuPerRequest()
			return cell(c > 0, fmt.Sprintf("%.0f", float64(c)/float64(time.Microsecond)))
		}
		rows = append(rows, []string{
			sizeString(s.size),
			cell(d.ok, ms(d.p50)),
			cell(u.ok, ms(u.p50)), cell(d.ok && u.ok, signedMS(u.p50-d.p50)),
			cell(k.ok, ms(k.p50)), cell(d.ok && k.ok, signedMS(k.p50-d.p50)),
			p90(&s.unkeyed.lat), p90(&s.keyed.lat),
			cpu(&s.direct), cpu(&s.unkeyed), cpu(&s.keyed),
			fmt.Sprint(min(s.direct.n, s.unkeyed.n, s.keyed.n)),
			fmt.Sprintf("%d/%d/%d", s.direct.errs, s.unkeyed.errs, s.keyed.errs),
		})
	}
	return rows
}

// sizeVerdicts are the targets of a 1 MB body, when it was measured.
func sizeVerdicts(sizes []*sizeResult) []verdict {
	var vs []verdict
	for _, s := range sizes {
		if s.size != 1<<20 {
			continue
		}
		d := percentiles(&s.direct.lat)
		for _, c := range []struct {
			name  string
			run   *sizeRun
			limit time.Duration
		}{{"unkeyed", &s.unkeyed, 2 * time.Millisecond}, {"keyed", &s.keyed, 4 * time.Millisecond}} {
			g := percentiles(&c.run.lat)
			v := verdict{target: fmt.Sprintf("1 MB body, %s: overhead p50 <= %d ms", c.name, c.limit/time.Millisecond), known: d.ok && g.ok}
			if v.known {
				v.measured = signedMS(g.p50-d.p50) + " ms"
				v.met = g.p50-d.p50 <= c.limit
				if s.direct.errs > 0 || c.run.errs > 0 {
					v.met = false
					v.measured += " (runs with failed requests)"
				}
			}
			vs = append(vs, v)
		}
	}
	return vs
}

// sizeErrorNotes lists the first error of every size run that had errors.
func sizeErrorNotes(sizes []*sizeResult) []string {
	var notes []string
	for _, s := range sizes {
		for _, r := range []struct {
			name string
			run  *sizeRun
		}{{"direct", &s.direct}, {"gateway unkeyed", &s.unkeyed}, {"gateway keyed", &s.keyed}} {
			if r.run.errs > 0 {
				notes = append(notes, fmt.Sprintf("%s body %s: %d of %d failed, first: %s", r.name, sizeString(s.size), r.run.errs, r.run.n, r.run.firstErr))
			}
		}
	}
	return notes
}

// sizeSection is the report's section on body sizes.
func sizeSection(sizes []*sizeResult, o options) string {
	var b strings.Builder
	b.WriteString("\n## Request body size\n\n")
	fmt.Fprintf(&b, `Sequential requests, one at a time on one connection per kind, with a coding
agent's Chat Completions body (internal/benchbody: a long conversation of user
and assistant turns with tool calls and results, four tool definitions, text
with escapes and non-ASCII characters) of each size, after %s of warm-up for %s
per size; direct, unkeyed and keyed requests take turns, %d of a kind at a
time. The direct request carries "stream": true with include_usage, as the
gateway's call to the mock does, so that the mock does the same work on both
paths. Keyed: a new Idempotency-Key each time (the body is fingerprinted and
the answer recorded). Times in ms to the answer's last byte; overhead is the
gateway's p50 less the direct p50. CPU µs/req is over the measured batches
(10 ms ticks).

`, o.warmup, o.sizeDuration, sizeBatch)
	right := make([]bool, len(sizeHeader))
	for i := 1; i < len(right)-1; i++ {
		right[i] = true
	}
	b.WriteString(markdownTable(sizeHeader, sizeRows(sizes), right))
	return b.String()
}
