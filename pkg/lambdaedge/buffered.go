package lambdaedge

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

// # Buffered mode, for SAM CLI's local tools
//
// `sam local start-api` and `sam local invoke` call the function with the
// buffered Invoke and read its answer as the JSON of an API Gateway proxy
// response ({"statusCode", "headers", "multiValueHeaders", "body",
// "isBase64Encoded"}); the streaming wire format (prelude, eight NUL bytes,
// body) is not JSON to them, so every request would end in a 502.
// StartBuffered and WrapBuffered serve the same handler for them: the
// handler runs to its end (flushes do nothing), and its status, headers and
// whole body are returned as one events.APIGatewayProxyResponse. A
// server-sent event stream comes back whole, as one body. Deployed behind
// the streaming REST API, Start is what runs.

// StartBuffered serves h as a Lambda handler whose answers are buffered API
// Gateway proxy responses; it never returns.
func StartBuffered(h http.Handler) {
	lambda.Start(WrapBuffered(h))
}

// WrapBuffered turns h into a Lambda handler for API Gateway REST proxy
// events that returns once h has returned, with the whole response. The
// request is made as Wrap makes it. A body that is valid UTF-8 is returned
// as text; any other is base64 with isBase64Encoded set. A handler that
// panics gets a 500 (text/plain), whatever it had written, as nothing has
// reached the client yet.
func WrapBuffered(h http.Handler) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return func(ctx context.Context, event events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		req, err := newRequest(ctx, event)
		if err != nil {
			return events.APIGatewayProxyResponse{
				StatusCode: http.StatusBadRequest,
				Headers:    map[string]string{"Content-Type": "text/plain; charset=utf-8"},
				Body:       "400 Bad Request",
			}, nil
		}
		w := &bufferedWriter{headState: headState{method: req.Method, header: make(http.Header)}}
		serveBuffered(h, w, req)
		return w.response(), nil
	}
}

// serveBuffered runs the handler, turning a panic into a 500.
func serveBuffered(h http.Handler, w *bufferedWriter, req *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				slog.Default().Error("lambdaedge: panic serving request", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			}
			w.internalError()
			w.body.Reset()
			w.body.WriteString("Internal Server Error\n")
		}
	}()
	h.ServeHTTP(w, req)
}

// bufferedWriter is the handler's http.ResponseWriter in buffered mode; it
// behaves as responseWriter does, except that nothing leaves before the
// handler returns.
type bufferedWriter struct {
	headState
	body bytes.Buffer
}

func (w *bufferedWriter) Write(p []byte) (int, error) {
	w.fix(p)
	if n, ok, err := w.writeBody(p); !ok {
		return n, err
	}
	return w.body.Write(p)
}

// Flush fixes the status and headers; the bytes stay until the end.
func (w *bufferedWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush for http.ResponseController; it never fails.
func (w *bufferedWriter) FlushError() error {
	w.fix(nil)
	return nil
}

func (w *bufferedWriter) response() events.APIGatewayProxyResponse {
	w.fix(nil)
	single, multi := splitHeader(w.header)
	r := events.APIGatewayProxyResponse{StatusCode: w.status, Headers: single, MultiValueHeaders: multi}
	if b := w.body.Bytes(); utf8.Valid(b) {
		r.Body = string(b)
	} else {
		r.Body = base64.StdEncoding.EncodeToString(b)
		r.IsBase64Encoded = true
	}
	return r
}
