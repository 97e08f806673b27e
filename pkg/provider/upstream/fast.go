//go:build !lambda.norpc

package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// fastTransport is the adapters' http.RoundTripper: each call is made with
// fasthttp's HTTP/1.1 client in the caller's goroutine. net/http's
// Transport hands every call to two goroutines of its connection (one
// writes the request, one reads the answer and waits for its body to be
// read), and on the benchmark's 2-core machine those hand-offs were most of
// what a hop cost: a bare httputil.ReverseProxy spent about 215 µs of CPU a
// request, the same proxy with this client about 90 (issue 11, README).
//
// What net/http gave the adapters, and how it is kept:
//
//   - Cancellation: the request's context ending (the client gone, the
//     first-token timeout, the request's deadline) closes the connection
//     of the call, whether it waits for the answer's head, reads its body
//     or dials, so the call returns at once and the upstream sees the
//     connection go. A connection that was interrupted is never reused.
//   - One call is one attempt: fasthttp never retries it (the body is a
//     stream and RetryIfErr says no); redirects are not followed (the
//     http.Client's CheckRedirect, as before).
//   - Connection reuse: a connection is kept for the next call to the same
//     host when its answer was read to the end, and closed after 90 s idle.
//   - Proxies: a call that HTTP_PROXY, HTTPS_PROXY and NO_PROXY send through
//     a proxy, or whose scheme is not http(s), goes through net/http's
//     Transport instead (fallback), which handles both.
//
// Each connection belongs to a slot: a fasthttp.HostClient of its own,
// which dials through the slot and is used by one call at a time. A call
// takes a free slot of its host (or makes one), so the slot knows the
// connection the call uses and can close it when the call's context ends;
// fasthttp's own pool could not say which of its connections a call got.
type fastTransport struct {
	fallback *http.Transport
	dialer   net.Dialer
	tls      *tls.Config // the fallback's TLS settings, offering only HTTP/1.1 (http1TLS)
	maxIdle  int         // idle connections kept open per host (put)
	// peekAfter: a connection idle at least this long is checked for a
	// close by the server before reuse (dropIfClosed). Servers close idle
	// connections after seconds; under load a connection is idle for
	// microseconds, and the check would be a system call a call.
	peekAfter time.Duration
	// linger: how long a closed body's connection waits, in the
	// background, for the end of a body whose adapter stopped reading at
	// the stream's end marker (fastBody.Close).
	linger time.Duration

	mu   sync.Mutex
	free map[hostKey][]*slot // most recently used last
}

type hostKey struct{ scheme, host string }

// A slot is one connection's worth of client. While a call owns it
// (active), interrupt closes its connection.
type slot struct {
	hc  *fasthttp.HostClient
	key hostKey
	t   *fastTransport

	idleSince time.Time // when it was last given back; only its taker reads it

	mu          sync.Mutex
	ctx         context.Context // the owning call's, for dialing
	conn        net.Conn        // the connection last dialed
	active      bool
	interrupted bool
	gen         uint64 // counts the calls that took the slot: an interrupt is for one of them
}

// errInterrupted ends the body of a call whose context ended.
var errInterrupted = errors.New("upstream: call interrupted")

// defaultTransport is the transport of the adapters' shared client. The
// Lambda bootstrap (built with lambda.norpc) uses net/http's instead:
// transport_lambda.go says why.
func defaultTransport() http.RoundTripper { return newFastTransport(newTransport(), 64) }

// newFastTransport returns a transport that uses fallback for what it does
// not handle itself and keeps at most maxIdle idle connections per host.
func newFastTransport(fallback *http.Transport, maxIdle int) *fastTransport {
	return &fastTransport{
		fallback:  fallback,
		dialer:    net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		tls:       http1TLS(fallback.TLSClientConfig),
		peekAfter: time.Second,
		linger:    250 * time.Millisecond,
		maxIdle:   maxIdle,
		free:      make(map[hostKey][]*slot),
	}
}

