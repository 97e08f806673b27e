package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter counts the connections a test server accepted, and those
// still open.
type connCounter struct{ n, open atomic.Int32 }

func (c *connCounter) hook(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.n.Add(1)
		c.open.Add(1)
	case http.StateClosed, http.StateHijacked:
		c.open.Add(-1)
	}
}

// newClient is a client as the adapters have it (HTTPClient(nil)), on a
// transport of its own so that tests do not share connections.
func newClient() (*http.Client, *http.Transport) {
	t := newTransport()
	return &http.Client{Transport: t, CheckRedirect: noRedirects}, t
}

// post sends body to u as an adapter does: a POST whose body can be read
// again (GetBody), without an idempotency key.
func post(ctx context.Context, t *testing.T, c *http.Client, u, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header["Content-Type"] = []string{"application/json"}
	req.Header["Authorization"] = []string{"Bearer sk-test"}
	return Send(c, req)
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

// within fails the test unless ch yields within d; it returns what came.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatal(what)
	}
	panic("unreachable")
}

// The request arrives as sent, the answer comes back whole (status, every
// header value, body), and the connection is reused by the next call.
func TestTransportRoundTrip(t *testing.T) {
	var conns connCounter
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat" || r.URL.RawQuery != "a=1" ||
			r.Header.Get("Authorization") != "Bearer sk-test" || r.Header.Get("Content-Type") != "application/json" ||
			r.ContentLength != int64(len(b)) {
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
	c, tr := newClient()
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
		if resp.StatusCode != http.StatusTooManyRequests || string(body) != `echo:{"n":1}` {
			t.Fatalf("call %d: %s %q", i, resp.Status, body)
		}
		if got := resp.Header.Values("X-Multi"); len(got) != 2 || got[0] != "one" || got[1] != "two" {
			t.Errorf("X-Multi = %q", got)
		}
		if RetryAfter(resp.Header, time.Now()) != 250*time.Millisecond || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("headers = %v", resp.Header)
		}
	}
	if n := conns.n.Load(); n != 1 {
		t.Errorf("3 calls in turn opened %d connections, want 1 (reused)", n)
	}
}

// A call blocked on the answer's head returns when its context ends, and
// the upstream sees the connection go.
func TestTransportCancelWhileWaitingForHead(t *testing.T) {
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
	c, tr := newClient()
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
	if err := within(t, errc, 10*time.Second, "the call did not return after its context ended"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	within(t, gone, 10*time.Second, "the upstream never saw the connection close")
}

// A body being read is cut when the context ends; that connection is never
// reused, and the next call works on a new one.
func TestTransportCancelWhileReadingBody(t *testing.T) {
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
	c, tr := newClient()
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
	if err := within(t, readErr, 10*time.Second, "a read blocked on the body did not return after the context ended"); err == nil {
		t.Fatal("the body read to a clean end after its context ended")
	}
	resp.Body.Close()
	within(t, gone, 10*time.Second, "the upstream never saw the connection close")

	if body := answer(t, c, srv.URL); body != "second" {
		t.Fatalf("second call: %q", body)
	}
	if n := conns.n.Load(); n != 2 {
		t.Errorf("connections = %d, want 2: the interrupted one must not be reused", n)
	}
}

// A call whose context ends while its connection is still being set up (a
// TLS handshake the server never answers) returns at once, with the
// context's error. The handshake goes on without it, for the next call, and
// is given up at the transport's TLS handshake timeout: the server sees the
// connection close.
func TestTransportCancelWhileConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted, gone := make(chan struct{}), make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		close(accepted)
		io.Copy(io.Discard, c) // reads the ClientHello, answers nothing, until the client closes
		close(gone)
	}()
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	// 10 s in service; here long enough to tell the call's end from it.
	tr.TLSHandshakeTimeout = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := post(ctx, t, c, "https://"+ln.Addr().String()+"/v1/chat/completions", "{}")
		if resp != nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-accepted
	cancel()
	if err := within(t, errc, time.Second, "the call did not return after its context ended"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	within(t, gone, 30*time.Second, "the server never saw the connection close")
}

// newTLSServer starts an HTTPS server offering HTTP/2 and HTTP/1.1, as
// OpenAI's and Anthropic's do, and returns a client that trusts it.
func newTLSServer(t *testing.T, h http.HandlerFunc, conns *connCounter) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	if conns != nil {
		srv.Config.ConnState = conns.hook
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := newTransport()
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return srv, &http.Client{Transport: tr, CheckRedirect: noRedirects}
}

