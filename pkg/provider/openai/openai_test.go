package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	upstreamhttp "github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		upstreamhttp.HTTPClient(nil).CloseIdleConnections()
		if err := checkNoLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// checkNoLeaks waits a little for the goroutines of HTTP connections, test
// servers and this package to end, and reports those that do not.
func checkNoLeaks() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i == 0 {
				continue // this goroutine
			}
			if strings.Contains(g, "net/http.") || strings.Contains(g, "httptest.") || strings.Contains(g, "provider/openai.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leaked goroutines:\n\n%s", strings.Join(leaked, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const testBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`

func testRequest() *llm.UpstreamRequest {
	return &llm.UpstreamRequest{Model: "gpt-4o-mini", Body: []byte(testBody)}
}

// upstream starts a loopback server; any handler blocked on release or on
// its request's context is let go before the server closes.
func upstream(t testing.TB, h http.HandlerFunc) (srv *httptest.Server, release chan struct{}) {
	t.Helper()
	srv = httptest.NewServer(h)
	release = make(chan struct{})
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first
	return srv, release
}

func client(srv *httptest.Server, key string) *Client {
	return New("test-upstream", srv.URL+"/v1", key, nil)
}

func chunkJSON(content string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`, content)
}

const (
	finishChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	usageChunk  = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
)

// sseHandler answers 200 with body as an event stream.
func sseHandler(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}
}

func events(payloads ...string) string {
	var b strings.Builder
	for _, p := range payloads {
		b.WriteString("data: " + p + "\n\n")
	}
	return b.String()
}

// collect reads a stream to its end and closes it.
func collect(t *testing.T, s llm.ChunkStream) ([]string, error) {
	t.Helper()
	defer s.Close()
	var raws []string
	for {
		c, err := s.Next()
		if err != nil {
			return raws, err
		}
		raws = append(raws, string(c.Raw))
	}
}

func mustStream(t *testing.T, c *Client, ctx context.Context) llm.ChunkStream {
	t.Helper()
	s, err := c.ChatStream(ctx, testRequest())
	if err != nil {
		t.Fatalf("ChatStream: %v", err)
	}
	return s
}

func asProviderError(t *testing.T, err error) *llm.ProviderError {
	t.Helper()
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *llm.ProviderError", err, err)
	}
	return pe
}