// http1TLS is a copy of c (the fallback's TLS settings, or the defaults)
// that offers only HTTP/1.1 in ALPN: fasthttp speaks nothing else, and a
// server offered h2 (OpenAI's and Anthropic's are) would pick it. A copy,
// as net/http changes its own settings when it first uses them.
func http1TLS(c *tls.Config) *tls.Config {
	if c == nil {
		c = &tls.Config{}
	} else {
		c = c.Clone()
	}
	c.NextProtos = []string{"http/1.1"}
	return c
}

// fastReadBuffer bounds an answer's head (status line and headers), which
// fasthttp reads into one buffer.
const fastReadBuffer = 16 << 10

// RoundTrip implements http.RoundTripper.
func (t *fastTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || t.proxied(req) {
		return t.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	s := t.take(req.URL)
	freq := fasthttp.AcquireRequest()
	fresp := fasthttp.AcquireResponse()
	freq.SetRequestURI(req.URL.String())
	freq.Header.SetMethod(req.Method)
	if req.Close {
		freq.SetConnectionClose()
	}
	// An answer without a Content-Type has none (fasthttp would default it).
	fresp.Header.SetNoDefaultContentType(true)
	for k, vs := range req.Header {
		for _, v := range vs {
			freq.Header.Add(k, v)
		}
	}
	if req.Body != nil && req.Body != http.NoBody {
		n := int(req.ContentLength)
		if n == 0 {
			n = -1 // unknown: chunked
		}
		// fasthttp closes the body once written (or when freq is released).
		freq.SetBodyStream(req.Body, n)
	}

	g := s.begin(ctx)
	stop := context.AfterFunc(ctx, func() { s.interrupt(g) })
	if err := s.hc.Do(freq, fresp); err != nil {
		t.finish(s, stop, freq, fresp)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}

	code := fresp.StatusCode()
	h := answerHeader(&fresp.Header)
	cl := int64(fresp.Header.ContentLength())
	switch {
	case code == http.StatusNoContent || code == http.StatusNotModified || code < 200:
		cl = 0 // no body, whatever the head says
	case cl < 0:
		cl = -1 // chunked, or until the connection closes
	}
	status := statusLine(code, fresp.Header.StatusMessage())
	b := &fastBody{t: t, s: s, req: freq, resp: fresp, stop: stop}
	if r := fresp.BodyStream(); r != nil {
		b.r = r
	} else {
		b.r = bytes.NewReader(fresp.Body()) // valid until fresp is released, in Close
	}
	return &http.Response{
		Status:     status,
		StatusCode: code,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          b,
		ContentLength: cl,
		Close:         fresp.ConnectionClose(),
		Request:       req,
	}, nil
}

// answerHeader is the answer's header as net/http's client hands it over:
// keys canonical, Transfer-Encoding taken out, and Connection when it says
// close (net/http keeps any other Connection and Keep-Alive). One string
// holds every key and value, and one array the value slices: a string per
// key, a string per value and a slice per key were most of a call's
// allocations (providers send twenty fields and more).
func answerHeader(rh *fasthttp.ResponseHeader) http.Header {
	n, size := 0, 0
	for k, v := range rh.All() {
		n++
		size += len(k) + len(v)
	}
	type field struct{ keyEnd, valueEnd int }
	var small [32]field
	fields := small[:0]
	var b strings.Builder
	b.Grow(size)
	for k, v := range rh.All() {
		writeCanonicalKey(&b, k)
		keyEnd := b.Len()
		b.Write(v)
		fields = append(fields, field{keyEnd, b.Len()})
	}
	all := b.String()
	h := make(http.Header, n)
	values := make([]string, n)
	start := 0
	for i, f := range fields {
		key, value := all[start:f.keyEnd], all[f.keyEnd:f.valueEnd]
		start = f.valueEnd
		if key == "Transfer-Encoding" {
			continue // net/http takes it out of the header too
		}
		if vs, ok := h[key]; ok {
			h[key] = append(vs, value)
			continue
		}
		values[i] = value
		h[key] = values[i : i+1 : i+1] // a second value for the key copies out
	}
	// net/http takes "close" out as Response.Close, and the field with it.
	if vs, ok := h["Connection"]; ok && hasCloseToken(vs) {
		delete(h, "Connection")
	}
	return h
}

// hasCloseToken reports whether a Connection field's values name "close".
func hasCloseToken(values []string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "close") {
				return true
			}
		}
	}
	return false
}

