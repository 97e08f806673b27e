//go:build !lambda.norpc

package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scriptedServer serves each request on its connections with script, which
// writes the answer itself; accepted counts the connections.
func scriptedServer(t *testing.T, script func(c net.Conn, req *http.Request)) (u string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The cleanup closes the connections too: the clients' idle ones end
	// with them, rather than outlive the test.
	var conns struct {
		sync.Mutex
		closed bool
		all    []net.Conn
	}
	t.Cleanup(func() {
		ln.Close()
		conns.Lock()
		defer conns.Unlock()
		conns.closed = true
		for _, c := range conns.all {
			c.Close()
		}
	})
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conns.Lock()
			if conns.closed {
				c.Close()
			}
			conns.all = append(conns.all, c)
			conns.Unlock()
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
// with the marker, leaves its connection for the next call, as net/http's
// Transport does: providers stream with chunked bodies, and a new
// connection (with its TLS handshake) for every call was what the fasthttp
// transport did before.
func TestFastTransportReusesStreamedConnection(t *testing.T) {
	u, accepted := scriptedServer(t, func(c net.Conn, _ *http.Request) {
		c.Write([]byte(sseHead + chunk(sseEvent) + chunk(sseDone) + "0\r\n\r\n"))
	})
	for name, rt := range map[string]http.RoundTripper{"net/http": newTransport(), "fast": newFastTransport(newTransport(), 64)} {
		accepted.Store(0)
		c := &http.Client{Transport: rt, CheckRedirect: noRedirects}
		for range 3 {
			readUntilDone(t, c, u)
		}
		if n := accepted.Load(); n != 1 {
			t.Errorf("%s: 3 streamed calls in turn used %d connections, want 1", name, n)
		}
	}
}

// waitFree waits until tr has a free slot for u's host: a call's slot is
// given back by the goroutine that waits for its body's end.
func waitFree(t *testing.T, tr *fastTransport, u string) {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	key := hostKey{pu.Scheme, pu.Host}
	for deadline := time.Now().Add(30 * time.Second); ; {
		tr.mu.Lock()
		n := len(tr.free[key])
		tr.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the call's slot was never given back")
		}
		time.Sleep(time.Millisecond)
	}
}

// closeReturns runs readUntilDone and fails if its Close does not return
// while the server still holds the body's end back.
func closeReturns(t *testing.T, c *http.Client, u string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		readUntilDone(t, c, u)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waits for the body's last chunk")
	}
}

// When the last chunk comes after Close, Close does not wait for it; the
// connection waits for it in the background, and is reused when it comes
// within the transport's linger.
func TestFastTransportStreamedEndAfterClose(t *testing.T) {
	release := make(chan struct{}, 1)
	u, accepted := scriptedServer(t, func(c net.Conn, _ *http.Request) {
		c.Write([]byte(sseHead + chunk(sseEvent) + chunk(sseDone)))
		<-release
		c.Write([]byte("0\r\n\r\n"))
	})
	tr := newFastTransport(newTransport(), 64)
	tr.linger = time.Minute
	c := &http.Client{Transport: tr, CheckRedirect: noRedirects}
	closeReturns(t, c, u) // the server holds the end back until now
	release <- struct{}{}
	waitFree(t, tr, u)
	release <- struct{}{} // for the second call
	readUntilDone(t, c, u)
	if n := accepted.Load(); n != 1 {
		t.Errorf("the end came after Close, within the linger: 2 calls used %d connections, want 1", n)
	}
}

// When the end does not come within the linger (or with no linger), the
// connection is closed, not reused.
func TestFastTransportStreamedEndNeverComes(t *testing.T) {
	for _, linger := range []time.Duration{0, 20 * time.Millisecond} {
		stop := make(chan struct{})
		u, accepted := scriptedServer(t, func(c net.Conn, _ *http.Request) {
			c.Write([]byte(sseHead + chunk(sseEvent) + chunk(sseDone)))
			<-stop
		})
		tr := newFastTransport(newTransport(), 64)
		tr.linger = linger
		c := &http.Client{Transport: tr, CheckRedirect: noRedirects}
		closeReturns(t, c, u)
		waitFree(t, tr, u)
		closeReturns(t, c, u)
		close(stop)
		if n := accepted.Load(); n != 2 {
			t.Errorf("linger %v: 2 calls whose body's end never came used %d connections, want 2", linger, n)
		}
	}
}

