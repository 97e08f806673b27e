package lambdaedge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/proc"
	"github.com/buzzgate/buzzgate/pkg/lambdaedge"
)

// prelude is the JSON before the eight NUL bytes.
type prelude struct {
	StatusCode        int                 `json:"statusCode"`
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
}

var delimiter = make([]byte, 8)

// split parses a whole streamed response: prelude, eight NULs, body.
func split(t *testing.T, raw []byte) (prelude, string) {
	t.Helper()
	i := bytes.Index(raw, delimiter)
	if i < 0 {
		t.Fatalf("no eight-NUL delimiter in %q", raw)
	}
	var p prelude
	if err := json.Unmarshal(raw[:i], &p); err != nil {
		t.Fatalf("prelude %q: %v", raw[:i], err)
	}
	return p, string(raw[i+len(delimiter):])
}

func event(method, path, body string) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{
		Resource:   "/{proxy+}",
		Path:       path,
		HTTPMethod: method,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       body,
		RequestContext: events.APIGatewayProxyRequestContext{
			DomainName: "abc123.execute-api.us-east-1.amazonaws.com",
			Identity:   events.APIGatewayRequestIdentity{SourceIP: "203.0.113.7"},
		},
	}
}

// invoke runs the wrapped handler on the event and reads the whole response.
func invoke(t *testing.T, h http.Handler, ev events.APIGatewayProxyRequest) (prelude, string) {
	t.Helper()
	resp, err := lambdaedge.Wrap(h)(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	raw, err := io.ReadAll(resp)
	if err != nil {
		t.Fatalf("read the response: %v", err)
	}
	return split(t, raw)
}

func TestStatusHeadersBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_1")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Add("Vary", "Accept")
		w.Header().Add("Vary", "Authorization")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"ok":`))
		w.Write([]byte(`true}`))
		w.Header().Set("X-Too-Late", "1") // after the first write: not sent, as with net/http
	})
	got, body := invoke(t, h, event(http.MethodPost, "/api/v1/x", `{}`))
	want := prelude{
		StatusCode: http.StatusCreated,
		Headers:    map[string]string{"Content-Type": "application/json", "X-Request-Id": "req_1"},
		MultiValueHeaders: map[string][]string{
			"Set-Cookie": {"a=1", "b=2"},
			"Vary":       {"Accept", "Authorization"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prelude (-want +got):\n%s", diff)
	}
	if body != `{"ok":true}` {
		t.Errorf("body %q", body)
	}
}

func TestEmptyResponse(t *testing.T) {
	got, body := invoke(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), event(http.MethodGet, "/", ""))
	if diff := cmp.Diff(prelude{StatusCode: 200}, got); diff != "" || body != "" {
		t.Errorf("prelude (-want +got):\n%s\nbody %q", diff, body)
	}
}

func TestResponseSemantics(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		handler  http.HandlerFunc
		status   int
		headers  map[string]string
		body     string
		writeErr error
	}{
		{
			name:    "content type sniffed",
			method:  http.MethodGet,
			handler: func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html><body>hi</body></html>")) },
			status:  200,
			headers: map[string]string{"Content-Type": "text/html; charset=utf-8"},
			body:    "<html><body>hi</body></html>",
		},
		{
			name:   "HEAD drops the body",
			method: http.MethodHead,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.Write([]byte("not sent"))
			},
			status:  200,
			headers: map[string]string{"Content-Type": "text/plain"},
		},
		{
			name:   "204 has no body",
			method: http.MethodDelete,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNoContent)
				if _, err := w.Write([]byte("x")); !errors.Is(err, http.ErrBodyNotAllowed) {
					panic("Write after 204 did not fail with ErrBodyNotAllowed")
				}
			},
			status: 204,
		},
		{
			name:   "an informational status is skipped, the first final one counts",
			method: http.MethodGet,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusEarlyHints)
				w.WriteHeader(http.StatusAccepted)
				w.WriteHeader(http.StatusTeapot)
			},
			status: 202,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, body := invoke(t, tt.handler, event(tt.method, "/", ""))
			if got.StatusCode != tt.status || body != tt.body {
				t.Errorf("got %d %q, want %d %q", got.StatusCode, body, tt.status, tt.body)
			}
			if diff := cmp.Diff(tt.headers, got.Headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

// seen is what a handler saw of its request.
type seen struct {
	Method, Path, RawQuery, Host, RemoteAddr, RequestURI string
	Header                                               http.Header
	Body                                                 string
	ContentLength                                        int64
}

func TestRequestConversion(t *testing.T) {
	binary := []byte{0, 1, 2, 0xff, 'h', 'i'}
	tests := []struct {
		name  string
		event func() events.APIGatewayProxyRequest
		want  seen
	}{
		{
			name: "plain body and single-value headers",
			event: func() events.APIGatewayProxyRequest {
				ev := event(http.MethodPost, "/api/v1/chat/completions", `{"model":"demo/chat"}`)
				ev.Headers["Authorization"] = "Bearer sk-demo"
				ev.Headers["Host"] = "api.example.com"
				return ev
			},
			want: seen{
				Method: "POST", Path: "/api/v1/chat/completions", Host: "api.example.com",
				RemoteAddr: "203.0.113.7:0", RequestURI: "/api/v1/chat/completions",
				Header:        http.Header{"Authorization": {"Bearer sk-demo"}, "Content-Type": {"application/json"}},
				Body:          `{"model":"demo/chat"}`,
				ContentLength: int64(len(`{"model":"demo/chat"}`)),
			},
		},
		{
			name: "base64 body",
			event: func() events.APIGatewayProxyRequest {
				ev := event(http.MethodPut, "/blob", base64.StdEncoding.EncodeToString(binary))
				ev.IsBase64Encoded = true
				return ev
			},
			want: seen{
				Method: "PUT", Path: "/blob", Host: "abc123.execute-api.us-east-1.amazonaws.com",
				RemoteAddr: "203.0.113.7:0", RequestURI: "/blob",
				Header: http.Header{"Content-Type": {"application/json"}},
				Body:   string(binary), ContentLength: int64(len(binary)),
			},
		},
		{
			name: "multi-value headers win over single-value ones",
			event: func() events.APIGatewayProxyRequest {
				ev := event(http.MethodGet, "/api/v1/models", "")
				ev.Headers = map[string]string{"Accept": "b", "X-Forwarded-For": "198.51.100.1, 203.0.113.7"}
				ev.MultiValueHeaders = map[string][]string{
					"Accept":          {"a", "b"},
					"X-Forwarded-For": {"198.51.100.1, 203.0.113.7"},
				}
				return ev
			},
			want: seen{
				Method: "GET", Path: "/api/v1/models", Host: "abc123.execute-api.us-east-1.amazonaws.com",
				RemoteAddr: "203.0.113.7:0", RequestURI: "/api/v1/models",
				Header: http.Header{"Accept": {"a", "b"}, "X-Forwarded-For": {"198.51.100.1, 203.0.113.7"}},
			},
		},
		{
			name: "multi-value query, encoded in key order",
			event: func() events.APIGatewayProxyRequest {
				ev := event(http.MethodGet, "/search", "")
				ev.QueryStringParameters = map[string]string{"z": "2", "a": "x y"}
				ev.MultiValueQueryStringParameters = map[string][]string{"z": {"1", "2"}, "a": {"x y"}, "é": {"&"}}
				return ev
			},
			want: seen{
				Method: "GET", Path: "/search", RawQuery: "a=x+y&z=1&z=2&%C3%A9=%26",
				Host: "abc123.execute-api.us-east-1.amazonaws.com", RemoteAddr: "203.0.113.7:0",
				RequestURI: "/search?a=x+y&z=1&z=2&%C3%A9=%26",
				Header:     http.Header{"Content-Type": {"application/json"}},
			},
		},
		{
			name: "single-value query only",
			event: func() events.APIGatewayProxyRequest {
				ev := event(http.MethodGet, "/search", "")
				ev.QueryStringParameters = map[string]string{"q": "bee", "limit": "5"}
				return ev
			},
			want: seen{
				Method: "GET", Path: "/search", RawQuery: "limit=5&q=bee",
				Host: "abc123.execute-api.us-east-1.amazonaws.com", RemoteAddr: "203.0.113.7:0",
				RequestURI: "/search?limit=5&q=bee",
				Header:     http.Header{"Content-Type": {"application/json"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got seen
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					t.Error(err)
				}
				got = seen{
					Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Host: r.Host,
					RemoteAddr: r.RemoteAddr, RequestURI: r.RequestURI, Header: r.Header,
					Body: string(b), ContentLength: r.ContentLength,
				}
			})
			invoke(t, h, tt.event())
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestContext(t *testing.T) {
	lc := &lambdacontext.LambdaContext{AwsRequestID: "inv-1"}
	ctx := lambdacontext.NewContext(context.Background(), lc)
	ev := event(http.MethodGet, "/", "")
	ev.RequestContext.RequestID = "apigw-1"
	var gotLC *lambdacontext.LambdaContext
	var gotGW events.APIGatewayProxyRequestContext
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotLC, _ = lambdacontext.FromContext(r.Context())
		gotGW, _ = core.GetAPIGatewayContextFromContext(r.Context())
	})
	resp, err := lambdaedge.Wrap(h)(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp)
	resp.Close()
	if gotLC == nil || gotLC.AwsRequestID != "inv-1" || gotGW.RequestID != "apigw-1" {
		t.Errorf("the request's context carries lambda context %+v, API Gateway context %+v", gotLC, gotGW)
	}
}

func TestBadEvent(t *testing.T) {
	ev := event(http.MethodPost, "/", "not base64!")
	ev.IsBase64Encoded = true
	called := false
	got, body := invoke(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }), ev)
	if called || got.StatusCode != http.StatusBadRequest || body != "400 Bad Request" {
		t.Errorf("called %v, %d %q", called, got.StatusCode, body)
	}
}

// TestStreamsIncrementally: what the handler flushed can be read while the
// handler still runs.
func TestStreamsIncrementally(t *testing.T) {
	release := make(chan struct{})
	finished := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(finished)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: one\n\n"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			t.Error("the first event was not read within 10s")
		}
		w.Write([]byte("data: two\n\n"))
	})
	resp, err := lambdaedge.Wrap(h)(context.Background(), event(http.MethodPost, "/", "{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "text/event-stream" {
		t.Fatalf("head %d %v", resp.StatusCode, resp.Headers)
	}
	br := bufio.NewReader(resp)
	if _, err := br.ReadBytes(0); err != nil { // into the delimiter
		t.Fatal(err)
	}
	for range 7 {
		if b, err := br.ReadByte(); err != nil || b != 0 {
			t.Fatalf("delimiter: %v %v", b, err)
		}
	}
	first := make([]byte, len("data: one\n\n"))
	if _, err := io.ReadFull(br, first); err != nil || string(first) != "data: one\n\n" {
		t.Fatalf("first event %q, %v", first, err)
	}
	select {
	case <-finished:
		t.Fatal("the handler finished before its first event was read")
	default:
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "data: two\n\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	<-finished
}

// TestStreamsWithPauses: a handler that writes, flushes, sleeps and writes
// again; each event arrives about when it was written, not at the end.
func TestStreamsWithPauses(t *testing.T) {
	const pause = 150 * time.Millisecond
	handlerEnd := make(chan time.Duration, 1)
	start := time.Now()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			if i > 0 {
				time.Sleep(pause)
			}
			w.Write([]byte("data: x\n\n"))
			w.(http.Flusher).Flush()
		}
		handlerEnd <- time.Since(start)
	})
	resp, err := lambdaedge.Wrap(h)(context.Background(), event(http.MethodPost, "/", "{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	wrapReturned := time.Since(start)
	var arrivals []time.Duration
	buf := make([]byte, 64)
	var got strings.Builder
	for {
		n, err := resp.Read(buf)
		if n > 0 && strings.HasSuffix(string(buf[:n]), "\n\n") {
			arrivals = append(arrivals, time.Since(start))
		}
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if end := <-handlerEnd; wrapReturned >= end {
		t.Errorf("Wrap returned at %v, after the handler ended at %v: it waited for the body", wrapReturned, end)
	}
	if len(arrivals) != 3 {
		t.Fatalf("events arrived at %v; stream %q", arrivals, got.String())
	}
	// Buffered, the three would arrive together at the end.
	if arrivals[2]-arrivals[0] < pause {
		t.Errorf("events arrived at %v, want them about %v apart", arrivals, pause)
	}
}

func captureLogs(t *testing.T) *proc.SyncBuffer {
	buf := &proc.SyncBuffer{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return buf
}

func TestPanicBeforeWrite(t *testing.T) {
	logs := captureLogs(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_2")
		w.Header().Set("Content-Length", "99")
		panic("boom")
	})
	got, body := invoke(t, h, event(http.MethodGet, "/", ""))
	want := prelude{
		StatusCode: 500,
		Headers: map[string]string{
			"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff", "X-Request-Id": "req_2",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" || body != "Internal Server Error\n" {
		t.Errorf("prelude (-want +got):\n%s\nbody %q", diff, body)
	}
	if !strings.Contains(logs.String(), "boom") {
		t.Errorf("the panic was not logged: %s", logs.String())
	}
}

func TestPanicAfterWrite(t *testing.T) {
	captureLogs(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		panic("boom")
	})
	resp, err := lambdaedge.Wrap(h)(context.Background(), event(http.MethodGet, "/", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	raw, err := io.ReadAll(resp)
	if err == nil {
		t.Fatal("the stream of a handler that panicked ended without an error")
	}
	if _, body := split(t, raw); body != "partial" {
		t.Errorf("body %q", body)
	}
}

// TestPanicThroughRuntime: a panicking handler is a 500 through the lambda
// package's own handler machinery, and the process lives on.
func TestPanicThroughRuntime(t *testing.T) {
	captureLogs(t)
	h := lambda.NewHandler(lambdaedge.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })))
	payload, _ := json.Marshal(event(http.MethodGet, "/", ""))
	out, err := h.Invoke(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := split(t, out); got.StatusCode != 500 {
		t.Errorf("status %d", got.StatusCode)
	}
}

// TestThroughRuntime: the lambda package sends the response as a stream in
// the integration format, not as JSON.
func TestThroughRuntime(t *testing.T) {
	h := lambda.NewHandler(lambdaedge.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello "+r.URL.Query().Get("name"))
	})))
	ev := event(http.MethodGet, "/hi", "")
	ev.QueryStringParameters = map[string]string{"name": "bee"}
	payload, _ := json.Marshal(ev)
	out, err := h.Invoke(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"statusCode":200,"headers":{"Content-Type":"text/plain"}}` + string(delimiter) + "hello bee"
	if string(out) != want {
		t.Errorf("the runtime sends\n%q\nwant\n%q", out, want)
	}
	if ct := (&events.APIGatewayProxyStreamingResponse{}).ContentType(); ct != "application/vnd.awslambda.http-integration-response" {
		t.Errorf("content type %q", ct)
	}
}