// writeCanonicalKey writes http.CanonicalHeaderKey(string(k)) to b: a key
// with a byte that cannot be in a field name is written as it is, any other
// with its first letter and every letter after a hyphen upper case, the
// rest lower case.
func writeCanonicalKey(b *strings.Builder, k []byte) {
	for _, c := range k {
		if !tokenByte(c) {
			b.Write(k)
			return
		}
	}
	upper := true
	for _, c := range k {
		switch {
		case upper && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case !upper && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b.WriteByte(c)
		upper = c == '-'
	}
}

// tokenByte reports whether c may be in a header field name (RFC 9110's
// tchar), as net/textproto checks before it canonicalizes a key.
func tokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c < 0x80 && strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// statusLine is the answer's Status as net/http sets it: the code and the
// server's reason phrase, or the standard one when the server sent none.
func statusLine(code int, reason []byte) string {
	if code == http.StatusOK && (len(reason) == 0 || string(reason) == "OK") {
		return "200 OK"
	}
	if len(reason) == 0 {
		return strconv.Itoa(code) + " " + http.StatusText(code)
	}
	return strconv.Itoa(code) + " " + string(reason)
}

// proxied reports whether the environment sends req through a proxy (or
// cannot say, having a malformed proxy setting).
func (t *fastTransport) proxied(req *http.Request) bool {
	if t.fallback.Proxy == nil {
		return false
	}
	p, err := t.fallback.Proxy(req)
	return err != nil || p != nil
}

// take returns a free slot for u's host, or a new one.
func (t *fastTransport) take(u *url.URL) *slot {
	key := hostKey{u.Scheme, u.Host}
	t.mu.Lock()
	if l := t.free[key]; len(l) > 0 {
		s := l[len(l)-1]
		l[len(l)-1] = nil
		t.free[key] = l[:len(l)-1]
		t.mu.Unlock()
		if time.Since(s.idleSince) >= t.peekAfter {
			s.dropIfClosed()
		}
		return s
	}
	t.mu.Unlock()
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	s := &slot{key: key, t: t}
	s.hc = &fasthttp.HostClient{
		Addr:      addr,
		IsTLS:     u.Scheme == "https",
		TLSConfig: t.tls,
		Name:      "buzzgate",
		Dial:      s.dial,
		// One call at a time uses the slot, so it has one connection, but
		// fasthttp counts a connection it closes for idleness a moment after
		// taking it out of its pool: a second one keeps a call that comes in
		// between from failing with ErrNoFreeConns.
		MaxConns:            2,
		MaxIdleConnDuration: 90 * time.Second,
		ReadBufferSize:      fastReadBuffer,
		StreamResponseBody:  true,
		RetryIfErr:          func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		// The path as the adapter built it, as net/http sends it: an
		// encoded slash, "//" or "./" in a base URL reaches the endpoint
		// it names.
		DisablePathNormalizing: true,
	}
	return s
}

// put gives a slot back once its call is over. Slots are kept (as many as
// calls ran at once to the host) and taken most recently used first; past
// the maxIdle most recent, a slot's connection is closed, so at most
// maxIdle idle connections stay open per host.
func (t *fastTransport) put(s *slot) {
	s.idleSince = time.Now()
	t.mu.Lock()
	l := append(t.free[s.key], s)
	t.free[s.key] = l
	var old *slot
	if len(l) > t.maxIdle {
		old = l[len(l)-1-t.maxIdle]
	}
	t.mu.Unlock()
	if old != nil {
		old.hc.CloseIdleConnections() // no call uses it: it is free
	}
}

// CloseIdleConnections closes every connection not in use. The free slots
// are taken out while their connections close, so that no call uses one
// meanwhile.
func (t *fastTransport) CloseIdleConnections() {
	t.mu.Lock()
	free := t.free
	t.free = make(map[hostKey][]*slot)
	t.mu.Unlock()
	for _, l := range free {
		for _, s := range l {
			s.hc.CloseIdleConnections()
		}
	}
	t.mu.Lock()
	for k, l := range free {
		t.free[k] = append(l, t.free[k]...)
	}
	t.mu.Unlock()
	t.fallback.CloseIdleConnections()
}

func (s *slot) dial(addr string) (net.Conn, error) {
	s.mu.Lock()
	ctx := s.ctx // fasthttp dials only inside a call's Do
	s.mu.Unlock()
	c, err := s.t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.conn = c
	dead := s.interrupted
	s.mu.Unlock()
	if dead {
		c.Close()
		return nil, errInterrupted
	}
	return c, nil
}

// dropIfClosed closes the slot's idle connection when the server has
// closed its end (or sent something unasked) while it was idle, so that a
// call is not written to a connection already gone: net/http's Transport
// notices that with its reading goroutine, here a non-blocking peek at the
// socket does, for a connection idle peekAfter or more. A server may still
// close it right after the peek (or within peekAfter of its last answer),
// as with net/http; the call then fails as a connection failure, never
// retried.
func (s *slot) dropIfClosed() {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c != nil && s.hc.ConnsCount() > 0 && idleConnGone(c) {
		s.hc.CloseIdleConnections()
	}
}

// idleConnGone reports whether an idle connection has something to read:
// the peer's close, or bytes nobody asked for. It looks without taking
// anything or waiting (MSG_PEEK, MSG_DONTWAIT); a connection it cannot look
// at counts as open.
func idleConnGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK // nothing to read
		return true                                                // never wait for the socket
	})
	return err != nil || !open
}

