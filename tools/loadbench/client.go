package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The generator's HTTP client: HTTP/1.1 keep-alive over raw TCP, cheaper
// than net/http's (a request is one prebuilt byte slice written at once, the
// answer is parsed for the few headers the benchmark reads and its body
// discarded), so that the generator takes less of the CPUs it shares with
// the gateway and the mock. It is enough for what they send: answers with a
// Content-Length, chunked ones (streams, flushed answers) and ones that end
// with the connection.

const (
	// requestTimeout bounds one request: writing it and reading the whole
	// answer (net/http's client had the same Timeout).
	requestTimeout = 30 * time.Second
	dialTimeout    = 5 * time.Second
	// readBufSize is each connection's read buffer; the status line and
	// each header line must fit in it.
	readBufSize = 16 << 10
)

// conn is one persistent connection to addr, redialed on first use and
// after an error or a "Connection: close". It is used by one goroutine at a
// time.
type conn struct {
	addr string
	nc   net.Conn // nil: dial before the next request
	br   *bufio.Reader
	used bool   // nc already carried a whole exchange
	wbuf []byte // a keyed request, built in place
}

func newConn(addr string) *conn { return &conn{addr: addr} }

func (c *conn) dial() error {
	nc, err := net.DialTimeout("tcp", c.addr, dialTimeout)
	if err != nil {
		return err
	}
	c.nc, c.used = nc, false
	if c.br == nil {
		c.br = bufio.NewReaderSize(nc, readBufSize)
	} else {
		c.br.Reset(nc)
	}
	return nil
}

// close closes the connection; the next request dials a new one.
func (c *conn) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
}

// response is what the benchmark reads of an answer; its times are when
// the first byte of the body arrived (zero: the body was empty) and when
// the body ended.
type response struct {
	status      int
	replayed    bool // Idempotency-Replayed: true
	first, last time.Time
}

// roundTrip writes req (a whole HTTP/1.1 request) and reads the answer to
// its end, leaving the connection ready for the next request or closed. A
// request that fails on a reused connection before any byte of the answer
// arrived (the server had closed it while idle) is sent once more on a new
// connection, as net/http does.
func (c *conn) roundTrip(req []byte) (response, error) {
	for attempt := 0; ; attempt++ {
		if c.nc == nil {
			if err := c.dial(); err != nil {
				return response{}, err
			}
		}
		reused := c.used
		resp, keep, gotBytes, err := c.exchange(req)
		if err == nil && keep {
			c.used = true
			return resp, nil
		}
		c.close()
		if err != nil && reused && !gotBytes && attempt == 0 && retriable(err) {
			continue
		}
		return resp, err
	}
}

// retriable says whether err is what a reused connection that the server
// had closed gives.
func retriable(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// exchange is one request and answer on c.nc: keep says whether the
// connection can carry another; gotBytes whether any byte of the answer
// arrived.
func (c *conn) exchange(req []byte) (resp response, keep, gotBytes bool, err error) {
	if err := c.nc.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return resp, false, false, err
	}
	if _, err := c.nc.Write(req); err != nil {
		return resp, false, false, err
	}
	br := c.br
	var h respHead
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return resp, false, len(line) > 0, err
		}
		if h, err = parseStatus(line); err != nil {
			return resp, false, true, err
		}
		if err := h.readHeaders(br); err != nil {
			return resp, false, true, err
		}
		// 1xx (100 Continue, 103 Early Hints) precede the answer.
		if h.status >= 200 || h.status == 101 {
			break
		}
	}
	resp.status, resp.replayed = h.status, h.replayed
	keep = !h.close
	switch {
	case h.status == 204 || h.status == 304:
		// no body
	case h.chunked:
		err = readChunked(br, &resp.first)
	case h.length >= 0:
		err = discard(br, h.length, &resp.first)
	default:
		// No length: the body runs to the end of the connection.
		keep = false
		err = discard(br, -1, &resp.first)
	}
	resp.last = time.Now()
	if err != nil {
		return resp, false, true, err
	}
	return resp, keep, true, nil
}

// respHead is what an answer's head says.
type respHead struct {
	status   int
	http10   bool
	length   int64 // -1: none
	chunked  bool
	close    bool // the connection ends with this answer
	replayed bool
	te       bool // a Transfer-Encoding other than chunked
}

// parseStatus parses "HTTP/1.x NNN reason\r\n".
func parseStatus(line []byte) (respHead, error) {
	h := respHead{length: -1}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return h, fmt.Errorf("malformed status line %q", line)
	}
	h.http10 = line[7] == '0'
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return h, fmt.Errorf("malformed status line %q", line)
		}
		h.status = h.status*10 + int(d-'0')
	}
	if len(line) > 12 && line[12] != ' ' && line[12] != '\r' && line[12] != '\n' {
		return h, fmt.Errorf("malformed status line %q", line)
	}
	h.close = h.http10
	return h, nil
}