// An upstream that offers HTTP/2 is called with it, its certificate checked
// against the transport's roots: the defaults refuse the test server's.
func TestTransportTLSAndHTTP2(t *testing.T) {
	srv, c := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Proto))
	}, nil)
	if b := answer(t, c, srv.URL); b != "HTTP/2.0" {
		t.Fatalf("protocol %q, want HTTP/2.0", b)
	}
	plain, ptr := newClient()
	defer ptr.CloseIdleConnections()
	if resp, err := post(context.Background(), t, plain, srv.URL, "{}"); err == nil {
		resp.Body.Close()
		t.Fatal("a certificate no root vouches for was accepted")
	}
}

// On HTTP/2 a call whose context ends, waiting for the answer's head or
// reading its body, resets its stream: the upstream sees the call go, and
// the connection carries the next call.
func TestTransportCancelHTTP2(t *testing.T) {
	var conns connCounter
	arrived, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	srv, c := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/next":
			w.Write([]byte("next"))
			return
		case "/body":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: first\n\n"))
			w.(http.Flusher).Flush()
		}
		arrived <- struct{}{}
		<-r.Context().Done()
		gone <- struct{}{}
	}, &conns)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := post(ctx, t, c, srv.URL+"/head", "{}")
		if resp != nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	within(t, arrived, 10*time.Second, "the upstream never got the call")
	cancel()
	if err := within(t, errc, 10*time.Second, "the call did not return after its context ended"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	within(t, gone, 10*time.Second, "waiting for the head: the upstream never saw the call end")

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	resp, err := post(ctx, t, c, srv.URL+"/body", "{}")
	if err != nil {
		t.Fatal(err)
	}
	within(t, arrived, 10*time.Second, "the upstream never got the call")
	if _, err := io.ReadFull(resp.Body, make([]byte, len("data: first\n\n"))); err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		readErr <- err
	}()
	cancel()
	if err := within(t, readErr, 10*time.Second, "a read blocked on the body did not return after the context ended"); err == nil {
		t.Fatal("the body read to a clean end after its context ended")
	}
	resp.Body.Close()
	within(t, gone, 10*time.Second, "reading the body: the upstream never saw the call end")

	if b := answer(t, c, srv.URL+"/next"); b != "next" {
		t.Fatalf("next call: %q", b)
	}
	if n := conns.n.Load(); n != 1 {
		t.Errorf("connections = %d, want 1: HTTP/2 resets the stream, not the connection", n)
	}
}

// A call the upstream read and dropped without an answer, on a reused
// connection, reaches it once: the call fails, and is not sent again.
func TestTransportNeverResends(t *testing.T) {
	var calls atomic.Int32
	u, accepted := scriptedServer(t, func(c net.Conn, _ *http.Request) {
		if calls.Add(1) == 1 {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			return
		}
		c.Close() // read, no answer
	})
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	if b := answer(t, c, u); b != "ok" {
		t.Fatalf("first call: %q", b)
	}
	resp, err := post(context.Background(), t, c, u, "{}")
	if err == nil {
		resp.Body.Close()
		t.Fatal("a dropped connection answered")
	}
	if n, a := calls.Load(), accepted.Load(); n != 2 || a != 1 {
		t.Fatalf("the upstream got %d requests on %d connections, want 2 on 1 (the second call once)", n, a)
	}
}

// A call carrying an idempotency key, which would make net/http resend it
// on a reused connection that dropped it, still reaches the upstream once:
// Send takes the key fields off, and the upstream never sees them.
func TestSendNeverResendsKeyedCall(t *testing.T) {
	var calls atomic.Int32
	var keyed atomic.Bool
	u, _ := scriptedServer(t, func(c net.Conn, req *http.Request) {
		if req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != "" {
			keyed.Store(true)
		}
		if calls.Add(1) == 1 {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			return
		}
		c.Close() // read, no answer
	})
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	if b := answer(t, c, u); b != "ok" {
		t.Fatalf("first call: %q", b)
	}
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header["Idempotency-Key"] = []string{"k1"}
	req.Header["X-Idempotency-Key"] = []string{"k1"}
	if resp, err := Send(c, req); err == nil {
		resp.Body.Close()
		t.Fatal("a dropped connection answered")
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the upstream got %d requests, want 2 (the keyed call once)", n)
	}
	if keyed.Load() {
		t.Error("the upstream received an idempotency key field")
	}
}

// A connection the server closed while it was idle is not used for the
// next call (which would fail, not being resent).
func TestTransportSkipsConnectionClosedWhileIdle(t *testing.T) {
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
	c, tr := newClient()
	defer tr.CloseIdleConnections()

	if b := answer(t, c, srv.URL); b != "ok" {
		t.Fatalf("body %q", b)
	}
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
	// The transport's reader of the idle connection sees the close and
	// drops it from the pool; give it time to run on a busy machine.
	time.Sleep(200 * time.Millisecond)
	if b := answer(t, c, srv.URL); b != "ok" {
		t.Fatalf("body %q", b)
	}
	if n := conns.n.Load(); n != 2 {
		t.Errorf("connections = %d, want 2", n)
	}
}

