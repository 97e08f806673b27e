// Package faultproxy is a TCP proxy for tests that injects the faults a
// network store shows in production: latency, the store being gone, reset
// connections, and, for HTTP/1.1, answers lost after the request landed.
//
// It listens on loopback only (127.0.0.1, a free port) and forwards every
// connection to one upstream address. Every control takes effect at once,
// may be changed at any time and is safe for concurrent use:
//
//	p, err := faultproxy.New("127.0.0.1:8000") // e.g. dynalite's address
//	if err != nil { ... }
//	defer p.Close()
//	client := dynamodb.New(..., endpoint = p.URL())
//
//	p.SetLatency(20*time.Millisecond, 0) // 20 ms more on every request byte
//	p.Cut()                              // the store is gone: every connection is reset
//	p.Restore()                          // and it is back
//	p.ResetAll()                         // reset the connections open now, once
//	p.DropResponses(1, faultproxy.DynamoDBOp("UpdateItem"))
//	                                     // the next UpdateItem lands, its answer is lost
//	st := p.Stats()                      // connections, requests, responses dropped, ...
//
// Bytes are forwarded as they arrive, in both directions, through a delay
// line per direction (each chunk is held for the latency in effect when it
// was read), so the proxy works for any TCP protocol: plain streams, TLS,
// HTTP. On top of that it watches the client's bytes for HTTP/1.1 requests
// (request line, headers, then a Content-Length or chunked body) to count
// them and to drop answers per request; a connection whose first bytes are
// not an HTTP/1.x request line is forwarded untouched and counted as a plain
// stream. The watching never holds bytes back or rewrites them.
//
// Dropping: DropResponses(n, match) marks the next n requests that match
// (nil matches every request). Such a request is forwarded whole, so the
// upstream acts on it (the write lands); when the first byte of the answer
// comes back, the client's connection is reset (TCP RST) and the upstream
// connection closed, so the client sees "connection reset by peer" instead
// of an answer. It assumes a client that does not pipeline requests (Go's
// net/http and the AWS SDKs do not) and that the upstream answers a request
// after reading it (a "100 Continue" interim answer would be dropped
// instead, before the body was forwarded).
//
// Cut: connections accepted while the proxy is cut are reset at once
// (SO_LINGER 0), and the connections open when Cut is called are reset too;
// new connections are not forwarded until Restore. The listener stays open
// (its port cannot be taken by anyone else meanwhile), so a client sees a
// reset, not "connection refused"; both are the same transient network
// error to an HTTP client or an AWS SDK.
package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stats are the proxy's counters since New.
type Stats struct {
	// Connections is the number of client connections forwarded to the
	// upstream (accepted while not cut, upstream dialed).
	Connections int64
	// Open is the number of those connections open now.
	Open int64
	// Refused is the number of client connections reset at once because the
	// proxy was cut, or because the upstream could not be dialed.
	Refused int64
	// Reset is the number of open connections reset by Cut or ResetAll.
	Reset int64
	// Requests is the number of HTTP requests forwarded (counted when the
	// request's headers have been read).
	Requests int64
	// Dropped is the number of HTTP answers dropped (DropResponses).
	Dropped int64
	// DropsLeft is how many requests DropResponses still will drop.
	DropsLeft int64
}

// Proxy is a fault-injecting TCP proxy on loopback. Its methods are safe for
// concurrent use.
type Proxy struct {
	ln       net.Listener
	upstream string

	latencyUp   atomic.Int64 // client -> upstream, nanoseconds
	latencyDown atomic.Int64 // upstream -> client, nanoseconds

	mu        sync.Mutex
	cut       bool
	closed    bool
	links     map[*link]struct{}
	dropsLeft int64
	dropMatch func(*http.Request) bool

	connections, refused, reset, requests, dropped atomic.Int64

	// gentle: resets reach the client side only (SetGentleUpstream).
	gentle atomic.Bool

	wg sync.WaitGroup
}