// begin marks the slot owned by a call with context ctx, and returns the
// call's number for its interrupt.
func (s *slot) begin(ctx context.Context) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.ctx, s.active, s.interrupted = ctx, true, false
	return s.gen
}

// end marks the call over, so that a late interrupt closes nothing, and
// reports whether it was interrupted: then its connection, closed, must not
// be reused (the caller drops it from the slot's pool).
func (s *slot) end() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	interrupted := s.interrupted
	s.ctx, s.active, s.interrupted = nil, false, false
	return interrupted
}

// interrupt closes the connection of call g if it still owns the slot: a
// read or write blocked on it returns at once. An interrupt may run late
// (context.AfterFunc starts it in a goroutine of its own, and the call may
// be over and the slot taken by the next one): then it does nothing.
func (s *slot) interrupt(g uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active || s.gen != g {
		return
	}
	s.interrupted = true
	if s.conn != nil {
		s.conn.Close()
	}
}

// fastBody is an answer's body. Close ends the call (finish).
type fastBody struct {
	r    io.Reader
	t    *fastTransport
	s    *slot
	req  *fasthttp.Request
	resp *fasthttp.Response
	stop func() bool
	once sync.Once
	eof  bool // a Read returned io.EOF: the body was read to its end
}

// Read reads the body. A chunked body the upstream cut off inside its
// framing (a chunk's size line or its closing CRLF) is io.ErrUnexpectedEOF,
// as from net/http and as when it is cut anywhere else: fasthttp reports
// those cuts as an ErrBrokenChunk, which does not unwrap to the EOF it
// carries, and the adapters would have taken them for a broken connection.
func (b *fastBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil && brokenChunkAtEOF(err):
		err = fmt.Errorf("upstream: chunked body cut off (%v): %w", err, io.ErrUnexpectedEOF)
	}
	return n, err
}

