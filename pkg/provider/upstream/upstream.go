// Package upstream holds what the provider adapters share about calling an
// upstream over HTTP: the client they call with (one transport on the local
// server and in the Lambda bootstrap alike), and how an answer is read: its
// retry-after hint, the message of a 400 made safe to pass to a client, the
// class of a failure. Adapters never import each other; they import this.
package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	// maxRejectedMessage is how much of a 400 body that is not an error
	// envelope becomes the message passed to the client.
	maxRejectedMessage = 512
	// maxRetryAfter caps an upstream's retry-after hint.
	maxRetryAfter = 60 * time.Second
)

// RetryAfter reads the hint of a 429: retry-after-ms (milliseconds, as
// OpenAI sends it; Anthropic sends none) first, else retry-after (seconds or an HTTP date). It is
// capped at maxRetryAfter; 0 means no usable hint.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return capSeconds(ms / 1e3)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 {
			return 0
		}
		return capSeconds(s)
	}
	if t, err := http.ParseTime(v); err == nil {
		return capSeconds(t.Sub(now).Seconds())
	}
	return 0
}

func capSeconds(seconds float64) time.Duration {
	switch {
	case math.IsNaN(seconds) || seconds <= 0:
		return 0
	case seconds >= maxRetryAfter.Seconds():
		return maxRetryAfter
	}
	return time.Duration(seconds * float64(time.Second))
}

// PlainText is the first max bytes of b as one line of text: control
// characters removed (line breaks and tabs become spaces), as is invalid UTF-8
// or a rune cut in half at the end.
func PlainText(b []byte, max int) string {
	if len(b) > max {
		b = b[:max]
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case r == utf8.RuneError && size == 1:
			continue
		case unicode.IsControl(r):
			if unicode.IsSpace(r) {
				sb.WriteByte(' ')
			}
			continue
		}
		sb.WriteRune(r)
	}
	return strings.TrimSpace(sb.String())
}

// defaultClient is the adapters' shared client: one connection pool sized
// for a gateway (many concurrent calls to few hosts), no client timeout (the
// request's context bounds each call, a whole stream included). transport.go
// says what its transport guarantees.
var defaultClient = &http.Client{Transport: newTransport(), CheckRedirect: noRedirects}

// noRedirects makes a redirect an answer of its own (a failure), not a
// second request: one call is one attempt.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// HTTPClient is the client an adapter calls with: the shared one for nil,
// else a copy of hc that never follows redirects.
func HTTPClient(hc *http.Client) *http.Client {
	if hc == nil {
		return defaultClient
	}
	own := *hc
	own.CheckRedirect = noRedirects
	return &own
}

// NewRequest is a POST to url of a JSON body given as pieces. A body of
// more than joinedBody bytes is sent in order without being joined: a
// large piece is written to the connection from where it is, never copied
// into a buffer of the body's size. A smaller one is joined (a single
// piece is not copied) and sent as a bytes.Reader, which net/http writes
// in the same write as the request's head; for a reader it does not know,
// it writes the head first, which costs a second write and, on loopback,
// wakes the upstream twice.
func NewRequest(ctx context.Context, url string, pieces [][]byte) (*http.Request, error) {
	u, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	n := (&bodyPieces{b: pieces}).len()
	var body io.Reader
	if n > 0 && n <= joinedBody {
		b := pieces[0]
		if len(b) != int(n) {
			b = bytes.Join(pieces, nil)
		}
		body = bytes.NewReader(b)
	}
	// The URL is parsed once per endpoint: the request's own, allocated
	// for the empty URL, becomes a copy of it.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", body)
	if err != nil {
		return nil, err
	}
	*req.URL = *u
	req.Host = u.Host
	if body != nil || n == 0 {
		return req, nil
	}
	// Each reader reads its own copy of the list (net.Buffers consumes the
	// slice it reads), never the pieces' bytes.
	open := func() (io.ReadCloser, error) {
		return &bodyPieces{b: net.Buffers(slices.Clone(pieces))}, nil
	}
	req.Body, _ = open()
	req.GetBody = open
	req.ContentLength = n
	return req, nil
}

