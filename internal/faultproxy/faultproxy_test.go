package faultproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
)

// echoServer is a raw TCP echo server on loopback; it echoes until the
// client half-closes, then closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T, upstream string) *Proxy {
	t.Helper()
	p, err := New(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c.(*net.TCPConn)
}

// dialAndEcho dials the proxy and echoes msg; the dial itself may fail
// with a reset when the proxy resets the connection at once.
func dialAndEcho(p *Proxy, msg string) error {
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = roundTrip(c, msg)
	return err
}

// roundTrip writes msg and reads its echo.
func roundTrip(c net.Conn, msg string) (string, error) {
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func mustEcho(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	got, err := roundTrip(c, msg)
	if err != nil || got != msg {
		t.Fatalf("echo %q: got %q, %v", msg, got, err)
	}
}

// isReset reports whether err is what a client sees of a reset connection.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestForwardsPlainTCP(t *testing.T) {
	p := newProxy(t, echoServer(t))
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") || p.URL() != "http://"+p.Addr() {
		t.Fatalf("Addr %q URL %q: want loopback", p.Addr(), p.URL())
	}
	c := dial(t, p)
	mustEcho(t, c, "hello")
	// A stream that starts like an HTTP method but is not HTTP: forwarded
	// untouched, no request counted.
	mustEcho(t, c, "HELLO there\nGET / HTTP/1.1\r\n\r\n")
	big := strings.Repeat("0123456789", 100_000) // 1 MB, many reads
	go func() { _, _ = io.WriteString(c, big) }()
	buf := make([]byte, len(big))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != big {
		t.Fatalf("1 MB echo: %v", err)
	}
	// Half close: the upstream sees EOF, answers it by closing, and the
	// client reads EOF.
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Fatalf("after CloseWrite: %q, %v; want a clean EOF", rest, err)
	}
	waitFor(t, "the link to close", func() bool { return p.Stats().Open == 0 })
	st := p.Stats()
	if st.Connections != 1 || st.Requests != 0 || st.Refused != 0 || st.Reset != 0 || st.Dropped != 0 {
		t.Errorf("Stats = %+v, want 1 connection and nothing else", st)
	}
}

func TestLatency(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dial(t, p)
	mustEcho(t, c, "warm")
	const d = 150 * time.Millisecond
	// The upper bounds are checked on the best of a few tries (a loaded
	// machine may stall any one of them); every try counts for the lower
	// bounds, as the best is the shortest.
	for _, tc := range []struct {
		name       string
		up, down   time.Duration
		min, under time.Duration
		tries      int
	}{
		{"to upstream", d, 0, d, 10 * d, 1},
		{"to client", 0, d, d, 10 * d, 1},
		{"both", d, d, 2 * d, 10 * d, 1},
		{"none", 0, 0, 0, d, 5},
	} {
		p.SetLatency(tc.up, tc.down)
		best := time.Duration(math.MaxInt64)
		for range tc.tries {
			start := time.Now()
			mustEcho(t, c, "ping "+tc.name)
			best = min(best, time.Since(start))
		}
		if best < tc.min || best >= tc.under {
			t.Errorf("%s: round trip took %v (best of %d), want in [%v, %v)", tc.name, best, tc.tries, tc.min, tc.under)
		}
	}
	// A delay line, not a per-write sleep: 20 writes in a row take one
	// latency, not twenty.
	p.SetLatency(d, 0)
	var want strings.Builder
	for i := range 20 {
		fmt.Fprintf(&want, "%02d", i)
	}
	best := time.Duration(math.MaxInt64)
	for range 3 {
		start := time.Now()
		for i := range 20 {
			if _, err := fmt.Fprintf(c, "%02d", i); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]byte, 40)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
		if string(buf) != want.String() {
			t.Errorf("order: %q", buf)
		}
	}
	if best < d || best > 5*d {
		t.Errorf("20 writes took %v (best of 3), want about %v", best, d)
	}
}

