//go:build !lambda.norpc

package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter counts the connections a test server accepted.
type connCounter struct{ n atomic.Int32 }

func (c *connCounter) hook(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		c.n.Add(1)
	}
}

func newFastClient() (*http.Client, *fastTransport) {
	t := newFastTransport(newTransport(), 64)
	return &http.Client{Transport: t, CheckRedirect: noRedirects}, t
}

func post(ctx context.Context, t *testing.T, c *http.Client, u, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header["Content-Type"] = []string{"application/json"}
	req.Header["Authorization"] = []string{"Bearer sk-test"}
	return c.Do(req)
}

// answer posts "{}" to u and returns the answer's body, read whole.
func answer(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := post(context.Background(), t, c, u, "{}")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The request arrives as sent, the answer comes back whole (status, every
// header value, body), and the connection is reused by the next call.
func TestFastTransportRoundTrip(t *testing.T) {
	var conns connCounter
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat" || r.URL.RawQuery != "a=1" ||
			r.Header.Get("Authorization") != "Bearer sk-test" || r.Header.Get("Content-Type") != "application/json" ||
			r.ContentLength != int64(len(b)) || r.UserAgent() != "buzzgate" {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.String(), http.StatusTeapot)
			return
		}
		w.Header().Add("X-Multi", "one")
		w.Header().Add("X-Multi", "two")
		w.Header().Set("Retry-After-Ms", "250")
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(append([]byte("echo:"), b...))
	}))
	srv.Config.ConnState = conns.hook
	srv.Start()
	defer srv.Close()
	c, tr := newFastClient()
	defer tr.CloseIdleConnections()

	for i := range 3 {
		resp, err := post(context.Background(), t, c, srv.URL+"/v1/chat?a=1", `{"n":1}`)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("call %d: body: %v", i, err)
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Status != "429 Too Many Requests" || string(body) != `echo:{"n":1}` {
			t.Fatalf("call %d: %s %q", i, resp.Status, body)
		}
		if got := resp.Header.Values("X-Multi"); len(got) != 2 || got[0] != "one" || got[1] != "two" {
			t.Errorf("X-Multi = %q", got)
		}
		if resp.Header.Get("Retry-After-Ms") != "250" || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("headers = %v", resp.Header)
		}
		if RetryAfter(resp.Header, time.Now()) != 250*time.Millisecond {
			t.Errorf("RetryAfter read from the converted header = %v", RetryAfter(resp.Header, time.Now()))
		}
	}
	if n := conns.n.Load(); n != 1 {
		t.Errorf("3 calls in turn opened %d connections, want 1 (reused)", n)
	}
}

// A call blocked on the answer's head returns when its context ends, and
// the upstream sees the connection go.
func TestFastTransportCancelWhileWaitingForHead(t *testing.T) {
	arrived, gone := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server watches the connection for a close once the body
		// has been read.
		io.ReadAll(r.Body)
		close(arrived)
		<-r.Context().Done() // the server's view of the connection closing
		close(gone)
	}))
	defer srv.Close()
	c, tr := newFastClient()
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := post(ctx, t, c, srv.URL, "{}")
		if resp != nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return after its context ended")
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never saw the connection close")
	}
}

// A body being read is cut when the context ends; that connection is never
// reused, and the next call works on a new one.
func TestFastTransportCancelWhileReadingBody(t *testing.T) {
	var conns connCounter
	var calls atomic.Int32
	gone := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // the server watches for a close once it is read
		if calls.Add(1) > 1 {
			w.Write([]byte("second"))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		gone <- struct{}{}
	}))
	srv.Config.ConnState = conns.hook
	srv.Start()
	defer srv.Close()
	c, tr := newFastClient()
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	resp, err := post(ctx, t, c, srv.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "data: first\n\n" {
		t.Fatalf("first read = %q, %v", buf[:n], err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		readErr <- err
	}()
	cancel()
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("the body read to a clean end after its context ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read blocked on the body did not return after the context ended")
	}
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never saw the connection close")
	}

	if body := answer(t, c, srv.URL); body != "second" {
		t.Fatalf("second call: %q", body)
	}
	if n := conns.n.Load(); n != 2 {
		t.Errorf("connections = %d, want 2: the interrupted one must not be reused", n)
	}
}

