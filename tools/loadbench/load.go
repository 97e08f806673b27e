package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// kind is what a request is.
type kind int

const (
	unkeyed kind = iota // no Idempotency-Key
	keyed               // a fresh Idempotency-Key every time
	replay              // the key and body of a request already completed
	stream              // "stream": true, no key
)

func (k kind) String() string {
	return [...]string{"unkeyed", "keyed", "replay", "stream"}[k]
}

// maxOpenConns caps an open-loop target's connections: enough for 2,000
// requests a second each taking a second. A request that finds all of them
// busy waits for one, and the report says so.
const maxOpenConns = 2048

// target is where requests go: the mock directly or the gateway.
type target struct {
	name string // "direct" or "gateway"
	addr string // host:port
	// plain and plainStream are the whole unkeyed requests; head and tail
	// the parts of a keyed one before and after its Idempotency-Key line
	// (tail: the blank line and the body).
	plain, plainStream []byte
	head, tail         []byte
	pool               *pool // the open-loop runs' connections
}

// newTarget is the target at addr whose API is under path (such as /v1).
func newTarget(name, addr, path, model string) *target {
	body := fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"user","content":"Write one paragraph about load benchmarks."}],"max_tokens":128}`, model)
	streamBody := fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"user","content":"Write one paragraph about load benchmarks."}],"max_tokens":128,"stream":true,"stream_options":{"include_usage":true}}`, model)
	t := newTargetBody(name, addr, path, body)
	t.plainStream = fmt.Appendf(nil, "POST %s/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
		path, addr, gatewayKey, len(streamBody), streamBody)
	return t
}

// newTargetBody is a target whose unkeyed and keyed requests carry body
// (no streaming request).
func newTargetBody(name, addr, path string, body []byte) *target {
	head := fmt.Appendf(nil, "POST %s/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n",
		path, addr, gatewayKey, len(body))
	t := &target{name: name, addr: addr, head: head, tail: append([]byte("\r\n"), body...), pool: newPool(addr, maxOpenConns)}
	t.plain = append(slices.Clone(t.head), t.tail...)
	return t
}

// requester sends one kind of request to one target.
type requester struct {
	t    *target
	kind kind
	// keyed: a fresh key per request (prefix + counter); the keys of the
	// requests that succeeded are kept in done, for the replays.
	prefix  string
	counter atomic.Int64
	mu      sync.Mutex
	done    []string
	// replay: the keys to replay, in turn.
	keys []string
}

// sample is one request's outcome, its times measured from `from` (the
// intended send time in an open loop, the send time in a closed loop).
type sample struct {
	ttfb, ttlb time.Duration
	err        error
}

// do sends request i on c and reads the answer to its end.
func (r *requester) do(c *conn, i int, from time.Time) sample {
	req := r.t.plain
	var key []byte
	switch r.kind {
	case stream:
		req = r.t.plainStream
	case keyed, replay:
		b := append(c.wbuf[:0], r.t.head...)
		b = append(b, "Idempotency-Key: "...)
		n := len(b)
		if r.kind == keyed {
			b = append(b, r.prefix...)
			b = strconv.AppendInt(b, r.counter.Add(1), 10)
		} else {
			b = append(b, r.keys[i%len(r.keys)]...)
		}
		key = b[n:]
		b = append(b, "\r\n"...)
		b = append(b, r.t.tail...)
		c.wbuf, req = b, b
	}
	resp, err := c.roundTrip(req)
	if err != nil {
		return sample{err: err}
	}
	s := sample{ttfb: resp.first.Sub(from), ttlb: resp.last.Sub(from)}
	switch {
	case resp.status != 200:
		s.err = fmt.Errorf("status %d", resp.status)
	case resp.first.IsZero():
		s.err = errors.New("empty body")
	case r.kind == replay && !resp.replayed:
		s.err = errors.New("a replay not marked Idempotency-Replayed")
	case r.kind != replay && resp.replayed:
		s.err = errors.New("a new request marked Idempotency-Replayed")
	case r.kind == keyed:
		r.mu.Lock()
		r.done = append(r.done, string(key))
		r.mu.Unlock()
	}
	return s
}