func TestResetAll(t *testing.T) {
	p := newProxy(t, echoServer(t))
	a, b := dial(t, p), dial(t, p)
	mustEcho(t, a, "a")
	mustEcho(t, b, "b")
	p.ResetAll()
	for _, c := range []net.Conn{a, b} {
		_, err := roundTrip(c, "after")
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			t.Errorf("after ResetAll: %v, want connection reset", err)
		}
	}
	// New connections work.
	mustEcho(t, dial(t, p), "new")
	if st := p.Stats(); st.Reset != 2 || st.Connections != 3 {
		t.Errorf("Stats = %+v, want 2 reset of 3 connections", st)
	}
}

func TestCutAndRestoreTCP(t *testing.T) {
	p := newProxy(t, echoServer(t))
	open := dial(t, p)
	mustEcho(t, open, "before")
	p.Cut()
	if _, err := roundTrip(open, "during"); !isReset(err) {
		t.Errorf("open connection during Cut: %v, want reset", err)
	}
	for i := range 3 {
		// Accepted by the kernel, then reset (the dial may see it already).
		if err := dialAndEcho(p, "during"); !isReset(err) {
			t.Errorf("new connection %d during Cut: %v, want reset", i, err)
		}
	}
	p.Restore()
	mustEcho(t, dial(t, p), "after")
	st := p.Stats()
	if st.Refused != 3 || st.Reset != 1 || st.Connections != 2 {
		t.Errorf("Stats = %+v, want 3 refused, 1 reset, 2 connections", st)
	}
}

func TestUpstreamDown(t *testing.T) {
	addr, err := proc.FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, addr)
	if err := dialAndEcho(p, "x"); !isReset(err) {
		t.Errorf("upstream down: %v, want reset", err)
	}
	if st := p.Stats(); st.Refused != 1 || st.Connections != 0 {
		t.Errorf("Stats = %+v, want 1 refused", st)
	}
}

// httpUpstream is a loopback HTTP server that records every request it
// handled, with its whole body.
type httpUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	conns  atomic.Int64
}

func newHTTPUpstream(t *testing.T) *httpUpstream {
	t.Helper()
	u := &httpUpstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		u.mu.Lock()
		u.bodies = append(u.bodies, r.Header.Get("X-Amz-Target")+":"+string(body))
		u.mu.Unlock()
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // a chunked answer
		}
		fmt.Fprintf(w, "echo %s", body)
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *httpUpstream) handled() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

func httpClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// post sends body to path, chunked when chunked is true; target sets
// X-Amz-Target.
func post(c *http.Client, p *Proxy, path, target, body string, chunked bool) (string, error) {
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = io.MultiReader(strings.NewReader(body)) // unknown length: chunked
	}
	req, err := http.NewRequest(http.MethodPost, p.URL()+path, r)
	if err != nil {
		return "", err
	}
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestCountsRequestsOnKeepAlive(t *testing.T) {
	u := newHTTPUpstream(t)
	p := newProxy(t, u.Listener.Addr().String())
	c := httpClient(t)
	bodies := []struct {
		path, body string
		chunked    bool
	}{
		{"/", "one", false},
		{"/", "", false},
		{"/", strings.Repeat("x", 200_000), false},
		{"/chunked", "four", true},
		{"/", strings.Repeat("y", 100_000), true},
		{"/", "six", false},
	}
	for i, b := range bodies {
		got, err := post(c, p, b.path, "", b.body, b.chunked)
		if err != nil || got != "echo "+b.body {
			t.Fatalf("request %d: %.40q, %v", i, got, err)
		}
	}
	// GETs (no body) too.
	resp, err := c.Get(p.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	st := p.Stats()
	if st.Requests != int64(len(bodies)+1) || st.Connections != 1 || u.conns.Load() != 1 {
		t.Errorf("Stats = %+v (upstream connections %d), want %d requests on 1 connection", st, u.conns.Load(), len(bodies)+1)
	}
}

func TestDropResponses(t *testing.T) {
	u := newHTTPUpstream(t)
	p := newProxy(t, u.Listener.Addr().String())
	c := httpClient(t)
	if _, err := post(c, p, "/", "", "first", false); err != nil {
		t.Fatal(err)
	}
	p.DropResponses(2, nil)
	if st := p.Stats(); st.DropsLeft != 2 {
		t.Errorf("DropsLeft = %d, want 2", st.DropsLeft)
	}
	// On the kept-alive connection, with a Content-Length body, then on a
	// new one with a chunked body: both land, neither answer arrives.
	big := strings.Repeat("z", 300_000)
	for i, req := range []struct {
		body    string
		chunked bool
	}{{big, false}, {"lost-chunked", true}} {
		_, err := post(c, p, "/", "", req.body, req.chunked)
		if err == nil || !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("dropped request %d: %v, want connection reset", i, err)
		}
	}
	got, err := post(c, p, "/", "", "after", false)
	if err != nil || got != "echo after" {
		t.Fatalf("after the drops: %q, %v", got, err)
	}
	want := []string{":first", ":" + big, ":lost-chunked", ":after"}
	if h := u.handled(); strings.Join(h, "|") != strings.Join(want, "|") {
		t.Errorf("upstream handled %d requests, want the dropped ones too, whole (%d)", len(h), len(want))
	}
	st := p.Stats()
	if st.Requests != 4 || st.Dropped != 2 || st.DropsLeft != 0 {
		t.Errorf("Stats = %+v, want 4 requests, 2 dropped, none left", st)
	}
}