// An upstream that reads the request and drops the connection without an
// answer gets the request once: the call fails and is not retried.
func TestFastTransportNeverRetries(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	c, tr := newFastClient()
	defer tr.CloseIdleConnections()

	resp, err := post(context.Background(), t, c, srv.URL, "{}")
	if err == nil {
		resp.Body.Close()
		t.Fatal("a dropped connection answered")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the upstream got the request %d times, want 1", n)
	}
}

// A connection the server closed while it was idle is not used for the
// next call (which would fail), as net/http's Transport would not use it.
func TestFastTransportSkipsConnectionClosedWhileIdle(t *testing.T) {
	var conns connCounter
	var mu sync.Mutex
	var last net.Conn
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		conns.hook(c, s)
		if s == http.StateIdle {
			mu.Lock()
			last = c
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	c, tr := newFastClient()
	defer tr.CloseIdleConnections()
	tr.peekAfter = 0 // the test's connection is idle for milliseconds only

	call := func() {
		t.Helper()
		if b := answer(t, c, srv.URL); b != "ok" {
			t.Fatalf("body %q", b)
		}
	}
	call()
	// The server goes idle on the connection once it has answered; close
	// it from the server's side, as an upstream's idle timeout does.
	var idle net.Conn
	for idle == nil {
		mu.Lock()
		idle = last
		mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	idle.Close()
	// The FIN reaches the client's socket asynchronously: wait until the
	// peek can see it, as an idle connection would have by its next use.
	tr.mu.Lock()
	s := tr.free[hostKey{"http", strings.TrimPrefix(srv.URL, "http://")}][0]
	tr.mu.Unlock()
	for range 1000 {
		s.mu.Lock()
		c := s.conn
		s.mu.Unlock()
		if idleConnGone(c) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	call()
	if n := conns.n.Load(); n != 2 {
		t.Errorf("connections = %d, want 2", n)
	}
}

// A proxied call goes through net/http's Transport, which knows proxies.
func TestFastTransportUsesProxy(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		if r.URL.Host != "upstream.example:8080" {
			http.Error(w, "unexpected target "+r.URL.String(), http.StatusBadGateway)
			return
		}
		w.Write([]byte("via proxy"))
	}))
	defer proxy.Close()
	fallback := newTransport()
	pu, _ := url.Parse(proxy.URL)
	fallback.Proxy = http.ProxyURL(pu)
	tr := newFastTransport(fallback, 64)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: noRedirects}

	if b := answer(t, c, "http://upstream.example:8080/v1"); b != "via proxy" || proxied.Load() != 1 {
		t.Fatalf("body %q, proxied %d", b, proxied.Load())
	}
}

// A request body of unknown length is sent whole (chunked).
func TestFastTransportUnknownLengthBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	defer srv.Close()
	c, tr := newFastClient()
	defer tr.CloseIdleConnections()
	want := strings.Repeat("x", 100_000)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(bytes.NewBufferString(want)))
	req.ContentLength = -1
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != want {
		t.Fatalf("echoed %d bytes, want %d", len(b), len(want))
	}
}

