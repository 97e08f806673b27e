package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a loopback HTTP server that counts the connections it accepted.
type server struct {
	*httptest.Server
	conns atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *server) addr() string { return strings.TrimPrefix(s.URL, "http://") }

// get is a whole GET request for path.
func get(s *server, path string) []byte {
	return []byte("GET " + path + " HTTP/1.1\r\nHost: " + s.addr() + "\r\n\r\n")
}

// body is the answer's text, long enough to take several reads of a small
// buffer.
var body = strings.Repeat("0123456789abcdef", 300)

func TestRoundTripKeepsTheConnection(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			io.WriteString(w, body)
		case "/chunked":
			// Several flushes: a chunked answer in several chunks.
			for i := 0; i < len(body); i += 1000 {
				io.WriteString(w, body[i:min(i+1000, len(body))])
				w.(http.Flusher).Flush()
			}
		case "/429":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
		case "/chunked429":
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":`)
			w.(http.Flusher).Flush()
			io.WriteString(w, `"slow down"}`)
		case "/replayed":
			w.Header().Set("Idempotency-Replayed", "true")
			io.WriteString(w, "x")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	})
	c := newConn(s.addr())
	defer c.close()
	for _, tc := range []struct {
		path     string
		status   int
		replayed bool
		empty    bool
	}{
		{"/length", 200, false, false},
		{"/chunked", 200, false, false},
		{"/429", 429, false, false},
		{"/length", 200, false, false},
		{"/chunked429", 429, false, false},
		{"/replayed", 200, true, false},
		{"/empty", 204, false, true},
		{"/chunked", 200, false, false},
		{"/length", 200, false, false},
	} {
		sent := time.Now()
		resp, err := c.roundTrip(get(s, tc.path))
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if resp.status != tc.status || resp.replayed != tc.replayed || resp.first.IsZero() != tc.empty {
			t.Errorf("%s: status %d replayed %v first %v, want %d %v empty %v", tc.path, resp.status, resp.replayed, resp.first, tc.status, tc.replayed, tc.empty)
		}
		if resp.last.Before(sent) || (!tc.empty && (resp.first.Before(sent) || resp.last.Before(resp.first))) {
			t.Errorf("%s: times out of order: sent %v, first %v, last %v", tc.path, sent, resp.first, resp.last)
		}
		if c.nc == nil {
			t.Errorf("%s: the connection was closed", tc.path)
		}
	}
	// Every answer was read to its end, so one connection carried them all.
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestConnectionCloseRedials(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	})
	c := newConn(s.addr())
	defer c.close()
	for i, path := range []string{"/", "/close", "/", "/", "/close", "/"} {
		resp, err := c.roundTrip(get(s, path))
		if err != nil || resp.status != 200 {
			t.Fatalf("request %d %s: %v, status %d", i, path, err, resp.status)
		}
		if closed := c.nc == nil; closed != (path == "/close") {
			t.Errorf("request %d %s: connection closed %v", i, path, closed)
		}
	}
	if n := s.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

func TestServerClosingMidBodyIsAnErrorThenRedials(t *testing.T) {
	var n atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 2 {
			nc, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
			brw.Flush()
			nc.Close()
			return
		}
		io.WriteString(w, "ok")
	})
	c := newConn(s.addr())
	defer c.close()
	if _, err := c.roundTrip(get(s, "/")); err != nil {
		t.Fatal(err)
	}
	resp, err := c.roundTrip(get(s, "/"))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut answer: %v (status %d), want %v", err, resp.status, io.ErrUnexpectedEOF)
	}
	if c.nc != nil {
		t.Error("the broken connection was kept")
	}
	if resp, err := c.roundTrip(get(s, "/")); err != nil || resp.status != 200 {
		t.Fatalf("after the cut: %v, status %d", err, resp.status)
	}
	if got := s.conns.Load(); got != 2 {
		t.Errorf("%d connections, want 2", got)
	}
	if got := n.Load(); got != 3 {
		t.Errorf("%d requests served, want 3 (the cut one is not retried)", got)
	}
}

func TestIdleConnectionClosedByTheServerIsRetried(t *testing.T) {
	var n atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.WriteString(w, "ok")
	})
	c := newConn(s.addr())
	defer c.close()
	if _, err := c.roundTrip(get(s, "/")); err != nil {
		t.Fatal(err)
	}
	s.CloseClientConnections()
	time.Sleep(20 * time.Millisecond)
	if resp, err := c.roundTrip(get(s, "/")); err != nil || resp.status != 200 {
		t.Fatalf("on a connection closed while idle: %v, status %d", err, resp.status)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("%d requests served, want 2", got)
	}
}