func TestRequest(t *testing.T) {
	for _, key := range []string{"sk-test-123", ""} {
		t.Run(fmt.Sprintf("key=%q", key), func(t *testing.T) {
			type seen struct {
				method, path, contentType, accept string
				auth                              []string
				body                              string
			}
			got := make(chan seen, 1)
			srv, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got <- seen{r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Accept"), r.Header.Values("Authorization"), string(body)}
				sseHandler(events("[DONE]"))(w, r)
			})
			s := mustStream(t, client(srv, key), context.Background())
			if _, err := collect(t, s); err != io.EOF {
				t.Fatalf("stream ended with %v, want io.EOF", err)
			}
			want := seen{method: "POST", path: "/v1/chat/completions", contentType: "application/json", accept: "text/event-stream", body: testBody}
			if key != "" {
				want.auth = []string{"Bearer " + key}
			}
			if diff := cmp.Diff(want, <-got, cmp.AllowUnexported(seen{})); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestName(t *testing.T) {
	if got := New("primary", "http://127.0.0.1:1/v1", "", nil).Name(); got != "primary" {
		t.Errorf("Name() = %q", got)
	}
}

func TestStream(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []string
		wantErr error
	}{
		{
			name:    "normal",
			body:    events(chunkJSON("Hello"), chunkJSON(" world"), finishChunk, usageChunk, "[DONE]"),
			want:    []string{chunkJSON("Hello"), chunkJSON(" world"), finishChunk, usageChunk},
			wantErr: io.EOF,
		},
		{
			name: "comments and CRLF",
			body: ": OPENROUTER PROCESSING\r\n\r\ndata: " + chunkJSON("a") + "\r\n\r\n: keep-alive\r\n\r\n" +
				"data: " + finishChunk + "\r\n\r\ndata: [DONE]\r\n\r\n",
			want:    []string{chunkJSON("a"), finishChunk},
			wantErr: io.EOF,
		},
		{
			name:    "DONE ends the stream",
			body:    events(chunkJSON("a"), "[DONE]", chunkJSON("after")),
			want:    []string{chunkJSON("a")},
			wantErr: io.EOF,
		},
		{
			name:    "empty events skipped",
			body:    "data:\n\n" + events(chunkJSON("a"), "[DONE]"),
			want:    []string{chunkJSON("a")},
			wantErr: io.EOF,
		},
		{
			name:    "cut without DONE",
			body:    events(chunkJSON("a"), finishChunk),
			want:    []string{chunkJSON("a"), finishChunk},
			wantErr: llm.ErrStreamCut,
		},
		{
			name:    "cut mid-event",
			body:    events(chunkJSON("a")) + "data: " + chunkJSON("b"),
			want:    []string{chunkJSON("a")},
			wantErr: llm.ErrStreamCut,
		},
		{
			name:    "DONE without a blank line",
			body:    events(chunkJSON("a")) + "data: [DONE]\n",
			want:    []string{chunkJSON("a")},
			wantErr: llm.ErrStreamCut,
		},
		{
			name:    "empty body",
			body:    "",
			wantErr: llm.ErrStreamCut,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := upstream(t, sseHandler(tt.body))
			s := mustStream(t, client(srv, ""), context.Background())
			got, err := collect(t, s)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			if err != tt.wantErr {
				t.Errorf("stream ended with %v, want %v", err, tt.wantErr)
			}
			// Sticky, and Close (done by collect) does not change it.
			if _, err2 := s.Next(); err2 != err {
				t.Errorf("Next after the end = %v, want %v again", err2, err)
			}
		})
	}
}

func TestChunkFields(t *testing.T) {
	srv, _ := upstream(t, sseHandler(events(chunkJSON("Hi"), finishChunk, usageChunk, "[DONE]")))
	s := mustStream(t, client(srv, ""), context.Background())
	defer s.Close()
	c, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if !c.Output || c.ID != "chatcmpl-1" || c.Model != "gpt-4o-mini" || c.Text != "Hi" || !c.HasChoices {
		t.Errorf("first chunk = %+v", c)
	}
	if c, _ = s.Next(); c.FinishReason != "stop" || c.Output {
		t.Errorf("finish chunk = %+v", c)
	}
	if c, _ = s.Next(); c.HasChoices || !reflect.DeepEqual(c.Usage, &llm.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}) {
		t.Errorf("usage chunk = %+v", c)
	}
}

func TestStreamFailures(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		wantChunks  int
		wantMessage string
	}{
		{
			name:        "error event",
			body:        events(chunkJSON("a"), `{"error":{"message":"model overloaded","code":502}}`),
			wantChunks:  1,
			wantMessage: "model overloaded",
		},
		{
			name:        "error event with event field",
			body:        "event: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\n",
			wantMessage: "boom",
		},
		{
			name:        "error without message",
			body:        events(`{"error":{"code":500}}`),
			wantMessage: "unspecified upstream error",
		},
		{
			name:        "malformed chunk",
			body:        events(chunkJSON("a"), `{"id":`),
			wantChunks:  1,
			wantMessage: "malformed chunk",
		},
		{
			name:        "not an object",
			body:        events(`"just a string"`),
			wantMessage: "malformed chunk",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := upstream(t, sseHandler(tt.body))
			s := mustStream(t, client(srv, ""), context.Background())
			got, err := collect(t, s)
			if len(got) != tt.wantChunks {
				t.Errorf("%d chunks before the error, want %d", len(got), tt.wantChunks)
			}
			pe := asProviderError(t, err)
			if pe.Class != llm.FailTransient || pe.Message != tt.wantMessage || pe.Err == nil {
				t.Errorf("error = %+v, want transient %q with Err set", pe, tt.wantMessage)
			}
			if _, err2 := s.Next(); err2 != err {
				t.Errorf("Next after the error = %v, want the same error", err2)
			}
		})
	}
}