// summary is one run of one target.
type summary struct {
	ttfb, ttlb Latencies
	n, errs    int
	firstErr   string
	rps        float64 // successful requests per second measured
	// open loop: how late the pacer sent requests (its own lag, included
	// in the latencies).
	lagP99, lagMax time.Duration
	late           int // sent more than 1 ms late
	conns          int // the target's open-loop connections after the run
	connWaits      int // requests that waited for one (all maxOpenConns busy)
	rssKB          int64
	sent           int           // requests sent, the warm-up's and those past the end too
	cpu            time.Duration // the target's CPU time over the whole run, when known
	cpuKnown       bool
}

// cpuPerRequest is the target's CPU time per request sent, 0 when unknown.
func (s *summary) cpuPerRequest() time.Duration {
	if s == nil || !s.cpuKnown || s.sent == 0 {
		return 0
	}
	return s.cpu / time.Duration(s.sent)
}

func (s *summary) add(x sample) {
	s.n++
	if x.err != nil {
		s.errs++
		if s.firstErr == "" {
			s.firstErr = x.err.Error()
		}
		return
	}
	s.ttfb.Add(x.ttfb)
	s.ttlb.Add(x.ttlb)
}

// openLoop sends r's requests at rate per second for warmup+dur, each at its
// intended time whatever the previous ones are doing, and summarizes those
// due after the warm-up, their latencies measured from the intended times.
func openLoop(ctx context.Context, r *requester, rate int, warmup, dur time.Duration) *summary {
	sched := Schedule{Start: time.Now().Add(5 * time.Millisecond), Rate: rate}
	nWarm, n := sched.Count(warmup), sched.Count(warmup+dur)
	_, waits0 := r.t.pool.stats()
	samples := make([]sample, n)
	lags := make([]time.Duration, n)
	var wg sync.WaitGroup
	func() {
		done := precisePacer()
		defer done()
		for i := range n {
			if ctx.Err() != nil {
				n = i
				return
			}
			at := sched.At(i)
			sleepUntil(at)
			lags[i] = time.Since(at)
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := r.t.pool.get()
				samples[i] = r.do(c, i, at)
				r.t.pool.put(c)
			}()
		}
	}()
	wg.Wait()
	s := &summary{sent: n}
	var lag Latencies
	for i := nWarm; i < n; i++ {
		s.add(samples[i])
		lag.Add(lags[i])
		if lags[i] > time.Millisecond {
			s.late++
		}
	}
	s.lagP99, s.lagMax = lag.Percentile(99), lag.Max()
	var waits int
	s.conns, waits = r.t.pool.stats()
	s.connWaits = waits - waits0
	if n > nWarm {
		s.rps = float64(s.ttlb.Count()) / dur.Seconds()
	}
	return s
}

// closedLoop runs conns connections, each sending r's requests back to back,
// for warmup+dur, and summarizes the requests sent after the warm-up and
// answered before the end; latencies are from the send time.
func closedLoop(ctx context.Context, r *requester, conns int, warmup, dur time.Duration) *summary {
	t0 := time.Now()
	measureFrom, end := t0.Add(warmup), t0.Add(warmup+dur)
	var i atomic.Int64
	parts := make([]summary, conns)
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cn := newConn(r.t.addr)
			defer cn.close()
			for ctx.Err() == nil {
				sent := time.Now()
				if !sent.Before(end) {
					return
				}
				x := r.do(cn, int(i.Add(1)), sent)
				if sent.Before(measureFrom) || time.Now().After(end) {
					continue
				}
				parts[c].add(x)
			}
		}()
	}
	wg.Wait()
	s := &summary{sent: int(i.Load())}
	for c := range parts {
		p := &parts[c]
		s.n += p.n
		s.errs += p.errs
		if s.firstErr == "" {
			s.firstErr = p.firstErr
		}
		s.ttfb.Merge(&p.ttfb)
		s.ttlb.Merge(&p.ttlb)
	}
	s.rps = float64(s.ttlb.Count()) / dur.Seconds()
	return s
}