// brokenChunkAtEOF reports whether err is fasthttp's broken-chunk error for
// a body that ended, not for malformed framing or a network error (those
// stay as they are, as net/http keeps them). fasthttp wraps the reader's
// EOF in the broken-chunk error's text without an Unwrap, so the text is
// what says it (TestFastTransportChunkedCutIsUnexpectedEOF pins it).
func brokenChunkAtEOF(err error) bool {
	var bc fasthttp.ErrBrokenChunk
	return errors.As(err, &bc) && strings.HasSuffix(bc.Error(), io.EOF.Error())
}

// Close ends the call. A streamed answer's adapter stops reading at the
// stream's end marker ([DONE], message_stop), which comes before the
// chunked body's last chunk; net/http's Transport keeps such a connection
// when that last chunk has already arrived. Here too: what has arrived is
// read without waiting (drain). When the end has not come yet (it is often
// one more packet behind the marker), a goroutine waits for it up to
// t.linger and only then gives the connection back or closes it: a
// provider's connection reused saves a TCP and TLS handshake, and Close
// never waits on the network. A call whose context ended is not drained:
// its connection is closed, as before.
func (b *fastBody) Close() error {
	b.once.Do(func() {
		if b.eof || !b.stop() {
			// Read to its end, or interrupted (stop found the interrupt
			// already started): nothing to wait for.
			b.t.finish(b.s, b.stop, b.req, b.resp)
			return
		}
		// The interrupt is stopped: the caller's context may end now (it
		// does, as the request ends) without closing the connection.
		if b.drain(time.Unix(1, 0)) || b.t.linger <= 0 {
			b.t.finish(b.s, b.stop, b.req, b.resp)
			return
		}
		go func() {
			b.drain(time.Now().Add(b.t.linger))
			b.t.finish(b.s, b.stop, b.req, b.resp)
		}()
	})
	return nil
}

// maxDrain bounds what Close reads of an answer's unread rest.
const maxDrain = 64 << 10

// drain reads what is left of the body, up to maxDrain bytes, with the
// connection's read deadline at deadline (in the past: only what has
// already arrived), and reports whether it reached the body's end. The
// deadline is cleared after: a connection read to its end is pooled, any
// other is closed by finish.
func (b *fastBody) drain(deadline time.Time) bool {
	b.s.mu.Lock()
	c, live := b.s.conn, b.s.active && !b.s.interrupted
	b.s.mu.Unlock()
	if c == nil || !live || c.SetReadDeadline(deadline) != nil {
		return false
	}
	var buf [512]byte
	for n := 0; n < maxDrain; {
		m, err := b.r.Read(buf[:])
		n += m
		if err == io.EOF {
			b.eof = true
		}
		if err != nil {
			break
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	return b.eof
}

// finish ends a call on slot s, failed or answered: its interrupt is
// stopped (after end, one still running closes nothing; one that ran is
// reported), the answer's body stream closed (its connection pooled only
// when read to the end and not interrupted), fasthttp's objects released
// and the slot given back.
func (t *fastTransport) finish(s *slot, stop func() bool, freq *fasthttp.Request, fresp *fasthttp.Response) {
	stop()
	interrupted := s.end()
	if rc, ok := fresp.BodyStream().(fasthttp.ReadCloserWithError); ok && interrupted {
		rc.CloseWithError(errInterrupted) // the connection is closed, not pooled
	}
	fresp.CloseBodyStream() // pooled if read to the end, else closed
	fasthttp.ReleaseResponse(fresp)
	fasthttp.ReleaseRequest(freq)
	if interrupted {
		// A connection fasthttp pooled (an answer read whole) before the
		// interrupt closed it.
		s.hc.CloseIdleConnections()
	}
	t.put(s)
}