func TestEventTooLarge(t *testing.T) {
	huge := strings.Repeat("a", upstreamhttp.MaxEventBytes+1)
	srv, _ := upstream(t, sseHandler("data: "+huge+"\n\n"))
	s := mustStream(t, client(srv, ""), context.Background())
	_, err := collect(t, s)
	if pe := asProviderError(t, err); pe.Class != llm.FailTransient {
		t.Errorf("error = %v, want transient", err)
	}
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   llm.ProviderError
	}{
		{
			name:   "429 retry-after seconds",
			status: 429, header: map[string]string{"Retry-After": "7"},
			want: llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "upstream status 429", RetryAfter: 7 * time.Second},
		},
		{
			name:   "429 retry-after-ms wins",
			status: 429, header: map[string]string{"Retry-After-Ms": "1500", "Retry-After": "2"},
			want: llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "upstream status 429", RetryAfter: 1500 * time.Millisecond},
		},
		{
			name:   "429 capped",
			status: 429, header: map[string]string{"Retry-After": "3600"},
			want: llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "upstream status 429", RetryAfter: 60 * time.Second},
		},
		{
			name:   "429 no hint",
			status: 429,
			body:   `{"error":{"message":"Rate limit reached"}}`,
			want:   llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "upstream status 429"},
		},
		{
			name:   "400 envelope",
			status: 400,
			body:   `{"error":{"message":"Invalid value for 'temperature': must be <= 2.","type":"invalid_request_error","param":"temperature","code":null}}`,
			want:   llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "Invalid value for 'temperature': must be <= 2."},
		},
		{
			name:   "400 error as a string",
			status: 400,
			body:   `{"error":"context length exceeded"}`,
			want:   llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "context length exceeded"},
		},
		{
			name:   "400 plain text",
			status: 400,
			body:   "bad\x00 request\r\n\tfrom\x1b[31m upstream\n",
			want:   llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "bad request   from[31m upstream"},
		},
		{
			name:   "400 long body",
			status: 400,
			body:   strings.Repeat("é", 300), // 600 bytes, cut at 512
			want:   llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: strings.Repeat("é", 256)},
		},
		{
			name:   "400 empty",
			status: 400,
			want:   llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "status 400"},
		},
		{
			name:   "400 envelope without message",
			status: 400,
			body:   `{"error":{"code":"x"}}`,
			want:   llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: `{"error":{"code":"x"}}`},
		},
		{name: "401", status: 401, body: `{"error":{"message":"Incorrect API key provided"}}`, want: llm.ProviderError{Class: llm.FailConfig, Status: 401, Message: "upstream status 401"}},
		{name: "403", status: 403, want: llm.ProviderError{Class: llm.FailConfig, Status: 403, Message: "upstream status 403"}},
		{name: "404", status: 404, want: llm.ProviderError{Class: llm.FailConfig, Status: 404, Message: "upstream status 404"}},
		{name: "404 model_not_found", status: 404, body: `{"error":{"message":"The model ` + "`m`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			want: llm.ProviderError{Class: llm.FailConfig, Status: 404, Message: "upstream status 404"}},
		{name: "404 a file the request named", status: 404, body: `{"error":{"message":"File with id 'file-abc123' not found.","type":"invalid_request_error","param":"messages[0].content[1].file.file_id","code":null}}`,
			want: llm.ProviderError{Class: llm.FailRejected, Status: 404, Message: "File with id 'file-abc123' not found."}},
		{name: "408", status: 408, want: llm.ProviderError{Class: llm.FailTransient, Status: 408, Message: "upstream status 408"}},
		{name: "409", status: 409, want: llm.ProviderError{Class: llm.FailTransient, Status: 409, Message: "upstream status 409"}},
		{name: "422", status: 422, want: llm.ProviderError{Class: llm.FailTransient, Status: 422, Message: "upstream status 422"}},
		{name: "500", status: 500, body: "oops", want: llm.ProviderError{Class: llm.FailTransient, Status: 500, Message: "upstream status 500"}},
		{name: "502", status: 502, want: llm.ProviderError{Class: llm.FailTransient, Status: 502, Message: "upstream status 502"}},
		{name: "503", status: 503, header: map[string]string{"Retry-After": "5"}, want: llm.ProviderError{Class: llm.FailTransient, Status: 503, Message: "upstream status 503"}},
		{name: "204", status: 204, want: llm.ProviderError{Class: llm.FailTransient, Status: 204, Message: "upstream status 204"}},
		{name: "307 not followed", status: 307, header: map[string]string{"Location": "/v1/elsewhere"}, want: llm.ProviderError{Class: llm.FailTransient, Status: 307, Message: "upstream status 307"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			s, err := client(srv, "k").ChatStream(context.Background(), testRequest())
			if s != nil {
				s.Close()
				t.Fatal("got a stream for an error status")
			}
			pe := asProviderError(t, err)
			if diff := cmp.Diff(tt.want, *pe); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("upstream got %d requests, want exactly 1", n)
			}
		})
	}
}

