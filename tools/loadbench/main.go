package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
)

type options struct {
	gateway, mock       string
	rates, streamRates  []int
	duration, warmup    time.Duration
	closed              time.Duration
	conns               int
	out, profile, label string
	outSet              bool // -out given (else bin/bench-load/load in the repository)
	logLevel            string
	flushEach           bool
	chunkWords          int
	sizes               []int // request body sizes of the size section (empty: none)
	sizeDuration        time.Duration
	sizesOnly           bool
	args                []string
}

func main() {
	// The children are started from this thread with Pdeathsig, which
	// fires when the starting thread ends: keep it for the whole run.
	runtime.LockOSThread()
	// More Ps than CPUs: the pacer's thread, back from nanosleep, finds an
	// idle P at once instead of queueing behind the request goroutines.
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 8))
	var o options
	flag.StringVar(&o.gateway, "gateway", "", "the gateway binary to measure; empty: build ./functions/api into a temp dir")
	flag.StringVar(&o.mock, "mock", "", "the mock upstream binary; empty: build tools/loadbench/mockupstream into a temp dir")
	flag.Func("rates", "open-loop rates per second, comma-separated (default 500,1000,2000)", intList(&o.rates))
	flag.Func("stream-rates", "open-loop rates of streaming requests (default 500,1000,2000)", intList(&o.streamRates))
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "measured length of each open-loop run")
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured warm-up before each run, at the run's own load")
	flag.DurationVar(&o.closed, "closed", 3*time.Second, "measured length of each closed-loop run")
	flag.IntVar(&o.conns, "conns", 64, "connections of the closed loop")
	flag.StringVar(&o.out, "out", defaultOut, "write the report to OUT.md and the plot to OUT.png, OUT relative to the working directory (the default to the repository's root); empty: stdout only")
	flag.StringVar(&o.label, "label", "", "a line saying what was measured, in the report's title")
	flag.StringVar(&o.profile, "profile", "", "a directory: collect cpu.pprof and allocs.pprof from the gateway (BUZZGATE_PPROF_ADDR) during its unkeyed closed loop, keyed-cpu.pprof and keyed-allocs.pprof during its keyed one, size-cpu.pprof and size-allocs.pprof during the largest body size")
	flag.StringVar(&o.logLevel, "log-level", "warn", "the gateway's BUZZGATE_LOG_LEVEL (its log goes to a file in the temp dir)")
	flag.BoolVar(&o.flushEach, "flush-each", false, "the mock flushes after every SSE event (default: once, after the last)")
	flag.IntVar(&o.chunkWords, "chunk-words", 0, "words of text per chunk in the mock's streams (0: the whole text in one chunk; 1: a chunk per word, as a provider streams tokens)")
	flag.Func("sizes", "request body sizes of the sequential size section, comma-separated, in bytes or with KB or MB (default 10KB,200KB,1MB; none: no size section)", sizeList(&o.sizes))
	flag.DurationVar(&o.sizeDuration, "size-duration", 3*time.Second, "measured length of the size section per body size, after -warmup")
	flag.BoolVar(&o.sizesOnly, "sizes-only", false, "run only the size section")
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { o.outSet = o.outSet || f.Name == "out" })
	if len(o.rates) == 0 {
		o.rates = []int{500, 1000, 2000}
	}
	if len(o.streamRates) == 0 {
		o.streamRates = []int{500, 1000, 2000}
	}
	if o.sizes == nil {
		o.sizes = defaultSizes
	}
	if o.sizesOnly && len(o.sizes) == 0 {
		fmt.Fprintln(os.Stderr, "loadbench: -sizes-only with -sizes none measures nothing")
		os.Exit(2)
	}
	o.args = os.Args[1:]
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(1)
	}
}

// defaultOut is where the report goes unless -out says otherwise, under the
// repository's root: bin/ is not tracked. `make bench-load UPDATE=1` writes
// bench/load instead, the figures kept in the repository.
const defaultOut = "bin/bench-load/load"

func intList(dst *[]int) func(string) error {
	return func(s string) error {
		*dst = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return fmt.Errorf("%q is not a positive integer", f)
			}
			*dst = append(*dst, n)
		}
		return nil
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadbench: "+format+"\n", args...)
}