// More calls at once than the idle connections kept per host: the extra
// connections are closed once their calls end, and the next calls in turn
// open none.
func TestTransportBurstOverMaxIdle(t *testing.T) {
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
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	tr.MaxIdleConnsPerHost = 4

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
	for deadline := time.Now().Add(10 * time.Second); conns.open.Load() > 4; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open after the burst, want at most 4", conns.open.Load())
		}
		time.Sleep(time.Millisecond)
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

// No Accept-Encoding is sent: an upstream answers uncompressed, and what it
// sends is what the adapter reads.
func TestTransportAsksForNoCompression(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("accept-encoding=" + r.Header.Get("Accept-Encoding")))
	}))
	defer srv.Close()
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	if b := answer(t, c, srv.URL); b != "accept-encoding=" {
		t.Fatalf("%q, want no Accept-Encoding", b)
	}
}

// An answer's head over maxResponseHead fails the call.
func TestTransportBoundsTheHead(t *testing.T) {
	u, _ := scriptedServer(t, func(c net.Conn, _ *http.Request) {
		c.Write([]byte("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("x", maxResponseHead) + "\r\nContent-Length: 0\r\n\r\n"))
	})
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	if resp, err := post(context.Background(), t, c, u, "{}"); err == nil {
		resp.Body.Close()
		t.Fatal("a head over the bound was accepted")
	}
}

// The transport finds proxies in the environment (HTTP_PROXY, HTTPS_PROXY,
// NO_PROXY), which net/http reads once per process.
func TestTransportProxyFromEnvironment(t *testing.T) {
	if got, want := reflect.ValueOf(newTransport().Proxy).Pointer(), reflect.ValueOf(http.ProxyFromEnvironment).Pointer(); got != want {
		t.Error("the transport does not take its proxy from the environment")
	}
}

// A request body of unknown length is sent whole (chunked).
func TestTransportUnknownLengthBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	defer srv.Close()
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	want := strings.Repeat("x", 100_000)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(bytes.NewBufferString(want)))
	req.ContentLength = -1
	resp, err := Send(c, req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != want {
		t.Fatalf("echoed %d bytes, want %d", len(b), len(want))
	}
}

// The request's path reaches the upstream as the adapter built it: an
// encoded slash, "//" and "./" in a base URL reach the endpoint they name.
func TestTransportPathAsGiven(t *testing.T) {
	got := make(chan string, 1)
	u, _ := scriptedServer(t, func(c net.Conn, req *http.Request) {
		got <- req.RequestURI
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	})
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	for _, p := range []string{
		"/v1/chat/completions",
		"/v1/deployments/a%2Fb/chat/completions",
		"/proxy//v1/chat/completions",
		"/v1/./x/../chat/completions",
		"/v1/chat/completions?api-version=2024-10-21&x=a%2Fb",
	} {
		resp, err := post(context.Background(), t, c, u+p, "{}")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if seen := <-got; seen != p {
			t.Errorf("the upstream saw %q, want %q", seen, p)
		}
	}
}

// scriptedServer serves each request on its connections with script, which
// writes the answer itself; accepted counts the connections.
func scriptedServer(t *testing.T, script func(c net.Conn, req *http.Request)) (u string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					script(c, req)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), accepted
}

const (
	sseHead  = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	sseEvent = "data: {\"choices\":[]}\n\n"
	sseDone  = "data: [DONE]\n\n"
)

// chunk is data as one chunk of a chunked body.
func chunk(data string) string { return chunkSize(data) + "\r\n" + data + "\r\n" }

func chunkSize(data string) string { return strconv.FormatInt(int64(len(data)), 16) }

// readUntilDone reads a streamed answer as an adapter does: up to the
// stream's end marker, not to the body's end, and then closes it.
func readUntilDone(t *testing.T, c *http.Client, u string) {
	t.Helper()
	resp, err := post(context.Background(), t, c, u, "{}")
	if err != nil {
		t.Fatal(err)
	}
	want := sseEvent + sseDone
	got := make([]byte, len(want))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	resp.Body.Close()
}

// A streamed answer read up to its end marker, whose last chunk came in
// with the marker, leaves its connection for the next call: providers
// stream with chunked bodies, and a new connection (a TCP and TLS
// handshake) for every call would cost each call a round trip or two.
func TestTransportReusesStreamedConnection(t *testing.T) {
	u, accepted := scriptedServer(t, func(c net.Conn, _ *http.Request) {
		c.Write([]byte(sseHead + chunk(sseEvent) + chunk(sseDone) + "0\r\n\r\n"))
	})
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	for range 3 {
		readUntilDone(t, c, u)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("3 streamed calls in turn used %d connections, want 1", n)
	}
}