// TestOneAttempt checks that a failure is never retried: not a 5xx, not a
// connection closed before the answer, and not through a client of the
// caller's own.
func TestOneAttempt(t *testing.T) {
	own := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(own.CloseIdleConnections)
	for _, hc := range []*http.Client{nil, own} {
		for _, status := range []int{500, 502, 503, 504} {
			var calls atomic.Int32
			srv, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.WriteHeader(status)
			})
			_, err := New("u", srv.URL+"/v1", "", hc).ChatStream(context.Background(), testRequest())
			if pe := asProviderError(t, err); pe.Status != status {
				t.Errorf("status %d: error %v", status, err)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("status %d: upstream got %d requests, want 1", status, n)
			}
		}
		// A connection closed after the request was read, before any answer.
		var calls atomic.Int32
		url := rawUpstream(t, func(conn net.Conn, _ *http.Request) { calls.Add(1) })
		_, err := New("u", url, "", hc).ChatStream(context.Background(), testRequest())
		if pe := asProviderError(t, err); pe.Class != llm.FailTransient || pe.Message != "connection failed" || pe.Status != 0 {
			t.Errorf("EOF before headers: error %+v, want transient connection failed", pe)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("EOF before headers: upstream got %d requests, want 1", n)
		}
	}
}

// rawUpstream serves each connection with serve, after reading one request,
// then closes it. It returns the base URL.
func rawUpstream(t *testing.T, serve func(net.Conn, *http.Request)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				serve(conn, req)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String() + "/v1"
}

const chunkedHeader = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

func httpChunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

func TestCutMidBody(t *testing.T) {
	// The connection closes in the middle of an HTTP chunk: the body reads
	// io.ErrUnexpectedEOF, which is a cut stream too.
	url := rawUpstream(t, func(conn net.Conn, _ *http.Request) {
		io.WriteString(conn, chunkedHeader+httpChunk(events(chunkJSON("a")))+"40\r\ndata: {\"id\"")
	})
	s, err := New("u", url, "", nil).ChatStream(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, s)
	if len(got) != 1 || err != llm.ErrStreamCut {
		t.Errorf("got %d chunks and %v, want 1 and ErrStreamCut", len(got), err)
	}
}