// readHeaders reads the header lines up to the empty one, keeping the few
// the benchmark needs.
func (h *respHead) readHeaders(br *bufio.Reader) error {
	for {
		line, err := readLine(br, "header line")
		if err != nil {
			return err
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case equalFold(name, "Content-Length"):
			n, ok := parseSize(value, 10)
			if !ok {
				return fmt.Errorf("bad Content-Length %q", value)
			}
			h.length = n
		case equalFold(name, "Transfer-Encoding"):
			// The last coding must be chunked for the length to be known.
			last := value
			if i := bytes.LastIndexByte(value, ','); i >= 0 {
				last = bytes.TrimSpace(value[i+1:])
			}
			if equalFold(last, "chunked") {
				h.chunked = true
			} else {
				h.te = true
			}
		case equalFold(name, "Connection"):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.TrimSpace(tok)
				switch {
				case equalFold(tok, "close"):
					h.close = true
				case equalFold(tok, "keep-alive") && h.http10:
					h.close = false
				}
			}
		case equalFold(name, "Idempotency-Replayed"):
			h.replayed = string(value) == "true"
		}
	}
	if h.te && !h.chunked {
		h.length = -1 // to the end of the connection
	}
	if h.chunked {
		h.length = -1
	}
	return nil
}

// discard reads and drops n bytes of body (n < 0: up to EOF), setting
// *first when the first one arrives.
func discard(br *bufio.Reader, n int64, first *time.Time) error {
	if n == 0 {
		return nil
	}
	if _, err := br.Peek(1); err != nil {
		if n < 0 && err == io.EOF {
			return nil
		}
		return noEOF(err)
	}
	if first.IsZero() {
		*first = time.Now()
	}
	if n < 0 {
		for {
			if _, err := br.Discard(max(br.Buffered(), 1)); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		}
	}
	for n > 0 {
		m := int(min(n, 1<<30))
		d, err := br.Discard(m)
		n -= int64(d)
		if err != nil {
			return noEOF(err)
		}
	}
	return nil
}

// readChunked reads and drops a chunked body up to its last chunk and
// trailers, setting *first when the first byte of data arrives.
func readChunked(br *bufio.Reader, first *time.Time) error {
	for {
		line, err := readLine(br, "chunk size line")
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions
		}
		size, ok := parseSize(bytes.TrimSpace(line), 16)
		if !ok {
			return fmt.Errorf("bad chunk size line %q", line)
		}
		if size == 0 {
			// Trailers, up to the empty line.
			for {
				line, err := readLine(br, "trailer line")
				if err != nil || len(line) == 0 {
					return err
				}
			}
		}
		if err := discard(br, size, first); err != nil {
			return err
		}
		crlf, err := readLine(br, "line after chunk data")
		if err != nil {
			return err
		}
		if len(crlf) != 0 {
			return errors.New("chunk data not followed by CRLF")
		}
	}
}

// readLine reads a line of an answer's head or chunked body, without its
// CRLF; what names it in the error for a line longer than br's buffer.
func readLine(br *bufio.Reader, what string) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New(what + " too long")
		}
		return nil, noEOF(err)
	}
	return trimCRLF(line), nil
}

// noEOF turns an EOF in the middle of an answer into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func trimCRLF(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// equalFold compares b and an ASCII s without regard to case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// parseSize reads a Content-Length (base 10) or a chunk size (base 16):
// digits only, no sign.
func parseSize(b []byte, base int) (int64, bool) {
	n, err := strconv.ParseUint(string(b), base, 63)
	return int64(n), err == nil
}

// pool is the open loop's connections to one address: a request takes an
// idle one, or a new one while there are fewer than max, or else waits for
// one (counted in waits: the loop was no longer open).
type pool struct {
	addr string
	max  int

	mu    sync.Mutex
	cond  sync.Cond
	idle  []*conn
	all   []*conn
	waits int // requests that waited for a connection
}

func newPool(addr string, max int) *pool {
	p := &pool{addr: addr, max: max}
	p.cond.L = &p.mu
	return p
}

func (p *pool) get() *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return c
	}
	if len(p.all) < p.max {
		c := newConn(p.addr)
		p.all = append(p.all, c)
		return c
	}
	p.waits++
	for len(p.idle) == 0 {
		p.cond.Wait()
	}
	c := p.idle[len(p.idle)-1]
	p.idle = p.idle[:len(p.idle)-1]
	return c
}

func (p *pool) put(c *conn) {
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
	p.cond.Signal()
}

// stats returns how many connections the pool has made (it keeps them all)
// and how many requests have waited for one.
func (p *pool) stats() (conns, waits int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all), p.waits
}

// close closes the idle connections (all of them once no request is in
// flight).
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.idle {
		c.close()
	}
}
