package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// Settings of the adapters' shared transport (newTransport).
const (
	// maxIdlePerHost: idle connections kept open per upstream host, about
	// as many as calls to one provider overlap under load on HTTP/1.1 (an
	// HTTP/2 upstream multiplexes its calls over one connection).
	maxIdlePerHost = 64
	// maxIdle: idle connections kept open in all, for a handful of hosts.
	maxIdle = 256
	// idleTimeout: an idle connection is closed after this long, before
	// providers' load balancers drop it unannounced.
	idleTimeout = 90 * time.Second
	// maxResponseHead bounds an answer's status line and header fields:
	// a provider sends a few kilobytes; net/http's own default is 10 MiB.
	maxResponseHead = 64 << 10
	// h2PingAfter and h2PingTimeout: an HTTP/2 connection silent for
	// h2PingAfter is pinged, and closed when no answer comes within
	// h2PingTimeout. Every call to an HTTP/2 provider shares one connection,
	// and a dead one would otherwise hold them all until each call's own
	// first_token_timeout.
	h2PingAfter   = 30 * time.Second
	h2PingTimeout = 15 * time.Second
)

// newTransport is the transport of the adapters' shared client: net/http's,
// on the local server and in the Lambda bootstrap alike, with settings for a
// gateway. What the adapters rely on, each tested in transport_test.go:
//
//   - Cancellation: the call's context ending (the client gone, the
//     provider's first_token_timeout, the request's deadline) ends the call
//     at once, whether it is connecting, waiting for the answer's head or
//     reading the body. An HTTP/1.1 connection interrupted waiting or
//     reading is closed, never reused, and the upstream sees it go; on
//     HTTP/2 the call's stream is reset and the connection kept. A
//     connection still being set up goes on in the background, for the next
//     call, within the dialer's 30 s and the TLS handshake's 10 s.
//   - One call is one attempt: a request is never sent twice. net/http
//     resends a request by itself only when none of it was written (a
//     reused connection found closed), or when it is idempotent: a GET or
//     HEAD, or a request carrying an Idempotency-Key or X-Idempotency-Key
//     field, which Send therefore takes off every request. Redirects are not
//     followed (the client's CheckRedirect, noRedirects).
//   - No client or head timeout of its own: the call's context bounds the
//     wait for the head (first_token_timeout) and the whole stream.
//   - Connection reuse: an answer read to its end leaves its connection for
//     the next call to the host, a streamed one too when the chunked body's
//     last chunk arrived with the stream's end marker, where an adapter stops
//     reading; a connection the server closed while idle is not used.
//   - HTTP/2 with an upstream that offers it in TLS (OpenAI's and
//     Anthropic's do), HTTP/1.1 otherwise.
//   - The answer as sent: no Accept-Encoding is added, so an upstream does
//     not compress an event stream that the gateway would have to
//     decompress.
//   - Proxies: HTTP_PROXY, HTTPS_PROXY and NO_PROXY, as net/http reads them.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return bodyConn{c}, nil
	}
	t.MaxIdleConns = maxIdle
	t.MaxIdleConnsPerHost = maxIdlePerHost
	t.IdleConnTimeout = idleTimeout
	t.ResponseHeaderTimeout = 0
	t.MaxResponseHeaderBytes = maxResponseHead
	t.DisableCompression = true
	t.ForceAttemptHTTP2 = true
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: h2PingAfter, PingTimeout: h2PingTimeout}
	return t
}

// bodyConn is a plain connection that writes a request body given as
// pieces (NewRequest's, which net/http hands to the connection's ReadFrom
// behind an io.LimitedReader) in one writev, where a net.Conn's own
// ReadFrom copies it through a 32 KiB buffer, one write each: on loopback
// each write wakes the upstream's reader, and a 1 MB body took 0.3 ms
// longer. Any other body is copied as net.Conn would. (Over TLS the
// connection is tls.Conn's, which reads the body itself.)
type bodyConn struct{ net.Conn }

func (c bodyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if p, ok := lr.R.(*bodyPieces); ok && p.len() <= lr.N {
			n, err := p.b.WriteTo(c.Conn)
			lr.N -= n
			return n, err
		}
	}
	return io.Copy(writerOnly{c.Conn}, r)
}

// CloseWrite is the connection's own, for net/http's upgraded connections.
func (c bodyConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// writerOnly hides a writer's ReadFrom, so that io.Copy copies.
type writerOnly struct{ io.Writer }