// New starts a proxy on 127.0.0.1 (a free port) that forwards to upstream
// (host:port). Close stops it.
func New(upstream string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("faultproxy: upstream %q: %w", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{ln: ln, upstream: upstream, links: map[*link]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's address, 127.0.0.1:port: what clients dial instead of
// the upstream.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is "http://" + Addr(), for HTTP clients (an AWS SDK's endpoint).
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Upstream is the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// SetLatency delays every byte by toUpstream on its way from the client to
// the upstream and by toClient on its way back. It applies to bytes read
// from then on, on open connections too; 0 removes it.
func (p *Proxy) SetLatency(toUpstream, toClient time.Duration) {
	p.latencyUp.Store(int64(max(toUpstream, 0)))
	p.latencyDown.Store(int64(max(toClient, 0)))
}

// Cut makes the upstream unreachable: the open connections are reset, and
// every connection accepted until Restore is reset at once.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	links := p.snapshot()
	p.mu.Unlock()
	p.resetLinks(links)
}

// Restore ends a Cut: new connections are forwarded again.
// SetGentleUpstream makes Cut, ResetAll and a reset from the client reach
// the client side only: the upstream's connections are half-closed and
// drained instead of reset. Use it when the upstream is a store stand-in
// that a reset can crash (dynalite), to fault the link as the client sees
// it without faulting the store.
func (p *Proxy) SetGentleUpstream(on bool) { p.gentle.Store(on) }

func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// ResetAll resets (TCP RST to the client, closes the upstream side) every
// connection open now; new connections are forwarded as usual.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	links := p.snapshot()
	p.mu.Unlock()
	p.resetLinks(links)
}

// DropResponses drops the answers of the next n HTTP requests that match
// (match nil: every request): each is forwarded whole, and the client's
// connection is reset when the upstream's answer begins. The request passed
// to match has its method, URL, Host and headers; its Body is empty. A new
// call replaces what is left of the previous one; n <= 0 stops dropping.
func (p *Proxy) DropResponses(n int, match func(r *http.Request) bool) {
	p.mu.Lock()
	p.dropsLeft = int64(max(n, 0))
	p.dropMatch = match
	p.mu.Unlock()
}

// DynamoDBOp matches DynamoDB API requests of the given operations
// (PutItem, UpdateItem, ...), by their X-Amz-Target header
// (DynamoDB_20120810.<Operation>): for DropResponses.
func DynamoDBOp(ops ...string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		target := r.Header.Get("X-Amz-Target")
		_, op, ok := strings.Cut(target, ".")
		if !ok {
			return false
		}
		for _, o := range ops {
			if op == o {
				return true
			}
		}
		return false
	}
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	open, left := int64(len(p.links)), p.dropsLeft
	p.mu.Unlock()
	return Stats{
		Connections: p.connections.Load(),
		Open:        open,
		Refused:     p.refused.Load(),
		Reset:       p.reset.Load(),
		Requests:    p.requests.Load(),
		Dropped:     p.dropped.Load(),
		DropsLeft:   left,
	}
}

// Close stops listening, closes every open connection and waits for the
// proxy's goroutines. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := p.snapshot()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.teardown(false, false)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) snapshot() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	return links
}

func (p *Proxy) resetLinks(links []*link) {
	for _, l := range links {
		l.teardown(true, true, &p.reset)
	}
}

// takeDrop reports whether the answer to r is to be dropped, and if so
// counts it off the budget.
func (p *Proxy) takeDrop(r *http.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropsLeft <= 0 || p.dropMatch != nil && !p.dropMatch(r) {
		return false
	}
	p.dropsLeft--
	return true
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (too many files): try again soon.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		client := c.(*net.TCPConn)
		l := &link{p: p, client: client, done: make(chan struct{})}
		p.mu.Lock()
		refuse := p.cut || p.closed
		if !refuse {
			p.links[l] = struct{}{}
		}
		p.mu.Unlock()
		if refuse {
			p.refused.Add(1)
			resetConn(client)
			continue
		}
		p.wg.Go(l.run)
	}
}

// resetConn closes c with an RST instead of a FIN.
// drainLater ends the upstream side of a link torn down in gentle mode:
// what the upstream still sends is read and dropped until it closes (or
// gentleDrain passes), then the connection is closed. With the writer's
// half-close after whole requests only, the upstream never sees a request
// cut short nor a reset: dynalite (Node.js) dies of an aborted request, a
// real store would not.
func drainLater(c *net.TCPConn) {
	_ = c.SetReadDeadline(time.Now().Add(gentleDrain))
	go func() {
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
	}()
}

// gentleDrain bounds how long drainLater reads what the upstream sends.
const gentleDrain = 10 * time.Second