// An https upstream is called through fasthttp too (its User-Agent says
// so), with the fallback Transport's TLS settings: the certificate is
// verified against them.
func TestFastTransportTLS(t *testing.T) {
	// The server offers HTTP/2, as OpenAI's and Anthropic's do: the
	// transport must not let ALPN pick it (fasthttp speaks HTTP/1.1).
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("tls " + r.UserAgent() + " " + r.Proto))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	fallback := newTransport()
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.NextProtos = []string{"h2", "http/1.1"} // what net/http offers
	fallback.TLSClientConfig = cfg
	tr := newFastTransport(fallback, 64)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: noRedirects}
	if b := answer(t, c, srv.URL); b != "tls buzzgate HTTP/1.1" {
		t.Fatalf("body %q", b)
	}

	// Without the test server's root the certificate is refused.
	plain, ptr := newFastClient()
	defer ptr.CloseIdleConnections()
	if resp, err := post(context.Background(), t, plain, srv.URL, "{}"); err == nil {
		resp.Body.Close()
		t.Fatal("a certificate no root vouches for was accepted")
	}
}

// An interrupt that runs late (its call over, the slot taken by the next
// call) must not touch the next call's connection.
func TestFastTransportLateInterrupt(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: x\n\n"))
		w.(http.Flusher).Flush()
		time.Sleep(time.Millisecond)
		w.Write([]byte("data: done\n\n"))
	}))
	defer srv.Close()
	c, tr := newFastClient()
	defer tr.CloseIdleConnections()
	for i := range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := post(ctx, t, c, srv.URL, "{}")
		if err != nil {
			t.Fatal(err)
		}
		io.ReadFull(resp.Body, make([]byte, 9))
		cancel() // its interrupt starts in a goroutine of its own...
		resp.Body.Close()
		// ...and may run while this call has the slot.
		if b := answer(t, c, srv.URL); b != "data: x\n\ndata: done\n\n" {
			t.Fatalf("call %d with a live context: %q", i, b)
		}
	}
}

// rawServer answers every request with reply, byte for byte.
func rawServer(t *testing.T, reply string) string {
	t.Helper()
	u, _ := scriptedServer(t, func(c net.Conn, _ *http.Request) { c.Write([]byte(reply)) })
	return u
}

// The answer is what net/http's Transport would make of the same bytes:
// no Content-Type invented, the reason phrase kept, Transfer-Encoding taken
// out and a Connection that says close turned into Response.Close (other
// Connection and Keep-Alive fields kept), no length for a 204.
func TestFastTransportAnswerAsNetHTTP(t *testing.T) {
	for name, reply := range map[string]string{
		"no content type":   "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi",
		"204":               "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
		"chunked":           "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
		"reason phrase":     "HTTP/1.1 599 Upstream Weird\r\nContent-Length: 0\r\n\r\n",
		"cookies":           "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 0\r\n\r\n",
		"connection close":  "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi",
		"connection tokens": "HTTP/1.1 200 OK\r\nConnection: X-Trace, Close\r\nContent-Length: 2\r\n\r\nhi",
		// As providers send them: lower-case keys, a key given again after
		// others, the connection's own fields, more fields than fit the
		// conversion's first array.
		"provider fields": "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nset-cookie: a=1\r\nCF-RAY: 8f\r\nconnection: keep-alive\r\nKeep-Alive: timeout=5\r\nset-cookie: b=2\r\nx-request-id: req_1\r\nSET-COOKIE: c=3\r\nopenai-processing-ms: 12\r\n" +
			"x-ratelimit-field-0: 0\r\nx-ratelimit-field-1: 1\r\nx-ratelimit-field-2: 2\r\nx-ratelimit-field-3: 3\r\nx-ratelimit-field-4: 4\r\nx-ratelimit-field-5: 5\r\nx-ratelimit-field-6: 6\r\nx-ratelimit-field-7: 7\r\nx-ratelimit-field-8: 8\r\nx-ratelimit-field-9: 9\r\nx-ratelimit-field-10: 10\r\nx-ratelimit-field-11: 11\r\nx-ratelimit-field-12: 12\r\nx-ratelimit-field-13: 13\r\nx-ratelimit-field-14: 14\r\nx-ratelimit-field-15: 15\r\nx-ratelimit-field-16: 16\r\nx-ratelimit-field-17: 17\r\nx-ratelimit-field-18: 18\r\nx-ratelimit-field-19: 19\r\nx-ratelimit-field-20: 20\r\nx-ratelimit-field-21: 21\r\nx-ratelimit-field-22: 22\r\nx-ratelimit-field-23: 23\r\nx-ratelimit-field-24: 24\r\nx-ratelimit-field-25: 25\r\nx-ratelimit-field-26: 26\r\nx-ratelimit-field-27: 27\r\nx-ratelimit-field-28: 28\r\nx-ratelimit-field-29: 29\r\nx-ratelimit-field-30: 30\r\nx-ratelimit-field-31: 31\r\nx-ratelimit-field-32: 32\r\nx-ratelimit-field-33: 33\r\nx-ratelimit-field-34: 34\r\nx-ratelimit-field-35: 35\r\nx-ratelimit-field-36: 36\r\nx-ratelimit-field-37: 37\r\nx-ratelimit-field-38: 38\r\nx-ratelimit-field-39: 39\r\n" +
			"content-length: 2\r\n\r\nhi",
	} {
		u := rawServer(t, reply)
		var got [2]string
		for i, rt := range []http.RoundTripper{newTransport(), newFastTransport(newTransport(), 64)} {
			c := &http.Client{Transport: rt, CheckRedirect: noRedirects}
			resp, err := post(context.Background(), t, c, u, "{}")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			h := resp.Header.Clone()
			h.Del("Date")
			got[i] = fmt.Sprintf("%s cl=%d close=%v body=%q err=%v header=%v", resp.Status, resp.ContentLength, resp.Close, b, err, h)
			c.CloseIdleConnections()
		}
		if got[0] != got[1] {
			t.Errorf("%s:\n net/http %s\n fast     %s", name, got[0], got[1])
		}
	}
}

