// Package lambdaedge serves a plain http.Handler as an AWS Lambda function
// behind an API Gateway REST API that streams the function's response, so
// the gateway's handler stays plain net/http and runs unchanged locally.
//
// # The production shape
//
// An API Gateway REST API (payload format 1.0) with a Lambda proxy
// integration (AWS_PROXY) whose ResponseTransferMode is STREAM: API Gateway
// invokes the function with InvokeWithResponseStream (the integration URI
// ends in /response-streaming-invocations), which lets one response run for
// up to 15 minutes, enough for the gateway's 600-second request ceiling, and
// passes a server-sent event on to the client as soon as the function
// writes it. The function receives the REST proxy event
// (events.APIGatewayProxyRequest) and answers in the streaming HTTP
// integration format (content type
// application/vnd.awslambda.http-integration-response), which
// events.APIGatewayProxyStreamingResponse writes:
//
//	{"statusCode":200,"headers":{...},"multiValueHeaders":{...}}
//	eight NUL bytes
//	the body, as the handler writes and flushes it
//
// A header with one value goes in "headers", one with several values (two
// Set-Cookie lines, say) in "multiValueHeaders", so that nothing is folded
// or lost and no header appears in both; an empty map is left out. API
// Gateway wants the prelude within the stream's first 16 KB.
//
// # How a request runs
//
// Wrap converts the event to an *http.Request with
// github.com/awslabs/aws-lambda-go-api-proxy/core: path, query,
// multiValueHeaders (else headers), the body (base64-decoded when the event
// says so), and a context carrying the Lambda context and the API Gateway
// request context. It then makes the request look like one from net/http's
// server: RemoteAddr is "sourceIp:0" (requestContext.identity.sourceIp, the
// client), the Host header is in r.Host, and the query is encoded in key
// order. It runs the handler in a goroutine that writes into an io.Pipe.
//
// The ResponseWriter behaves like net/http's: writes are buffered (4 KiB)
// until the handler flushes (http.Flusher, or http.ResponseController, which
// gets FlushError's error once the response is closed), the buffer fills or
// the handler returns; a Content-Type is sniffed when the handler sets none;
// the body of a HEAD request, a 204 or a 304 is not sent; informational
// statuses (1xx) are dropped. The status and headers are fixed at the
// handler's first Write or Flush, or when it returns, and that is when the
// Lambda handler returns: the runtime then sends the prelude and copies the
// pipe to the Runtime API as it fills, one HTTP chunk per flush (a Flush
// returns once the runtime has taken the bytes).
//
// The handler goroutine never outlives the invocation: the body ends when
// the handler returns, and the runtime closes the response when it is done
// with it (after the last byte, or when its connection to the Runtime API
// fails), which cancels the request's context, makes further writes fail
// and waits for the handler to return. A handler that panics before writing
// answers 500 (text/plain, keeping the headers it set, such as
// X-Request-Id); one that panics later ends the stream with an error, which
// the runtime reports to Lambda in the response's trailers. Either way the
// panic is logged with slog.Default, and the process lives on, as under
// net/http. An event that is no valid HTTP request (a body that is not
// base64) is answered 400 without calling the handler.
//
// Build with -tags lambda.norpc for the provided.al2023 runtime: a streamed
// response needs the Runtime API client, and the tag leaves out the go1.x
// RPC shim.
package lambdaedge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
)

// bufferSize is the ResponseWriter's buffer, as net/http's: small writes
// between flushes go out together.
const bufferSize = 4 << 10

// errClosed is what a handler's Write or Flush returns once the runtime
// has closed the response: the client will read no more.
var errClosed = errors.New("lambdaedge: the response was closed")

// Start serves h as the Lambda function's handler; it never returns.
func Start(h http.Handler) {
	lambda.Start(Wrap(h))
}