func resetConn(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// link is one client connection and its upstream connection.
type link struct {
	p        *Proxy
	client   *net.TCPConn
	upstream *net.TCPConn // set by run before the pumps start

	done     chan struct{} // closed by teardown
	once     sync.Once
	mu       sync.Mutex // guards upstream against teardown during dial
	halfDone atomic.Int32

	// dropPending: a request whose answer is to be dropped was forwarded.
	dropPending atomic.Bool
}

func (l *link) run() {
	c, err := net.DialTimeout("tcp", l.p.upstream, 5*time.Second)
	if err != nil {
		l.teardown(true, false, &l.p.refused)
		return
	}
	l.mu.Lock()
	l.upstream = c.(*net.TCPConn)
	select {
	case <-l.done: // torn down (Cut, ResetAll, Close) while dialing
		l.mu.Unlock()
		_ = l.upstream.Close()
		return
	default:
	}
	l.mu.Unlock()
	l.p.connections.Add(1)

	var wg sync.WaitGroup
	up := make(chan chunk, 16)
	down := make(chan chunk, 16)
	var upEOF, downEOF atomic.Bool
	parser := &requestWatcher{}
	wg.Go(func() { l.read(l.client, up, &l.p.latencyUp, &upEOF, parser) })
	wg.Go(func() { l.write(l.upstream, up, &upEOF, true) })
	wg.Go(func() { l.read(l.upstream, down, &l.p.latencyDown, &downEOF, nil) })
	wg.Go(func() { l.write(l.client, down, &downEOF, false) })
	wg.Wait()
	l.teardown(false, false)
}

// chunk is bytes read from one side, due on the other at a time.
type chunk struct {
	b   []byte
	due time.Time
}

// read reads src into ch until EOF or an error. watcher is non-nil for the
// client's side (requests); nil for the upstream's (answers).
func (l *link) read(src *net.TCPConn, ch chan<- chunk, latency *atomic.Int64, eof *atomic.Bool, watcher *requestWatcher) {
	defer close(ch)
	buf := make([]byte, 32<<10)
	var partial []byte // gentle mode: a request not yet read whole
	for {
		n, err := src.Read(buf)
		var b []byte
		if n > 0 {
			b = bytes.Clone(buf[:n])
			if watcher != nil {
				watcher.feed(b, l.onRequest)
				if l.p.gentle.Load() && (len(partial) > 0 || watcher.state != watchOff) {
					// Only whole requests go upstream (a stream that is
					// not HTTP goes as it comes).
					partial = append(partial, b...)
					if watcher.state == watchOff || watcher.between() {
						b, partial = partial, nil
					} else {
						n = 0
					}
				}
			} else if l.dropPending.Load() {
				// The answer to a dropped request begins: lose it.
				l.teardown(true, false, &l.p.dropped)
				return
			}
		}
		if n > 0 {
			select {
			case ch <- chunk{b: b, due: time.Now().Add(time.Duration(latency.Load()))}:
			case <-l.done:
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				eof.Store(true)
			} else {
				// A reset (or another failure) on one side resets the
				// other, so that each peer sees what the other saw.
				l.teardown(watcher == nil, watcher != nil)
			}
			return
		}
	}
}

// onRequest is called for each request whose headers were read from the
// client, before they are forwarded.
func (l *link) onRequest(r *http.Request) {
	l.p.requests.Add(1)
	if l.p.takeDrop(r) {
		l.dropPending.Store(true)
	}
}

// write writes the chunks of ch to dst, each at its due time; after the
// last, it passes a clean EOF on (half close) or ends the link.
func (l *link) write(dst *net.TCPConn, ch <-chan chunk, eof *atomic.Bool, toUpstream bool) {
	var timer *time.Timer
	ended := func() {
		if toUpstream && l.p.gentle.Load() {
			_ = dst.CloseWrite() // between two whole requests: no request is cut
		}
	}
	for {
		var c chunk
		var ok bool
		select {
		case c, ok = <-ch:
		case <-l.done:
			ended()
			return
		}
		if !ok {
			break
		}
		if d := time.Until(c.due); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-l.done:
				ended()
				return
			}
		}
		if _, err := dst.Write(c.b); err != nil {
			l.teardown(false, false)
			return
		}
	}
	if !eof.Load() {
		l.teardown(false, false)
		return
	}
	_ = dst.CloseWrite()
	if l.halfDone.Add(1) == 2 {
		l.teardown(false, false)
	}
}