// TestContextCancelled: when the invocation's context ends (its deadline),
// the handler's request context ends too, and the stream ends when the
// handler returns.
func TestContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handlerErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("started"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			handlerErr <- r.Context().Err()
		case <-time.After(10 * time.Second):
			handlerErr <- errors.New("the request's context was not cancelled")
		}
	})
	resp, err := lambdaedge.Wrap(h)(ctx, event(http.MethodGet, "/", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	br := bufio.NewReader(resp)
	if _, err := br.ReadString('d'); err != nil { // through "started"
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(br); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
	if err := <-handlerErr; !errors.Is(err, context.Canceled) {
		t.Errorf("handler saw %v", err)
	}
}

// TestCloseStopsHandler: the runtime closes the response before its end
// (its connection to the Runtime API failed): the handler's writes fail, its
// context ends, and Close returns only once the handler has returned.
func TestCloseStopsHandler(t *testing.T) {
	var (
		returned   bool
		writeErr   error
		contextErr error
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { returned = true }()
		rc := http.NewResponseController(w)
		for {
			if _, err := w.Write([]byte("data: tick\n\n")); err != nil {
				writeErr = err
				break
			}
			if err := rc.Flush(); err != nil {
				writeErr = err
				break
			}
		}
		<-r.Context().Done()
		contextErr = r.Context().Err()
		time.Sleep(50 * time.Millisecond) // Close must wait for this
	})
	resp, err := lambdaedge.Wrap(h)(context.Background(), event(http.MethodGet, "/", ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Read(make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	resp.Close()
	if !returned { // no race: Close waited for the handler
		t.Fatal("Close returned before the handler did")
	}
	if writeErr == nil || !errors.Is(contextErr, context.Canceled) {
		t.Errorf("write error %v, context error %v", writeErr, contextErr)
	}
	resp.Close() // a second Close is harmless
}