func TestDropResponsesMatching(t *testing.T) {
	u := newHTTPUpstream(t)
	p := newProxy(t, u.Listener.Addr().String())
	c := httpClient(t)
	p.DropResponses(1, DynamoDBOp("UpdateItem", "DeleteItem"))
	steps := []struct {
		target string
		lost   bool
	}{
		{"DynamoDB_20120810.PutItem", false},
		{"DynamoDB_20120810.GetItem", false},
		{"", false},
		{"DynamoDB_20120810.UpdateItem", true},
		{"DynamoDB_20120810.UpdateItem", false}, // the budget was 1
		{"DynamoDB_20120810.DeleteItem", false},
	}
	for i, s := range steps {
		_, err := post(c, p, "/", s.target, fmt.Sprint(i), false)
		if lost := err != nil; lost != s.lost {
			t.Errorf("step %d (%s): error %v, want lost = %v", i, s.target, err, s.lost)
		}
	}
	if h := u.handled(); len(h) != len(steps) {
		t.Errorf("upstream handled %d requests, want %d", len(h), len(steps))
	}
	if st := p.Stats(); st.Dropped != 1 || st.Requests != int64(len(steps)) {
		t.Errorf("Stats = %+v", st)
	}
	// n <= 0 stops dropping.
	p.DropResponses(5, nil)
	p.DropResponses(0, nil)
	if _, err := post(c, p, "/", "", "kept", false); err != nil {
		t.Errorf("after DropResponses(0): %v", err)
	}
}

func TestCutAndRestoreHTTP(t *testing.T) {
	u := newHTTPUpstream(t)
	p := newProxy(t, u.Listener.Addr().String())
	c := httpClient(t)
	if _, err := post(c, p, "/", "", "before", false); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	for i := range 3 {
		if _, err := post(c, p, "/", "", "during", false); err == nil {
			t.Errorf("request %d during Cut succeeded", i)
		}
	}
	p.Restore()
	if got, err := post(c, p, "/", "", "after", false); err != nil || got != "echo after" {
		t.Errorf("after Restore: %q, %v", got, err)
	}
	if h := u.handled(); strings.Join(h, ",") != ":before,:after" {
		t.Errorf("upstream handled %q: nothing may reach it while cut", h)
	}
}