// Send makes one call through hc, as hc.Do does for an HTTPClient (no
// redirect followed), without what Do adds for redirects and cookies when
// hc has neither a cookie jar nor a timeout, the URL no user info and the
// request a header (Do makes a missing one; a Transport refuses it): Do
// copies the request's header for a redirect that never comes, a map and a
// slice per field on every call. Errors are wrapped as Do wraps them.
//
// Send takes any Idempotency-Key and X-Idempotency-Key fields off req:
// net/http resends a request that carries one when a reused connection
// drops it, and one call must be one attempt.
func Send(hc *http.Client, req *http.Request) (*http.Response, error) {
	if req.Header != nil {
		delete(req.Header, "Idempotency-Key")
		delete(req.Header, "X-Idempotency-Key")
	}
	if hc.Jar != nil || hc.Timeout != 0 || req.URL == nil || req.URL.User != nil || req.Header == nil {
		return hc.Do(req)
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	switch {
	case err != nil:
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, &url.Error{Op: opName(req.Method), URL: req.URL.Redacted(), Err: err}
	case resp == nil:
		return nil, &url.Error{Op: opName(req.Method), URL: req.URL.Redacted(), Err: errors.New("http: RoundTripper returned a nil *Response with a nil error")}
	case resp.Body == nil:
		resp.Body = http.NoBody
	}
	return resp, nil
}

// opName is url.Error's Op for method, as http.Client writes it ("Post").
func opName(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// Endpoint is baseURL (a trailing slash dropped) joined with path, and an
// error when that is not an absolute http(s) URL: an adapter keeps the
// error and fails every call with it.
func Endpoint(baseURL, path string) (string, error) {
	endpoint := strings.TrimSuffix(baseURL, "/") + path
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return endpoint, fmt.Errorf("base URL %q is not an absolute http(s) URL", baseURL)
	}
	return endpoint, nil
}

// parsedURLs are the URLs NewRequest has parsed, at most maxParsedURLs
// of them: adapters call the same few endpoints, and url.Parse was half
// of NewRequest's CPU.
var (
	parsedURLs  sync.Map // string -> *url.URL
	nParsedURLs atomic.Int32
)

const maxParsedURLs = 256

// parseURL is url.Parse as http.NewRequest applies it (an empty port is
// dropped from the host), of a URL parsed once; never modify the result.
func parseURL(s string) (*url.URL, error) {
	if u, ok := parsedURLs.Load(s); ok {
		return u.(*url.URL), nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if i := strings.LastIndex(u.Host, ":"); i > strings.LastIndex(u.Host, "]") {
		u.Host = strings.TrimSuffix(u.Host, ":")
	}
	if nParsedURLs.Add(1) <= maxParsedURLs {
		parsedURLs.Store(s, u)
	}
	return u, nil
}

// joinedBody is the size up to which NewRequest joins a body's pieces:
// net/http's transport buffers 4 KiB of a request (its default
// WriteBufferSize), so a larger body takes a second write whatever its
// reader.
const joinedBody = 4 << 10

// bodyPieces is a request body as pieces, read in order. On a plain
// connection, bodyConn writes what is left of it in one writev.
type bodyPieces struct{ b net.Buffers }

func (p *bodyPieces) Read(b []byte) (int, error)         { return p.b.Read(b) }
func (p *bodyPieces) WriteTo(w io.Writer) (int64, error) { return p.b.WriteTo(w) }
func (p *bodyPieces) Close() error                       { return nil }

// len is how many bytes are left.
func (p *bodyPieces) len() int64 {
	n := int64(0)
	for _, b := range p.b {
		n += int64(len(b))
	}
	return n
}