// When the body's last chunk has not come when the adapter closes the
// body, Close does not wait for it: the connection is closed, and the next
// call works on a new one.
func TestTransportCloseDoesNotWaitForStreamEnd(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	u, accepted := scriptedServer(t, func(c net.Conn, _ *http.Request) {
		c.Write([]byte(sseHead + chunk(sseEvent) + chunk(sseDone)))
		<-stop
	})
	c, tr := newClient()
	defer tr.CloseIdleConnections()
	for range 2 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			readUntilDone(t, c, u)
		}()
		within(t, done, 30*time.Second, "Close waits for the body's last chunk")
	}
	if n := accepted.Load(); n != 2 {
		t.Errorf("2 calls whose body's end never came used %d connections, want 2", n)
	}
}

// A chunked body cut off anywhere is io.ErrUnexpectedEOF, so that the
// adapters see a cut stream (llm.ErrStreamCut), not a broken connection;
// malformed framing is an error of its own.
func TestTransportChunkedCutIsUnexpectedEOF(t *testing.T) {
	read := func(tail string) error {
		t.Helper()
		u, _ := scriptedServer(t, func(c net.Conn, _ *http.Request) {
			c.Write([]byte(sseHead + tail))
			c.Close()
		})
		c, tr := newClient()
		defer tr.CloseIdleConnections()
		resp, err := post(context.Background(), t, c, u, "{}")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	for name, tail := range map[string]string{
		"between chunks":           chunk(sseEvent),
		"inside a chunk's data":    chunkSize(sseEvent) + "\r\ndata:",
		"before a chunk's CRLF":    chunkSize(sseEvent) + "\r\n" + sseEvent,
		"inside a chunk-size line": chunk(sseEvent) + "1",
	} {
		if err := read(tail); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v, want io.ErrUnexpectedEOF", name, err)
		}
	}
	if err := read("zz\r\n" + sseEvent + "\r\n"); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("malformed chunk size: %v, want an error that is not a cut", err)
	}
}

// A body given as pieces (NewRequest) reaches the upstream whole, with its
// length, on a connection that is then reused.
func TestTransportSendsPieces(t *testing.T) {
	var conns connCounter
	var got []string
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, strconv.FormatInt(r.ContentLength, 10)+":"+string(b))
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = conns.hook
	srv.Start()
	defer srv.Close()
	c, _ := newClient()
	big := strings.Repeat("x", 1<<20)
	want := `{"a":"` + big + `","b":1}`
	for range 2 {
		req, err := NewRequest(t.Context(), srv.URL, [][]byte{[]byte(`{"a":`), []byte(`"` + big + `"`), []byte(`,"b":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := Send(c, req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	for i, g := range got {
		if g != strconv.Itoa(len(want))+":"+want {
			t.Errorf("call %d: the upstream received %d bytes (%.40q…), want %d", i, len(g), g, len(want))
		}
	}
	if len(got) != 2 || conns.n.Load() != 1 {
		t.Errorf("%d calls on %d connections, want 2 on 1", len(got), conns.n.Load())
	}
}

// writeLog is a connection that records its writes.
type writeLog struct {
	net.Conn
	writes []string
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// bodyConn writes each piece of a body once, as it is, rather than in
// copies of 32 KiB; a body longer than its announced length, or a body of
// another kind, is copied as net.Conn would, never past the length.
func TestBodyConnWritesPiecesWhole(t *testing.T) {
	pieces := [][]byte{[]byte(`{"a":`), bytes.Repeat([]byte("y"), 100<<10), []byte(`}`)}
	total := int64(0)
	for _, p := range pieces {
		total += int64(len(p))
	}
	w := &writeLog{}
	// net.Buffers consumes the list it writes: each reader has its own.
	n, err := bodyConn{w}.ReadFrom(&io.LimitedReader{R: &bodyPieces{b: net.Buffers(slices.Clone(pieces))}, N: total})
	if err != nil || n != total || len(w.writes) != 3 || w.writes[1] != string(pieces[1]) {
		t.Errorf("ReadFrom = %d, %v in %d writes; want %d in 3, one a piece", n, err, len(w.writes), total)
	}
	for name, r := range map[string]io.Reader{
		"pieces over the length": &bodyPieces{b: net.Buffers(slices.Clone(pieces))},
		"another reader":         bytes.NewReader(bytes.Join(pieces, nil)),
	} {
		w := &writeLog{}
		n, err := bodyConn{w}.ReadFrom(&io.LimitedReader{R: r, N: total - 10})
		if err != nil || n != total-10 || strings.Join(w.writes, "") != string(bytes.Join(pieces, nil)[:total-10]) {
			t.Errorf("%s: ReadFrom = %d, %v; want the first %d bytes copied", name, n, err, total-10)
		}
	}
}