// Wrap turns h into a Lambda handler for API Gateway REST proxy events whose
// response the integration streams (see the package doc). It returns once the
// handler has fixed its status and headers; the body follows as the handler
// writes it. The runtime must read the response to its end or close it.
func Wrap(h http.Handler) func(context.Context, events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
	return func(ctx context.Context, event events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
		ctx, cancel := context.WithCancel(ctx)
		req, err := newRequest(ctx, event)
		if err != nil {
			// An event that is no HTTP request (a body that is not base64,
			// a method Go rejects): answered as net/http answers a request
			// it cannot parse, without calling the handler.
			cancel()
			return &events.APIGatewayProxyStreamingResponse{
				StatusCode: http.StatusBadRequest,
				Headers:    map[string]string{"Content-Type": "text/plain; charset=utf-8"},
				Body:       strings.NewReader("400 Bad Request"),
			}, nil
		}

		pr, pw := io.Pipe()
		heads := make(chan head, 1)
		done := make(chan struct{})
		w := &responseWriter{
			headState: headState{method: req.Method, header: make(http.Header)},
			heads:     heads,
			pipe:      pw,
		}
		w.buf = bufio.NewWriterSize(w.pipe, bufferSize)
		go func() {
			defer close(done)
			defer func() {
				if v := recover(); v != nil {
					w.abort(v)
					return
				}
				w.finish()
			}()
			h.ServeHTTP(w, req)
		}()

		hd := <-heads
		return &events.APIGatewayProxyStreamingResponse{
			StatusCode:        hd.status,
			Headers:           hd.single,
			MultiValueHeaders: hd.multi,
			Body: &body{PipeReader: pr, stop: func() {
				cancel()
				pr.CloseWithError(errClosed)
				<-done
			}},
		}, nil
	}
}

// newRequest converts the event as core.RequestAccessor does, then makes
// the request look like one net/http's server hands a handler: RemoteAddr
// is "IP:port", the Host header is in r.Host, and the query is in a stable
// order (the event holds it as a map).
func newRequest(ctx context.Context, event events.APIGatewayProxyRequest) (*http.Request, error) {
	var accessor core.RequestAccessor
	req, err := accessor.EventToRequestWithContext(ctx, event)
	if err != nil {
		return nil, err
	}
	query := url.Values(event.MultiValueQueryStringParameters)
	if len(query) == 0 && len(event.QueryStringParameters) > 0 {
		query = make(url.Values, len(event.QueryStringParameters))
		for k, v := range event.QueryStringParameters {
			query.Set(k, v)
		}
	}
	req.URL.RawQuery = query.Encode()
	req.RequestURI = req.URL.RequestURI()
	if host := req.Header.Get("Host"); host != "" {
		req.Host = host
	}
	req.Header.Del("Host")
	if ip := event.RequestContext.Identity.SourceIP; ip != "" {
		req.RemoteAddr = net.JoinHostPort(ip, "0")
	}
	return req, nil
}

// body is the response body the runtime reads. Closing it ends the
// request: its context is cancelled, the handler's further writes fail, and
// Close returns once the handler has.
type body struct {
	*io.PipeReader
	stop func()
	once sync.Once
}

func (b *body) Close() error {
	b.once.Do(b.stop)
	return nil
}

// head is the status and headers, split by how many values a header has.
type head struct {
	status int
	single map[string]string
	multi  map[string][]string
}

// headState is the status and headers of a response being written, with
// net/http's rules, for both writers (streamed and buffered): WriteHeader
// takes the first status (informational ones dropped: the integration has
// no way to send one), and the first Write or Flush, or the handler's end,
// fixes them: 200 when none was set, and a Content-Type sniffed from the
// first bytes when the handler set none.
type headState struct {
	method string
	header http.Header
	status int  // from WriteHeader; 0 until then
	fixed  bool // the status and headers are fixed
}

func (h *headState) Header() http.Header { return h.header }

func (h *headState) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if h.fixed || h.status != 0 || code <= 199 {
		return
	}
	h.status = code
}

