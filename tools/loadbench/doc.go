// Command loadbench is `make bench-load`: the gateway's load benchmark.
// It starts two processes on 127.0.0.1, each on a free port and
// each stopped by its PID at the end (and killed with this process through
// Pdeathsig): the mock upstream (./mockupstream: a fixed 448-byte
// chat.completion, or the same text as SSE) and the gateway binary as the
// local HTTP server (memory store, a config with one openai provider
// pointing at the mock). Then it measures, direct to the mock and through
// the gateway:
//
//   - open-loop latency p50/p99/p99.9 at fixed rates (-rates, default
//     500,1000,2000/s): request i is sent at start + i/rate whatever the
//     previous ones are doing, on a paced thread, and timed from that
//     intended time (no coordinated omission); a run whose pacer fell behind
//     is reported;
//   - closed-loop throughput with -conns (64) connections sending back to
//     back;
//   - the gateway's peak RSS per run (VmHWM, reset through clear_refs);
//   - CPU time per request sent, the mock's (direct) and the gateway's
//     (utime + stime from /proc/PID/stat), steadier than latencies here;
//
// for unkeyed requests, keyed ones (a new Idempotency-Key each), replays
// (the keys and body of completed keyed requests) and streams (time to the
// first and the last byte, -stream-rates). Last, the size section sends
// requests one at a time with a coding agent's Chat Completions body
// (internal/benchbody) of each size in -sizes (10 KB, 200 KB, 1 MB), direct
// and through the gateway, unkeyed and keyed, taking turns, and reports the
// p50 the gateway adds at each size. It prints Markdown tables and
// the performance targets with whether each is met, writes them to OUT.md
// and a plot of p50 and p99 latency against rate to OUT.png (-out, default
// bin/bench-load/load under the repository's root, which git ignores;
// `make bench-load UPDATE=1` writes bench/load, the figures the repository
// keeps).
//
// Flags:
//
//	-gateway BIN    measure this binary instead of building ./functions/api
//	                (built in the product's module, found with
//	                `go list -m`, so that it gets the product's
//	                dependency versions)
//	-mock BIN       the mock upstream binary (default: built)
//	-rates, -stream-rates, -duration 3s, -warmup 500ms, -closed 3s, -conns 64
//	-out PATH       OUT.md and OUT.png (empty: stdout only)
//	-label TEXT     what was measured, in the title
//	-log-level L    the gateway's BUZZGATE_LOG_LEVEL (warn); its log is a file
//	-flush-each     the mock flushes after every SSE event
//	-chunk-words N  words of text per chunk of the mock's streams (0, the
//	                default: the whole text in one chunk; 1: one per word,
//	                as providers stream tokens; the gateway's cost per
//	                request grows with the chunks it reads)
//	-sizes LIST     body sizes of the size section, in bytes or with KB or
//	                MB (default 10KB,200KB,1MB; none: no size section)
//	-size-duration  measured length of the size section per size (3s)
//	-sizes-only     run only the size section (about 15 s)
//	-profile DIR    build the gateway with -tags pprof, set BUZZGATE_PPROF_ADDR
//	                and collect DIR/cpu.pprof and
//	                DIR/allocs.pprof (allocations during the run) from the
//	                gateway during its unkeyed closed loop, and
//	                DIR/keyed-cpu.pprof and DIR/keyed-allocs.pprof during
//	                its keyed one, DIR/size-cpu.pprof and
//	                DIR/size-allocs.pprof during the largest body size (the
//	                three kinds of requests taking turns); look at them with
//	                `go tool pprof -top DIR/cpu.pprof`
//
// Examples:
//
//	make bench-load
//	make bench-load UPDATE=1
//	make bench-load ARGS='-gateway /tmp/buzzgate-api-old -out bin/bench-load/old -label "the previous release"'
//	make bench-load ARGS='-profile /tmp/prof -out ""'
//	make bench-load ARGS='-sizes-only -out ""'
//
// The generator's HTTP client is its own (client.go), so that it takes as
// little as it can of the CPUs it shares with the system under test:
// HTTP/1.1 keep-alive over raw TCP, each request one prebuilt write (a keyed
// one built in a reused buffer), the answer parsed for its status,
// Content-Length or chunking, Connection: close and Idempotency-Replayed, its
// body discarded; the first byte is the first byte of the body, the last
// byte its end. A connection broken or closed by the server is redialed for
// the next request. The open loop takes a connection per request in flight
// from a pool per target that grows on demand (up to 2,048: a run whose
// requests had to wait for one is reported); the closed loop has exactly
// -conns connections, one goroutine each.
//
// The generator, the mock and the gateway share the machine's CPUs, so the
// figures depend on the machine and on whatever else runs: the report
// records the CPU, the load average at the start and the end, and the
// commits.
package main
