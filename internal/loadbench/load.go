package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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

// newTransport is the client transport of both targets, tuned so that the
// client never waits for a connection: keep-alives, a large idle pool, no
// compression, no proxy.
func newTransport(maxConns int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 1024,
		MaxConnsPerHost:     maxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// target is where requests go: the mock directly or the gateway.
type target struct {
	name       string // "direct" or "gateway"
	url        string
	body       []byte // a non-streaming chat completion request
	streamBody []byte
	client     *http.Client // the open-loop runs' client
}

func newTarget(name, baseURL, model string) *target {
	return &target{
		name:       name,
		url:        baseURL + "/chat/completions",
		body:       fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"user","content":"Write one paragraph about load benchmarks."}],"max_tokens":128}`, model),
		streamBody: fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"user","content":"Write one paragraph about load benchmarks."}],"max_tokens":128,"stream":true,"stream_options":{"include_usage":true}}`, model),
		client:     &http.Client{Transport: newTransport(0), Timeout: 30 * time.Second},
	}
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

func (r *requester) do(client *http.Client, i int, from time.Time) sample {
	body := r.t.body
	if r.kind == stream {
		body = r.t.streamBody
	}
	req, err := http.NewRequest(http.MethodPost, r.t.url, bytes.NewReader(body))
	if err != nil {
		return sample{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+gatewayKey)
	var key string
	switch r.kind {
	case keyed:
		key = r.prefix + strconv.FormatInt(r.counter.Add(1), 10)
	case replay:
		key = r.keys[i%len(r.keys)]
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return sample{err: err}
	}
	defer resp.Body.Close()
	var s sample
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	first := true
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 && first {
			s.ttfb = time.Since(from)
			first = false
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return sample{err: err}
		}
	}
	s.ttlb = time.Since(from)
	switch replayed := resp.Header.Get("Idempotency-Replayed") == "true"; {
	case resp.StatusCode != http.StatusOK:
		s.err = fmt.Errorf("status %d", resp.StatusCode)
	case first:
		s.err = errors.New("empty body")
	case r.kind == replay && !replayed:
		s.err = errors.New("a replay not marked Idempotency-Replayed")
	case r.kind != replay && replayed:
		s.err = errors.New("a new request marked Idempotency-Replayed")
	case r.kind == keyed:
		r.mu.Lock()
		r.done = append(r.done, key)
		r.mu.Unlock()
	}
	return s
}

// bufs are the response read buffers, reused so that the generator makes
// little garbage of its own.
var bufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

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
	rssKB          int64
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
				samples[i] = r.do(r.t.client, i, at)
			}()
		}
	}()
	wg.Wait()
	s := &summary{}
	var lag Latencies
	for i := nWarm; i < n; i++ {
		s.add(samples[i])
		lag.Add(lags[i])
		if lags[i] > time.Millisecond {
			s.late++
		}
	}
	s.lagP99, s.lagMax = lag.Percentile(99), lag.Max()
	if n > nWarm {
		s.rps = float64(s.ttlb.Count()) / dur.Seconds()
	}
	return s
}

// closedLoop runs conns connections, each sending r's requests back to back,
// for warmup+dur, and summarizes the requests sent after the warm-up and
// answered before the end; latencies are from the send time.
func closedLoop(ctx context.Context, r *requester, conns int, warmup, dur time.Duration) *summary {
	tr := newTransport(conns)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t0 := time.Now()
	measureFrom, end := t0.Add(warmup), t0.Add(warmup+dur)
	var i atomic.Int64
	parts := make([]summary, conns)
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				sent := time.Now()
				if !sent.Before(end) {
					return
				}
				x := r.do(client, int(i.Add(1)), sent)
				if sent.Before(measureFrom) || time.Now().After(end) {
					continue
				}
				parts[c].add(x)
			}
		}()
	}
	wg.Wait()
	s := &summary{}
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