func TestConnectionReset(t *testing.T) {
	url := rawUpstream(t, func(conn net.Conn, _ *http.Request) {
		io.WriteString(conn, chunkedHeader+httpChunk(events(chunkJSON("a"))))
		time.Sleep(50 * time.Millisecond) // let the client read the first chunk
		conn.(*net.TCPConn).SetLinger(0)  // close with RST
	})
	s, err := New("u", url, "", nil).ChatStream(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, s)
	if len(got) != 1 {
		t.Errorf("got %d chunks, want 1", len(got))
	}
	pe := asProviderError(t, err)
	if pe.Class != llm.FailTransient || !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("error = %v, want transient wrapping ECONNRESET", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = New("u", "http://"+addr+"/v1", "", nil).ChatStream(context.Background(), testRequest())
	pe := asProviderError(t, err)
	if pe.Class != llm.FailTransient || pe.Message != "connection failed" || pe.Err == nil || pe.Status != 0 {
		t.Errorf("error = %+v, want transient connection failed", pe)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %v does not wrap ECONNREFUSED", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v looks like a context error", err)
	}
}

func TestInvalidBaseURL(t *testing.T) {
	for _, base := range []string{"", "127.0.0.1:9101/v1", "ftp://host/v1", "http://[::1"} {
		_, err := New("u", base, "", nil).ChatStream(context.Background(), testRequest())
		if pe := asProviderError(t, err); pe.Class != llm.FailTransient {
			t.Errorf("base %q: error %v, want transient", base, err)
		}
	}
}

// hangingUpstream accepts requests and never answers until released.
func hangingUpstream(t *testing.T) (srv *httptest.Server, arrived chan struct{}) {
	arrived = make(chan struct{}, 1)
	var release chan struct{}
	srv, release = upstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	return srv, arrived
}

func assertContextError(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("error %v does not wrap %v", err, want)
	}
	var pe *llm.ProviderError
	if errors.As(err, &pe) {
		t.Errorf("error %v is a ProviderError; a context error must not be", err)
	}
}

func TestContextBeforeHeaders(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		srv, arrived := hangingUpstream(t)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-arrived
			cancel()
		}()
		s, err := client(srv, "").ChatStream(ctx, testRequest())
		if s != nil {
			s.Close()
		}
		assertContextError(t, err, context.Canceled)
	})
	t.Run("deadline", func(t *testing.T) {
		srv, _ := hangingUpstream(t)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := client(srv, "").ChatStream(ctx, testRequest())
		assertContextError(t, err, context.DeadlineExceeded)
	})
	t.Run("cause", func(t *testing.T) {
		srv, _ := hangingUpstream(t)
		errFirstToken := errors.New("first_token_timeout")
		ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, errFirstToken)
		defer cancel()
		_, err := client(srv, "").ChatStream(ctx, testRequest())
		assertContextError(t, err, context.DeadlineExceeded)
		if !errors.Is(err, errFirstToken) {
			t.Errorf("error %v does not wrap the context's cause", err)
		}
	})
	t.Run("already done", func(t *testing.T) {
		var calls atomic.Int32
		srv, _ := upstream(t, func(http.ResponseWriter, *http.Request) { calls.Add(1) })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := client(srv, "").ChatStream(ctx, testRequest())
		assertContextError(t, err, context.Canceled)
		if calls.Load() != 0 {
			t.Error("a request was sent with a done context")
		}
	})
}

// stallingUpstream sends one chunk and then nothing until released.
func stallingUpstream(t *testing.T) *httptest.Server {
	var release chan struct{}
	srv, release := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events(chunkJSON("first")))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	return srv
}

// nextWithin runs Next and fails the test if it does not return in time.
func nextWithin(t *testing.T, s llm.ChunkStream, d time.Duration) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Next()
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-time.After(d):
		s.Close() // let the goroutine end
		<-errc
		t.Fatalf("Next still blocked after %v", d)
		return nil
	}
}