func run(ctx context.Context, o options) error {
	loadStart := loadavg()
	started := time.Now()
	tmp, err := os.MkdirTemp("", "loadbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	root, err := repoRoot()
	if err != nil {
		return err
	}
	if !o.outSet {
		o.out = filepath.Join(root, defaultOut)
	}
	gatewayBin, mockBin := o.gateway, o.mock
	built := gatewayBin == ""
	if gatewayBin == "" {
		logf("building ./functions/api in %s", root)
		if gatewayBin, err = buildBinary(tmp, root, "./functions/api", "buzzgate-api", pprofTags(o.profile)...); err != nil {
			return err
		}
	}
	if mockBin == "" {
		if mockBin, err = buildBinary(tmp, filepath.Join(root, "tools"), "./loadbench/mockupstream", "mockupstream"); err != nil {
			return err
		}
	}
	mock, mockAddr, err := startMock(mockBin, o.flushEach, o.chunkWords)
	if err != nil {
		return err
	}
	defer mock.Stop(stopGrace)
	var pprofAddr string
	if o.profile != "" {
		if pprofAddr, err = proc.FreeAddr(); err != nil {
			return err
		}
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}
	gw, gwAddr, err := startGateway(gatewayOpts{bin: gatewayBin, dir: tmp, mockAddr: mockAddr, logLevel: o.logLevel, pprofAddr: pprofAddr})
	if err != nil {
		return err
	}
	defer gw.Stop(stopGrace)
	logf("mock upstream pid %d on %s, gateway pid %d on %s", mock.PID(), mockAddr, gw.PID(), gwAddr)

	direct := newTarget("direct", mockAddr, "/v1", upstreamModel)
	gateway := newTarget("gateway", gwAddr, "/api/v1", gatewayModel)
	defer direct.pool.close()
	defer gateway.pool.close()
	rss := newRSSMeter(gw.PID())
	gwPID, mockPID := gw.PID(), mock.PID()
	res := newResults()
	res.rates, res.streamRates, res.conns, res.rssResets = o.rates, o.streamRates, o.conns, rss.resets

	alive := func() error {
		select {
		case <-gw.Exited():
			return fmt.Errorf("the gateway exited: %v (log: %s)", gw.Err(), filepath.Join(tmp, "gateway.log"))
		case <-mock.Exited():
			return fmt.Errorf("the mock upstream exited: %v", mock.Err())
		default:
		}
		return ctx.Err()
	}
	// measure runs one open-loop (rate > 0) or closed-loop run.
	measure := func(r *requester, rate int) (*summary, error) {
		if err := alive(); err != nil {
			return nil, err
		}
		gw := r.t == gateway
		if gw {
			_ = rss.reset()
		}
		pid := mockPID
		if gw {
			pid = gwPID
		}
		cpu0, cpuErr := cpuTime(pid)
		var s *summary
		if rate > 0 {
			s = openLoop(ctx, r, rate, o.warmup, o.duration)
		} else {
			s = closedLoop(ctx, r, o.conns, o.warmup, o.closed)
		}
		if gw {
			s.rssKB = rss.peak()
		}
		if cpu1, err := cpuTime(pid); err == nil && cpuErr == nil {
			s.cpu, s.cpuKnown = cpu1-cpu0, true
		}
		load := fmt.Sprintf("%d/s", rate)
		if rate == 0 {
			load = fmt.Sprintf("closed %d", o.conns)
		}
		l := s.ttlb
		logf("%-7s %-7s %-9s p50 %s p99 %s ms, %.0f req/s, %d errors", r.t.name, r.kind, load, ms(l.Percentile(50)), ms(l.Percentile(99)), s.rps, s.errs)
		return s, alive()
	}
	runs := func(k kind, rates []int, withDirect bool, prep func(*requester)) error {
		for _, rate := range append(slices.Clone(rates), 0) {
			if withDirect {
				s, err := measure(&requester{t: direct, kind: k}, rate)
				if err != nil {
					return err
				}
				res.direct[runKey{k, rate}] = s
			}
			r := &requester{t: gateway, kind: k}
			if prep != nil {
				prep(r)
			}
			var profErr <-chan error
			// The closed loops profiled, and their files' prefixes.
			prefix, profiled := map[kind]string{unkeyed: "", keyed: "keyed-"}[k]
			if rate == 0 && profiled && o.profile != "" {
				profErr = fetchProfiles(ctx, pprofAddr, o.profile, prefix, o.warmup+o.closed)
				res.profiled = true
			}
			s, err := measure(r, rate)
			if err != nil {
				return err
			}
			if profErr != nil {
				for range 2 {
					if err := <-profErr; err != nil {
						return fmt.Errorf("profiling the gateway (is BUZZGATE_PPROF_ADDR supported by this binary?): %w", err)
					}
				}
				logf("wrote %s and %s", filepath.Join(o.profile, prefix+"cpu.pprof"), filepath.Join(o.profile, prefix+"allocs.pprof"))
			}
			res.gateway[runKey{k, rate}] = s
		}
		return nil
	}
	var primed []string
	if !o.sizesOnly {
		if err := runs(unkeyed, o.rates, true, nil); err != nil {
			return err
		}
		var keyedRuns []*requester
		if err := runs(keyed, o.rates, false, func(r *requester) {
			r.prefix = fmt.Sprintf("loadbench-%d-%d-", started.UnixNano(), len(keyedRuns))
			keyedRuns = append(keyedRuns, r)
		}); err != nil {
			return err
		}
		for _, r := range keyedRuns {
			primed = append(primed, r.done...)
		}
		if len(primed) == 0 {
			return errors.New("no keyed request succeeded: nothing to replay")
		}
		if err := runs(replay, o.rates, false, func(r *requester) { r.keys = primed }); err != nil {
			return err
		}
		if err := runs(stream, o.streamRates, true, nil); err != nil {
			return err
		}
	}
	// The size section runs last, so that the memory its large bodies
	// leave in the gateway does not count in the runs' peak RSS above.
	for _, size := range o.sizes {
		if err := alive(); err != nil {
			return err
		}
		k := newSizeKinds(mockAddr, gwAddr, size, fmt.Sprintf("loadbench-%d-size-%d-", started.UnixNano(), size))
		var profErr <-chan error
		if o.profile != "" && size == slices.Max(o.sizes) {
			profErr = fetchProfiles(ctx, pprofAddr, o.profile, "size-", o.warmup+o.sizeDuration)
			res.profiled = true
		}
		s := measureSize(ctx, k, size, mockPID, gwPID, o.warmup, o.sizeDuration)
		if profErr != nil {
			for range 2 {
				if err := <-profErr; err != nil {
					return fmt.Errorf("profiling the gateway: %w", err)
				}
			}
			logf("wrote %s and %s", filepath.Join(o.profile, "size-cpu.pprof"), filepath.Join(o.profile, "size-allocs.pprof"))
		}
		d, u, kd := &s.direct.lat, &s.unkeyed.lat, &s.keyed.lat
		logf("body %-7s direct p50 %s, gateway unkeyed p50 %s (%s), keyed p50 %s (%s) ms, %d requests each",
			sizeString(size), ms(d.Percentile(50)), ms(u.Percentile(50)), signedMS(u.Percentile(50)-d.Percentile(50)),
			ms(kd.Percentile(50)), signedMS(kd.Percentile(50)-d.Percentile(50)), min(s.direct.n, s.unkeyed.n, s.keyed.n))
		res.sizes = append(res.sizes, s)
	}
	if err := alive(); err != nil {
		return err
	}
	rss.peak()
	res.overallRSSKB = rss.overall
	if !rss.resets {
		res.overallRSSKB = rss.peak()
	}

	gatewayID := binaryID(gatewayBin)
	if rest, ok := strings.CutPrefix(gatewayID, "no vcs stamp"); ok && built {
		gatewayID = gitCommit(root) + rest
	}
	h := header{
		label: o.label, date: started, elapsed: time.Since(started), loadStart: loadStart, loadEnd: loadavg(),
		gatewayBin: gatewayBin, gatewayID: gatewayID, built: built, harness: gitCommit(root),
		args: o.args, opts: o, replayKeys: len(primed),
	}
	md := report(h, res)
	fmt.Print(md)
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.out+".md", []byte(md), 0o644); err != nil {
		return err
	}
	if o.sizesOnly {
		logf("wrote %s.md in %s", o.out, time.Since(started).Round(time.Second))
		return nil
	}
	png, err := plotPNG(res, plotTitle(h))
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.out+".png", png, 0o644); err != nil {
		return err
	}
	logf("wrote %s.md and %s.png in %s", o.out, o.out, time.Since(started).Round(time.Second))
	return nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// pprofTags: a gateway built to be profiled serves net/http/pprof
// (functions/api/pprof.go); the default build leaves it out, as `make
// build` and the Lambda bootstrap do.
func pprofTags(profileDir string) []string {
	if profileDir == "" {
		return nil
	}
	return []string{"pprof"}
}