// More calls at once than maxIdle: every slot is kept for reuse, at most
// maxIdle idle connections stay open, and the next calls open none.
func TestFastTransportBurstOverMaxIdle(t *testing.T) {
	var conns connCounter
	release := make(chan struct{})
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		if r.URL.Path == "/burst" {
			arrived.Done()
			<-release
		}
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = conns.hook
	srv.Start()
	defer srv.Close()
	tr := newFastTransport(newTransport(), 4)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: noRedirects}

	const burst = 12
	arrived.Add(burst)
	var done sync.WaitGroup
	for range burst {
		done.Add(1)
		go func() {
			defer done.Done()
			if b := answer(t, c, srv.URL+"/burst"); b != "ok" {
				t.Errorf("burst call: %q", b)
			}
		}()
	}
	arrived.Wait() // all twelve at once
	close(release)
	done.Wait()

	tr.mu.Lock()
	slots := tr.free[hostKey{"http", strings.TrimPrefix(srv.URL, "http://")}]
	tr.mu.Unlock()
	open := 0
	for _, s := range slots {
		open += s.hc.ConnsCount()
	}
	if len(slots) != burst || open > 4 {
		t.Fatalf("%d free slots with %d connections open, want %d slots and at most 4 open", len(slots), open, burst)
	}
	before := conns.n.Load()
	for range 4 {
		if b := answer(t, c, srv.URL); b != "ok" {
			t.Fatalf("%q", b)
		}
	}
	if n := conns.n.Load(); n != before {
		t.Errorf("calls in turn after the burst opened %d connections, want 0", n-before)
	}
}

// FuzzAnswerHeaderKey: a key is written as http.CanonicalHeaderKey writes it,
// whatever its bytes.
func FuzzAnswerHeaderKey(f *testing.F) {
	for _, k := range []string{"content-type", "X-RATELIMIT-LIMIT", "cf-ray", "a b", "x_y", "-x--y-", "é", "Set-Cookie", "", "1a-2b"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		var b strings.Builder
		writeCanonicalKey(&b, []byte(k))
		if got, want := b.String(), http.CanonicalHeaderKey(k); got != want {
			t.Errorf("key %q: %q, http.CanonicalHeaderKey %q", k, got, want)
		}
	})
}