func TestContextMidStream(t *testing.T) {
	srv := stallingUpstream(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := mustStream(t, client(srv, ""), ctx)
	defer s.Close()
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(50*time.Millisecond, cancel)
	defer timer.Stop()
	err := nextWithin(t, s, 5*time.Second)
	assertContextError(t, err, context.Canceled)
	if _, err2 := s.Next(); err2 != err {
		t.Errorf("Next after the error = %v, want the same error", err2)
	}
}

func TestCloseUnblocksNext(t *testing.T) {
	srv := stallingUpstream(t)
	s := mustStream(t, client(srv, ""), context.Background())
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(50*time.Millisecond, func() { s.Close() })
	defer timer.Stop()
	if err := nextWithin(t, s, 5*time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Next interrupted by Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestCloseConcurrent(t *testing.T) {
	srv := stallingUpstream(t)
	s := mustStream(t, client(srv, ""), context.Background())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { s.Close() })
	}
	wg.Go(func() {
		for {
			if _, err := s.Next(); err != nil {
				return
			}
		}
	})
	wg.Wait()
	if _, err := s.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
}

func TestJSONFallback(t *testing.T) {
	completion := `{"id":"chatcmpl-9","object":"chat.completion","created":1735689600,"model":"gpt-4o-2024-08-06",` +
		`"choices":[` +
		`{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"},` +
		`{"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,"completion_tokens_details":{"reasoning_tokens":0}},` +
		`"service_tier":"default","system_fingerprint":"fp_abc"}`
	want := []string{
		`{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-2024-08-06",` +
			`"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"index":1,"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],` +
			`"service_tier":"default","system_fingerprint":"fp_abc"}`,
		`{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-2024-08-06",` +
			`"choices":[{"index":1,"delta":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],` +
			`"service_tier":"default","system_fingerprint":"fp_abc"}`,
		`{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-2024-08-06",` +
			`"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,"completion_tokens_details":{"reasoning_tokens":0}},` +
			`"service_tier":"default","system_fingerprint":"fp_abc"}`,
	}
	srv, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, completion)
	})
	s := mustStream(t, client(srv, ""), context.Background())
	defer s.Close()
	var got []llm.Chunk
	for {
		c, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		got = append(got, c)
	}
	var raws []string
	for _, c := range got {
		raws = append(raws, string(c.Raw))
	}
	if diff := cmp.Diff(want, raws); diff != "" {
		t.Fatalf("chunks (-want +got):\n%s", diff)
	}
	if c := got[0]; !c.Output || c.FinishReason != "tool_calls" || !c.HasChoices {
		t.Errorf("tool call chunk = %+v", c)
	}
	if c := got[1]; !c.Output || c.Text != "Hello there" || c.FinishReason != "stop" {
		t.Errorf("text chunk = %+v", c)
	}
	if c := got[2]; c.HasChoices || c.Usage == nil || c.Output {
		t.Errorf("usage chunk = %+v", c)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Errorf("Next after the end = %v, want io.EOF", err)
	}
}