func TestTTFBOfAFlushedStream(t *testing.T) {
	// The second pause is long, so that a client thread woken late by a
	// loaded machine cannot read both events at once.
	const pause, second = 60 * time.Millisecond, 500 * time.Millisecond
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		// The head alone, then the first event, then the last.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(pause)
		io.WriteString(w, "data: {\"first\":true}\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(second)
		io.WriteString(w, "data: [DONE]\n\n")
	})
	c := newConn(s.addr())
	defer c.close()
	for range 2 {
		sent := time.Now()
		resp, err := c.roundTrip(get(s, "/"))
		if err != nil {
			t.Fatal(err)
		}
		ttfb, ttlb := resp.first.Sub(sent), resp.last.Sub(sent)
		if resp.first.IsZero() || ttfb < pause || ttlb < pause+second || ttlb-ttfb < second/2 {
			t.Errorf("ttfb %v, ttlb %v: want the first byte after %v and the last about %v later", ttfb, ttlb, pause, second)
		}
	}
}

// TestParse reads answers from bytes: what is left after each must be the
// next answer.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		status    int
		empty     bool
		keep      bool
		replayed  bool
		err       string
	}{
		{name: "length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", status: 200, keep: true},
		{name: "replayed", raw: "HTTP/1.1 200 OK\r\nIdempotency-Replayed: true\r\nContent-Length: 1\r\n\r\nx", status: 200, keep: true, replayed: true},
		{name: "not replayed", raw: "HTTP/1.1 200 OK\r\nidempotency-replayed: false\r\nContent-Length: 1\r\n\r\nx", status: 200, keep: true},
		{name: "zero length", raw: "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", status: 200, empty: true, keep: true},
		{name: "chunked, extensions and trailers", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n", status: 200, keep: true},
		{name: "1xx first", raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", status: 201, keep: true},
		{name: "connection close", raw: "HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 2\r\n\r\nok", status: 200, keep: false},
		{name: "http/1.0 keep-alive", raw: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", status: 200, keep: true},
		{name: "no length: to the end", raw: "HTTP/1.1 200 OK\r\n\r\nuntil close", status: 200, keep: false},
		{name: "bad status", raw: "HTTP/1.1 2x0 OK\r\n\r\n", err: "malformed status line"},
		{name: "bad chunk", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", err: "bad chunk size"},
		{name: "chunk without CRLF", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n", err: "not followed by CRLF"},
		{name: "cut chunked", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", err: "unexpected EOF"},
		{name: "cut head", raw: "HTTP/1.1 200 OK\r\nContent-Le", err: "unexpected EOF"},
	} {
		const next = "HTTP/1.1 204 No Content\r\n\r\n"
		client, srv := net.Pipe()
		go func() {
			io.Copy(io.Discard, srv)
		}()
		go func() {
			srv.Write([]byte(tc.raw))
			if tc.keep {
				srv.Write([]byte(next))
			}
			srv.Close()
		}()
		c := &conn{nc: client, br: bufio.NewReaderSize(client, 32)}
		resp, keep, _, err := c.exchange([]byte("GET / HTTP/1.1\r\n\r\n"))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case resp.status != tc.status || keep != tc.keep || resp.first.IsZero() != tc.empty || resp.replayed != tc.replayed:
			t.Errorf("%s: status %d keep %v empty %v replayed %v, want %d %v %v %v", tc.name, resp.status, keep, resp.first.IsZero(), resp.replayed, tc.status, tc.keep, tc.empty, tc.replayed)
		case keep:
			resp, keep, _, err := c.exchange([]byte("GET / HTTP/1.1\r\n\r\n"))
			if err != nil || resp.status != 204 || !keep {
				t.Errorf("%s: the next answer: %v, status %d", tc.name, err, resp.status)
			}
		}
		client.Close()
	}
}

// TestRequester sends each kind of request as the benchmark does and checks
// what the server received and what the requester made of the answers.
func TestRequester(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" ||
			r.Header.Get("Authorization") != "Bearer "+gatewayKey || r.Header.Get("Content-Type") != "application/json" ||
			r.ContentLength != int64(len(b)) || !strings.HasPrefix(string(b), `{"model":"m"`) {
			t.Errorf("unexpected request %s %s %v %q", r.Method, r.URL, r.Header, b)
		}
		if key := r.Header.Get("Idempotency-Key"); key != "" {
			mu.Lock()
			seen[key]++
			replay := seen[key] > 1
			mu.Unlock()
			if replay {
				w.Header().Set("Idempotency-Replayed", "true")
			}
		}
		if strings.Contains(string(b), `"stream":true`) {
			io.WriteString(w, "data: x\n\n")
			w.(http.Flusher).Flush()
			io.WriteString(w, "data: [DONE]\n\n")
			return
		}
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "fail-") {
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{}}`)
			return
		}
		io.WriteString(w, `{"id":"x"}`)
	})
	tg := newTarget("test", s.addr(), "/v1", "m")
	defer tg.pool.close()
	c := newConn(tg.addr)
	defer c.close()

	un := &requester{t: tg, kind: unkeyed}
	st := &requester{t: tg, kind: stream}
	for i := range 3 {
		for _, r := range []*requester{un, st} {
			if x := r.do(c, i, time.Now()); x.err != nil || x.ttfb <= 0 || x.ttlb < x.ttfb {
				t.Errorf("%s: %+v", r.kind, x)
			}
		}
	}
	k := &requester{t: tg, kind: keyed, prefix: "run-"}
	for i := range 4 {
		if x := k.do(c, i, time.Now()); x.err != nil {
			t.Errorf("keyed %d: %v", i, x.err)
		}
	}
	if got := strings.Join(k.done, ","); got != "run-1,run-2,run-3,run-4" {
		t.Errorf("keys done %q", got)
	}
	failing := &requester{t: tg, kind: keyed, prefix: "fail-"}
	if x := failing.do(c, 0, time.Now()); x.err == nil || x.err.Error() != "status 429" || len(failing.done) != 0 {
		t.Errorf("a 429: %v, done %v", x.err, failing.done)
	}
	rp := &requester{t: tg, kind: replay, keys: k.done}
	for i := range 8 {
		if x := rp.do(c, i, time.Now()); x.err != nil {
			t.Errorf("replay %d: %v", i, x.err)
		}
	}
	// A key sent for the first time is not marked: not a replay.
	fresh := &requester{t: tg, kind: replay, keys: []string{"never-sent"}}
	if x := fresh.do(c, 0, time.Now()); x.err == nil || !strings.Contains(x.err.Error(), "not marked") {
		t.Errorf("a first request sent as a replay: %v", x.err)
	}
	// A keyed request answered as a replay is an error.
	again := &requester{t: tg, kind: keyed, prefix: "run-"}
	if x := again.do(c, 0, time.Now()); x.err == nil || !strings.Contains(x.err.Error(), "new request marked") {
		t.Errorf("a new key answered as a replay: %v", x.err)
	}
	// run-1 to run-4 once as keyed requests, twice each as replays, and
	// run-1 once more by again.
	want := map[string]int{"run-1": 4, "run-2": 3, "run-3": 3, "run-4": 3, "fail-1": 1, "never-sent": 1}
	for key, n := range seen {
		if n != want[key] {
			t.Errorf("key %s seen %d times, want %d", key, n, want[key])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("keys seen %v, want %v", seen, want)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestPoolGrowsToItsCapThenWaits(t *testing.T) {
	p := newPool("127.0.0.1:1", 2)
	a, b := p.get(), p.get()
	if a == b {
		t.Fatal("two requests in flight share a connection")
	}
	got := make(chan *conn)
	go func() { got <- p.get() }()
	select {
	case <-got:
		t.Fatal("a third connection past the cap of 2")
	case <-time.After(20 * time.Millisecond):
	}
	// The third get may not have reached the pool yet on a loaded machine:
	// put b back only once it waits, or it would take b without waiting.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, waits := p.stats(); waits == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the third get never waited")
		}
	}
	p.put(b)
	if c := <-got; c != b {
		t.Error("the waiting request did not get the connection put back")
	}
	p.put(a)
	if c := p.get(); c != a {
		t.Error("an idle connection was not reused")
	}
	if conns, waits := p.stats(); conns != 2 || waits != 1 {
		t.Errorf("%d connections, %d waits; want 2, 1", conns, waits)
	}
}

// TestOpenAndClosedLoops runs both loops against a server: every request
// answered, the closed loop on exactly its connections.
func TestOpenAndClosedLoops(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"id":"x"}`)
	})
	tg := newTarget("test", s.addr(), "/v1", "m")
	defer tg.pool.close()
	sum := openLoop(t.Context(), &requester{t: tg, kind: unkeyed}, 200, 50*time.Millisecond, 200*time.Millisecond)
	if sum.errs != 0 || sum.n != 40 || sum.ttlb.Count() != 40 || sum.connWaits != 0 || sum.conns < 1 {
		t.Errorf("open loop: %d requests, %d errors (%s), %d measured, %d conns, %d waits", sum.n, sum.errs, sum.firstErr, sum.ttlb.Count(), sum.conns, sum.connWaits)
	}
	before := s.conns.Load()
	sum = closedLoop(t.Context(), &requester{t: tg, kind: stream}, 3, 50*time.Millisecond, 200*time.Millisecond)
	if sum.errs != 0 || sum.n == 0 || sum.rps <= 0 {
		t.Errorf("closed loop: %d requests, %d errors (%s)", sum.n, sum.errs, sum.firstErr)
	}
	if n := s.conns.Load() - before; n != 3 {
		t.Errorf("closed loop of 3: %d connections", n)
	}
}