// TestRequestWatcherSplits feeds a stream of pipelined requests split at
// every point into two reads, and byte by byte: the heads are found the
// same way each time.
func TestRequestWatcherSplits(t *testing.T) {
	stream := "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
		"GET /b HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: t\r\n\r\n" +
		"PUT /d HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n\r\n\r\n" +
		"DELETE /e HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.DeleteItem\r\n\r\n"
	want := "POST /a,GET /b,POST /c,PUT /d,DELETE /e"
	run := func(parts ...[]byte) string {
		var w requestWatcher
		var got []string
		for _, b := range parts {
			w.feed(b, func(r *http.Request) { got = append(got, r.Method+" "+r.URL.Path) })
		}
		return strings.Join(got, ",")
	}
	for i := range len(stream) + 1 {
		if got := run([]byte(stream[:i]), []byte(stream[i:])); got != want {
			t.Fatalf("split at %d: %q, want %q", i, got, want)
		}
	}
	var bytewise [][]byte
	for i := range len(stream) {
		bytewise = append(bytewise, []byte{stream[i]})
	}
	if got := run(bytewise...); got != want {
		t.Fatalf("byte by byte: %q, want %q", got, want)
	}
	// Not HTTP: nothing is found, even when HTTP follows.
	for _, s := range []string{"\x16\x03\x01 tls", "hello GET / HTTP/1.1\r\n\r\n", "HELLO you\r\nGET / HTTP/1.1\r\n\r\n"} {
		if got := run([]byte(s), []byte(stream)); got != "" {
			t.Errorf("%q: found %q", s, got)
		}
	}
}

// TestConcurrentControls runs clients while the controls change, for the
// race detector; every request either succeeds with its own answer or fails.
func TestConcurrentControls(t *testing.T) {
	u := newHTTPUpstream(t)
	p := newProxy(t, u.Listener.Addr().String())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			c := httpClient(t)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("w%d-%d", w, i)
				got, err := post(c, p, "/", "", body, i%2 == 0)
				if err == nil {
					if got != "echo "+body {
						t.Errorf("got %q for %q", got, body)
					}
					ok.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			switch i % 5 {
			case 0:
				p.SetLatency(time.Millisecond, time.Millisecond)
			case 1:
				p.DropResponses(2, nil)
			case 2:
				p.ResetAll()
			case 3:
				p.Cut()
			case 4:
				p.Restore()
				p.SetLatency(0, 0)
			}
			_ = p.Stats()
			time.Sleep(5 * time.Millisecond)
		}
	})
	// Half a second of chaos at least, and until a request got through
	// (the resets and cuts may beat every client for a while on a loaded
	// machine), for at most 10 s.
	time.Sleep(500 * time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); ok.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	p.Restore()
	if ok.Load() == 0 {
		t.Error("no request succeeded")
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	if st := p.Stats(); st.Open != 0 {
		t.Errorf("after Close: %d open", st.Open)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseEndsConnections(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	mustEcho(t, c, "x")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(c, "y"); err == nil {
		t.Error("a connection survived Close")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("the proxy still listens after Close")
	}
}

func TestNewRejectsBadUpstream(t *testing.T) {
	if _, err := New("no-port"); err == nil {
		t.Error("New(no-port) succeeded")
	}
}

// TestGentleUpstream: in gentle mode a request reaches the upstream whole or
// not at all, and a cut ends the upstream's connection with a clean EOF
// after whole requests, never a reset nor a request cut short.
func TestGentleUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type seen struct {
		whole int
		err   error
	}
	result := make(chan seen, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			result <- seen{err: err}
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		var s seen
		for {
			req, err := http.ReadRequest(r)
			if err != nil {
				s.err = err
				break
			}
			if _, err := io.ReadAll(req.Body); err != nil {
				s.err = err
				break
			}
			s.whole++
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		result <- s
	}()
	p := newProxy(t, ln.Addr().String())
	p.SetGentleUpstream(true)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the whole request: %v %v", resp, err)
	}
	// Half a request, then the cut.
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	time.Sleep(50 * time.Millisecond)
	p.Cut()
	select {
	case s := <-result:
		if s.whole != 1 || s.err != io.EOF {
			t.Errorf("upstream: %d whole requests, ended with %v; want 1 and a clean EOF", s.whole, s.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the upstream's connection was not ended")
	}
}