// A chunked body cut off anywhere is io.ErrUnexpectedEOF, as from
// net/http, so that the adapters see a cut stream (llm.ErrStreamCut), not a
// broken connection; malformed framing is an error of its own in both.
func TestFastTransportChunkedCutIsUnexpectedEOF(t *testing.T) {
	for name, tail := range map[string]string{
		"between chunks":           chunk(sseEvent),
		"inside a chunk's data":    chunkSize(sseEvent) + "\r\ndata:",
		"before a chunk's CRLF":    chunkSize(sseEvent) + "\r\n" + sseEvent,
		"inside a chunk-size line": chunk(sseEvent) + "1",
	} {
		u, _ := scriptedServer(t, func(c net.Conn, _ *http.Request) {
			c.Write([]byte(sseHead + tail))
			c.Close()
		})
		for tn, rt := range map[string]http.RoundTripper{"net/http": newTransport(), "fast": newFastTransport(newTransport(), 64)} {
			c := &http.Client{Transport: rt, CheckRedirect: noRedirects}
			resp, err := post(context.Background(), t, c, u, "{}")
			if err != nil {
				t.Fatalf("%s, %s: %v", name, tn, err)
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%s, %s: %v, want io.ErrUnexpectedEOF", name, tn, err)
			}
		}
	}
	u, _ := scriptedServer(t, func(c net.Conn, _ *http.Request) {
		c.Write([]byte(sseHead + "zz\r\n" + sseEvent + "\r\n"))
		c.Close()
	})
	for tn, rt := range map[string]http.RoundTripper{"net/http": newTransport(), "fast": newFastTransport(newTransport(), 64)} {
		c := &http.Client{Transport: rt, CheckRedirect: noRedirects}
		resp, err := post(context.Background(), t, c, u, "{}")
		if err != nil {
			t.Fatalf("malformed, %s: %v", tn, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("malformed chunk size, %s: %v, want an error that is not a cut", tn, err)
		}
	}
}

// The request's path reaches the upstream as the adapter built it, as
// net/http sends it: fasthttp would otherwise decode an encoded slash and
// fold "//" and "./".
func TestFastTransportPathAsGiven(t *testing.T) {
	got := make(chan string, 1)
	u, _ := scriptedServer(t, func(c net.Conn, req *http.Request) {
		got <- req.RequestURI
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	})
	for _, p := range []string{
		"/v1/chat/completions",
		"/v1/deployments/a%2Fb/chat/completions",
		"/proxy//v1/chat/completions",
		"/v1/./x/../chat/completions",
		"/v1/chat/completions?api-version=2024-10-21&x=a%2Fb",
	} {
		for tn, rt := range map[string]http.RoundTripper{"net/http": newTransport(), "fast": newFastTransport(newTransport(), 64)} {
			c := &http.Client{Transport: rt, CheckRedirect: noRedirects}
			resp, err := post(context.Background(), t, c, u+p, "{}")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if seen := <-got; seen != p {
				t.Errorf("%s: the upstream saw %q, want %q", tn, seen, p)
			}
		}
	}
}

// A call whose context ends while its connection is still being set up (a
// TLS handshake the server never answers) returns at once, with the
// context's error, and the server sees the connection close.
func TestFastTransportCancelWhileConnecting(t *testing.T) {
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
	c, tr := newFastClient()
	defer tr.CloseIdleConnections()
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
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not return after its context ended")
	}
	select {
	case <-gone:
	case <-time.After(30 * time.Second):
		t.Fatal("the server never saw the connection close")
	}
}