// teardown ends the link once: resetClient sends the client an RST,
// resetUpstream the upstream. It reports whether this call ended it. The
// counters and the set of open links are updated before the connections
// are closed, so that a client that saw the end finds it counted.
func (l *link) teardown(resetClient, resetUpstream bool, count ...*atomic.Int64) bool {
	first := false
	l.once.Do(func() {
		first = true
		for _, c := range count {
			c.Add(1)
		}
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
		close(l.done)
		if resetClient {
			resetConn(l.client)
		} else {
			_ = l.client.Close()
		}
		l.mu.Lock()
		if up := l.upstream; up != nil {
			switch {
			case l.p.gentle.Load():
				// The upstream's writer half-closes once it is not in the
				// middle of a request (write); here its answer is drained.
				drainLater(up)
			case resetUpstream:
				resetConn(up)
			default:
				_ = up.Close()
			}
		}
		l.mu.Unlock()
	})
	return first
}

// requestWatcher follows the HTTP/1.1 requests in a client's byte stream
// without changing it: it finds each request's head and skips its body
// (Content-Length or chunked). A stream that is not HTTP/1.x turns it off.
type requestWatcher struct {
	state  watchState
	head   []byte
	line   []byte // a chunk-size or trailer line
	remain int64  // body or chunk bytes left
}

type watchState int

const (
	watchHead      watchState = iota // reading a request's head
	watchBody                        // skipping remain bytes of a Content-Length body
	watchChunkSize                   // reading a chunk-size line
	watchChunkData                   // skipping remain bytes of chunk data and its CRLF
	watchTrailer                     // reading trailer lines up to the empty one
	watchOff                         // not HTTP: nothing more to follow
)

// maxHead bounds a request head; a longer one is taken for "not HTTP".
const maxHead = 1 << 20

// between reports whether the bytes fed so far end at a request's end.
func (w *requestWatcher) between() bool { return w.state == watchHead && len(w.head) == 0 }

// feed follows b; onHead is called for each request head completed in b.
func (w *requestWatcher) feed(b []byte, onHead func(*http.Request)) {
	for len(b) > 0 {
		switch w.state {
		case watchOff:
			return
		case watchHead:
			if len(w.head) == 0 && (b[0] < 'A' || b[0] > 'Z') {
				w.state = watchOff // a method token is upper case
				return
			}
			from := max(len(w.head)-3, 0)
			w.head = append(w.head, b...)
			end := bytes.Index(w.head[from:], []byte("\r\n\r\n"))
			if end < 0 {
				if len(w.head) > maxHead || !plausibleRequestLine(w.head) {
					w.state = watchOff
				}
				return
			}
			end += from + 4
			b = bytes.Clone(w.head[end:]) // what follows the head
			r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(w.head[:end])))
			w.head = w.head[:0]
			if err != nil {
				w.state = watchOff
				return
			}
			r.Body = http.NoBody
			onHead(r)
			switch {
			case len(r.TransferEncoding) > 0 && r.TransferEncoding[len(r.TransferEncoding)-1] == "chunked":
				w.state = watchChunkSize
			case r.ContentLength > 0:
				w.state, w.remain = watchBody, r.ContentLength
			}
		case watchBody, watchChunkData:
			n := min(w.remain, int64(len(b)))
			b, w.remain = b[n:], w.remain-n
			if w.remain == 0 {
				if w.state == watchBody {
					w.state = watchHead
				} else {
					w.state = watchChunkSize
				}
			}
		case watchChunkSize, watchTrailer:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				w.line = append(w.line, b...)
				if len(w.line) > maxHead {
					w.state = watchOff
				}
				return
			}
			w.line = append(w.line, b[:i+1]...)
			b = b[i+1:]
			line := strings.TrimRight(string(w.line), "\r\n")
			w.line = w.line[:0]
			if w.state == watchTrailer {
				if line == "" {
					w.state = watchHead
				}
				continue
			}
			size, _, _ := strings.Cut(line, ";")
			n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
			switch {
			case err != nil || n < 0:
				w.state = watchOff
			case n == 0:
				w.state = watchTrailer
			default:
				w.state, w.remain = watchChunkData, n+2 // the data and its CRLF
			}
		}
	}
}

// plausibleRequestLine reports whether head, an incomplete request head,
// may still be HTTP/1.x: once its first line is complete it must be
// "METHOD target HTTP/1.x".
func plausibleRequestLine(head []byte) bool {
	i := bytes.IndexByte(head, '\n')
	if i < 0 {
		return true
	}
	parts := strings.Fields(string(head[:i]))
	return len(parts) == 3 && strings.HasPrefix(parts[2], "HTTP/1.")
}