// fix fixes the status and headers, p being the first bytes of the body
// (nil for a Flush or the end); it reports whether they were not fixed
// before.
func (h *headState) fix(p []byte) bool {
	if h.fixed {
		return false
	}
	if h.status == 0 {
		h.status = http.StatusOK
	}
	if _, typed := h.header["Content-Type"]; !typed && len(p) > 0 && bodyAllowed(h.status) {
		h.header.Set("Content-Type", http.DetectContentType(p))
	}
	h.fixed = true
	return true
}

// writeBody reports what a Write does with its bytes: an error for a
// status without a body, nothing for a HEAD request (ok false).
func (h *headState) writeBody(p []byte) (n int, ok bool, err error) {
	if !bodyAllowed(h.status) {
		return 0, false, http.ErrBodyNotAllowed
	}
	if h.method == http.MethodHead {
		return len(p), false, nil
	}
	return 0, true, nil
}

// internalError makes the head of the 500 a panicking handler gets,
// keeping the headers it set but those about its body.
func (h *headState) internalError() {
	h.header.Del("Content-Length")
	h.header.Del("Content-Encoding")
	h.header.Set("Content-Type", "text/plain; charset=utf-8")
	h.header.Set("X-Content-Type-Options", "nosniff")
	h.status = http.StatusInternalServerError
	h.fixed = true
}

// responseWriter is the handler's http.ResponseWriter. Only the handler's
// goroutine touches it.
type responseWriter struct {
	headState
	heads chan<- head
	buf   *bufio.Writer // onto pipe
	pipe  *io.PipeWriter
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.fix(p) {
		w.sendHead()
	}
	if n, ok, err := w.writeBody(p); !ok {
		return n, err
	}
	return w.buf.Write(p)
}

// Flush sends what was written so far; see FlushError.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError sends the status and headers if not sent yet and everything
// written so far. It returns once the runtime has read it, or with an error
// when the response was closed. http.ResponseController prefers it to Flush.
func (w *responseWriter) FlushError() error {
	if w.fix(nil) {
		w.sendHead()
	}
	return w.buf.Flush()
}

func (w *responseWriter) sendHead() {
	single, multi := splitHeader(w.header)
	w.heads <- head{status: w.status, single: single, multi: multi}
}

// splitHeader puts a header with one value in single and one with several
// in multi (nil when there is none), so that none is folded, lost or sent
// twice.
func splitHeader(h http.Header) (single map[string]string, multi map[string][]string) {
	single = make(map[string]string, len(h))
	for k, v := range h {
		switch len(v) {
		case 0:
		case 1:
			single[k] = v[0]
		default:
			if multi == nil {
				multi = make(map[string][]string)
			}
			multi[k] = append([]string(nil), v...)
		}
	}
	return single, multi
}

// finish runs when the handler returns: the head goes out if it has not
// yet (an empty 200 when the handler wrote nothing), then the rest of the
// body, then the end of the body.
func (w *responseWriter) finish() {
	if w.fix(nil) {
		w.sendHead()
	}
	_ = w.buf.Flush()
	_ = w.pipe.Close()
}

// abort ends the response of a handler that panicked with v.
func (w *responseWriter) abort(v any) {
	if v != http.ErrAbortHandler {
		slog.Default().Error("lambdaedge: panic serving request", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	}
	if w.fixed {
		// Too late for a status: keep what the client has and end the
		// stream with an error, which the runtime reports to Lambda.
		_ = w.buf.Flush()
		_ = w.pipe.CloseWithError(fmt.Errorf("lambdaedge: the handler panicked after its response started"))
		return
	}
	w.internalError()
	w.sendHead()
	_, _ = io.WriteString(w.pipe, "Internal Server Error\n")
	_ = w.pipe.Close()
}

// bodyAllowed reports whether a response with the status may have a body
// (RFC 9110: not 1xx, 204 or 304).
func bodyAllowed(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}