func TestJSONFallbackFailures(t *testing.T) {
	tests := []struct {
		name, body, wantMessage string
	}{
		{"malformed", `{"id":"x","choices":[`, "malformed upstream answer"},
		{"not an object", `[1,2]`, "malformed upstream answer"},
		{"trailing data", `{"choices":[]} {}`, "malformed upstream answer"},
		{"choices not a list", `{"choices":{"a":1}}`, "malformed upstream answer"},
		{"choice not an object", `{"choices":[1]}`, "malformed upstream answer"},
		{"message not an object", `{"choices":[{"message":"hi"}]}`, "malformed upstream answer"},
		{"tool calls not objects", `{"choices":[{"message":{"tool_calls":[1]}}]}`, "malformed upstream answer"},
		{"content not a string", `{"choices":[{"message":{"content":[{"type":"text","text":"hi"}]}}]}`, "malformed upstream answer"},
		{"error object", `{"error":{"message":"upstream exploded"}}`, "upstream exploded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, tt.body)
			})
			s := mustStream(t, client(srv, ""), context.Background())
			got, err := collect(t, s)
			if len(got) != 0 {
				t.Errorf("got chunks %q", got)
			}
			if pe := asProviderError(t, err); pe.Class != llm.FailTransient || pe.Message != tt.wantMessage {
				t.Errorf("error = %+v, want transient %q", pe, tt.wantMessage)
			}
		})
	}
	t.Run("empty choices no usage", func(t *testing.T) {
		srv, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"x","choices":[]}`)
		})
		got, err := collect(t, mustStream(t, client(srv, ""), context.Background()))
		if len(got) != 0 || err != io.EOF {
			t.Errorf("got %q, %v; want nothing and io.EOF", got, err)
		}
	})
}

func BenchmarkChatStream(b *testing.B) {
	var payloads []string
	payloads = append(payloads, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}]}`)
	for i := range 17 {
		payloads = append(payloads, chunkJSON(fmt.Sprintf(" word%d", i)))
	}
	payloads = append(payloads, finishChunk, usageChunk, "[DONE]")
	body := events(payloads...)
	srv, _ := upstream(b, sseHandler(body))
	c := client(srv, "sk-bench")
	req := testRequest()
	ctx := context.Background()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := c.ChatStream(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := s.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		s.Close()
		if n != 20 {
			b.Fatalf("%d chunks, want 20", n)
		}
	}
}

// FuzzCompletionChunks checks that any 200 JSON answer either fails as a
// transient ProviderError or becomes chunks that are valid JSON objects which
// llm.ParseChunk reads.
func FuzzCompletionChunks(f *testing.F) {
	f.Add(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`)
	f.Add(`{"choices":[{"message":null}],"usage":null}`)
	f.Add(`{"error":{"message":"x"}}`)
	f.Add(`{"\u0000key":1,"choices":[{"message":{"\n":2}}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		chunks, err := completionChunks([]byte(body))
		if err != nil {
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Class != llm.FailTransient {
				t.Fatalf("error %v is not a transient ProviderError", err)
			}
			return
		}
		for _, c := range chunks {
			if !json.Valid(c.Raw) {
				t.Fatalf("invalid chunk %q from %q", c.Raw, body)
			}
			if _, err := llm.ParseChunk(c.Raw); err != nil {
				t.Fatalf("chunk %q from %q: %v", c.Raw, body, err)
			}
		}
	})
}

// TestMaxTokensField: an upstream set to take max_tokens gets a request's
// max_completion_tokens under that name, the rest of the body unchanged;
// one that sets max_tokens itself, or the default setting, sends the body
// as it is.
func TestMaxTokensField(t *testing.T) {
	for _, tc := range []struct {
		field, body, want string
	}{
		{"max_tokens", `{"model":"m","max_completion_tokens":50,"stream":true}`, `{"model":"m","stream":true,"max_tokens":50}`},
		{"max_tokens", `{"model":"m","max_tokens":7,"max_completion_tokens":50}`, `{"model":"m","max_tokens":7,"max_completion_tokens":50}`},
		{"max_completion_tokens", `{"model":"m","max_completion_tokens":50}`, `{"model":"m","max_completion_tokens":50}`},
		{"", `{"model":"m","max_completion_tokens":50}`, `{"model":"m","max_completion_tokens":50}`},
	} {
		got := make(chan string, 1)
		srv, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			got <- string(body)
			sseHandler(events("[DONE]"))(w, r)
		})
		c := client(srv, "")
		c.SetMaxTokensField(tc.field)
		s, err := c.ChatStream(context.Background(), &llm.UpstreamRequest{Model: "m", Body: []byte(tc.body)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collect(t, s); err != io.EOF {
			t.Fatalf("stream ended with %v", err)
		}
		if g := <-got; g != tc.want {
			t.Errorf("field %q, body %s: upstream got %s, want %s", tc.field, tc.body, g, tc.want)
		}
	}
}
