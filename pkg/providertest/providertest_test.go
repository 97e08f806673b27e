package providertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	plainReq  = `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`
	streamReq = `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	usageReq  = `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
)

// newClient is a client with its own transport, so that no connection
// outlives the test.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func post(ctx context.Context, c *http.Client, s *Server, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	return c.Do(req)
}

// call posts body and reads the whole answer; any error fails the test.
func call(t *testing.T, c *http.Client, s *Server, body string) (*http.Response, string) {
	t.Helper()
	resp, err := post(context.Background(), c, s, body)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(b)
}

// chunkJSON is the wire form of one chat.completion.chunk of call n to model
// gpt-test; finish is the finish_reason JSON and usage, if not empty, the
// usage JSON.
func chunkJSON(n int, delta, finish, usage string) string {
	s := fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","choices":[{"index":0,"delta":%s,"finish_reason":%s}]`, n, delta, finish)
	if usage != "" {
		s += `,"usage":` + usage
	}
	return s + "}"
}

func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

// events splits an SSE body into its data payloads, checking the framing.
func events(t *testing.T, body string) []string {
	t.Helper()
	if body == "" {
		return nil
	}
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("body does not end with a blank line: %q", body)
	}
	var out []string
	for _, e := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(e, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", e)
		}
		out = append(out, data)
	}
	return out
}

// streamed is a stream's events, accumulated.
type streamed struct {
	text, refusal, finish string
	done                  bool
	usage                 map[string]any
}

func accumulate(t *testing.T, body string) streamed {
	t.Helper()
	var r streamed
	for _, e := range events(t, body) {
		if e == "[DONE]" {
			r.done = true
			continue
		}
		var c struct {
			Object  string
			Choices []struct {
				Delta struct {
					Content, Refusal string
				}
				FinishReason *string `json:"finish_reason"`
			}
			Usage map[string]any
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("event %q: object %q", e, c.Object)
		}
		for _, ch := range c.Choices {
			r.text += ch.Delta.Content
			r.refusal += ch.Delta.Refusal
			if ch.FinishReason != nil {
				r.finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			r.usage = c.Usage
		}
	}
	return r
}

func TestDefaultStreaming(t *testing.T) {
	s := New(t)
	resp, body := call(t, newClient(t), s, streamReq)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != "text/event-stream" || cc != "no-cache" {
		t.Errorf("Content-Type %q, Cache-Control %q", ct, cc)
	}
	want := sse(
		chunkJSON(1, `{"role":"assistant","content":""}`, "null", ""),
		chunkJSON(1, `{"content":"Hello"}`, "null", ""),
		chunkJSON(1, `{"content":" world"}`, "null", ""),
		chunkJSON(1, `{}`, `"stop"`, ""),
		"[DONE]",
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestStreamingIncludeUsage(t *testing.T) {
	s := New(t)
	_, body := call(t, newClient(t), s, usageReq)
	// As OpenAI does, every chunk but the last carries "usage": null.
	want := sse(
		chunkJSON(1, `{"role":"assistant","content":""}`, "null", "null"),
		chunkJSON(1, `{"content":"Hello"}`, "null", "null"),
		chunkJSON(1, `{"content":" world"}`, "null", "null"),
		chunkJSON(1, `{}`, `"stop"`, "null"),
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`,
		"[DONE]",
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestDefaultNonStreaming(t *testing.T) {
	s := New(t)
	for _, req := range []string{plainReq, `{"model":"gpt-test","stream":false}`} {
		resp, body := call(t, newClient(t), s, req)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		want := fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Hello world","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`, s.Calls())
		if diff := cmp.Diff(want, body); diff != "" {
			t.Errorf("body (-want +got):\n%s", diff)
		}
	}
}

// content is the message content of a non-streaming answer.
func content(t *testing.T, body string) string {
	t.Helper()
	var c struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("body %q: %v", body, err)
	}
	return c.Choices[0].Message.Content
}

func TestScriptThenDefault(t *testing.T) {
	s := New(t)
	c := newClient(t)
	s.Script(Response{Text: []string{"one"}}, Response{Text: []string{"two"}})
	s.Script(Response{Text: []string{"three"}})
	s.SetDefault(Response{Text: []string{"default"}})
	var got []string
	for range 5 {
		_, body := call(t, c, s, plainReq)
		got = append(got, content(t, body))
	}
	want := []string{"one", "two", "three", "default", "default"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
}

func TestSetHandler(t *testing.T) {
	s := New(t)
	c := newClient(t)
	s.Script(Response{Text: []string{"queued"}})
	var seen []int
	var mu sync.Mutex
	s.SetHandler(func(n int, req Request) Response {
		mu.Lock()
		seen = append(seen, n)
		mu.Unlock()
		if req.JSON["model"] != "gpt-test" {
			t.Errorf("handler got model %v", req.JSON["model"])
		}
		if n == 1 {
			return Response{Status: 500}
		}
		return Response{Text: []string{fmt.Sprint("call ", n)}}
	})
	if resp, _ := call(t, c, s, plainReq); resp.StatusCode != 500 {
		t.Errorf("call 1: status %d, want 500", resp.StatusCode)
	}
	if _, body := call(t, c, s, plainReq); content(t, body) != "call 2" {
		t.Errorf("call 2: %s", body)
	}
	s.SetHandler(nil) // back to the queue, which the handler left alone
	if _, body := call(t, c, s, plainReq); content(t, body) != "queued" {
		t.Errorf("call 3: %s", body)
	}
	if diff := cmp.Diff([]int{1, 2}, seen); diff != "" {
		t.Errorf("handler calls (-want +got):\n%s", diff)
	}
}

func TestCallsAndRequests(t *testing.T) {
	s := New(t)
	c := newClient(t)
	if n := s.Calls(); n != 0 {
		t.Fatalf("Calls() = %d before any call", n)
	}
	call(t, c, s, plainReq)
	call(t, c, s, "not json")

	// Other paths and methods are not calls.
	resp, err := c.Post(s.URL()+"/embeddings", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), `"type":"invalid_request_error"`) {
		t.Errorf("other path: %d %s", resp.StatusCode, b)
	}
	resp, err = c.Get(s.URL() + "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}

	if n := s.Calls(); n != 2 {
		t.Errorf("Calls() = %d, want 2", n)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization %q", got)
	}
	if string(reqs[0].Body) != plainReq || reqs[0].JSON["model"] != "gpt-test" {
		t.Errorf("request 1: %s %v", reqs[0].Body, reqs[0].JSON)
	}
	if string(reqs[1].Body) != "not json" || reqs[1].JSON != nil {
		t.Errorf("request 2: %q %v", reqs[1].Body, reqs[1].JSON)
	}

	// Requests returns copies.
	reqs[0].Header.Set("Authorization", "changed")
	reqs[0].Body[0] = 'X'
	reqs[0].JSON["model"] = "changed"
	again := s.Requests()[0]
	if again.Header.Get("Authorization") != "Bearer sk-test" || string(again.Body) != plainReq || again.JSON["model"] != "gpt-test" {
		t.Errorf("Requests() shares memory: %v %s %v", again.Header, again.Body, again.JSON)
	}
}

func TestErrorAnswers(t *testing.T) {
	s := New(t)
	c := newClient(t)
	s.Script(
		Response{Status: 429, Header: map[string]string{"retry-after": "2"}},
		Response{Status: 503, Body: "upstream overloaded", Header: map[string]string{"Content-Type": "text/plain"}},
		Response{Body: `{"choices":[`}, // a malformed 200
		Response{Status: 400},
	)

	resp, body := call(t, c, s, streamReq)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("429: status %d, headers %v", resp.StatusCode, resp.Header)
	}
	if want := `{"error":{"message":"scripted 429","type":"rate_limit_error","code":null,"param":null}}`; body != want {
		t.Errorf("429 body %s, want %s", body, want)
	}

	resp, body = call(t, c, s, streamReq)
	if resp.StatusCode != 503 || body != "upstream overloaded" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("503: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	resp, body = call(t, c, s, streamReq)
	if resp.StatusCode != 200 || body != `{"choices":[` {
		t.Errorf("malformed 200: %d %q", resp.StatusCode, body)
	}

	resp, body = call(t, c, s, plainReq)
	if want := `{"error":{"message":"scripted 400","type":"invalid_request_error","code":null,"param":null}}`; resp.StatusCode != 400 || body != want {
		t.Errorf("400: %d %s", resp.StatusCode, body)
	}
}

func TestHeaderDelay(t *testing.T) {
	s := New(t)
	c := newClient(t)

	s.Script(Response{HeaderDelay: 50 * time.Millisecond})
	start := time.Now()
	call(t, c, s, plainReq)
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("answered after %v, want at least 50ms", d)
	}

	// A client timeout ends the wait, on both sides. The timeout leaves
	// the server time to read the request (it counts a call once it has
	// read the body); an hour's delay is never waited out.
	s.Script(Response{HeaderDelay: time.Hour})
	c.Timeout = time.Second
	_, err := post(context.Background(), c, s, plainReq)
	var te interface{ Timeout() bool }
	if !errors.As(err, &te) || !te.Timeout() {
		t.Errorf("err = %v, want a timeout", err)
	}
	// Counted on arrival, not on answering: the call that was never
	// answered counts (its handler may still be on its way to the count).
	waitCalls(s, 2)
	if n := s.Calls(); n != 2 {
		t.Errorf("Calls() = %d, want 2: counted on arrival", n)
	}
	closesPromptly(t, s)
}

// closesPromptly checks that Close returns at once, which it does only when
// every handler has returned.
func closesPromptly(t *testing.T, s *Server) {
	t.Helper()
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
}

func TestHang(t *testing.T) {
	s := New(t)
	s.Script(Response{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := post(ctx, newClient(t), s, plainReq)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	closesPromptly(t, s)
}

// TestCloseWhileHung checks that Close does not wait for hung and stalled
// requests, and fails them.
func TestCloseWhileHung(t *testing.T) {
	s := New(t)
	c := newClient(t)
	s.Script(Response{Hang: true}, Response{Cut: &Cut{After: 1, How: CutStall}}, Response{HeaderDelay: time.Hour})
	errs := make(chan error, 3)
	for i, body := range []string{plainReq, streamReq, plainReq} {
		go func() {
			resp, err := post(context.Background(), c, s, body)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
		// One at a time, so that each gets its scripted answer.
		if !waitCalls(s, i+1) {
			t.Fatalf("call %d did not arrive", i+1)
		}
	}
	closesPromptly(t, s)
	s.Close() // twice is fine
	for range 3 {
		select {
		case err := <-errs:
			if err == nil {
				t.Error("a hung request succeeded")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a hung request did not fail on Close")
		}
	}
}

// waitCalls waits up to 10s for s to have received n calls.
func waitCalls(s *Server, n int) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if s.Calls() >= n {
			return true
		}
	}
	return false
}

func TestReset(t *testing.T) {
	s := New(t)
	s.Script(Response{Reset: true})
	resp, err := post(context.Background(), newClient(t), s, streamReq)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want a connection error", resp.StatusCode)
	}
	t.Logf("client error: %v", err)
	if n := s.Calls(); n != 1 {
		t.Errorf("Calls() = %d, want 1 (no retry)", n)
	}
	// The server goes on serving.
	if resp, _ := call(t, newClient(t), s, plainReq); resp.StatusCode != 200 {
		t.Errorf("after a reset: status %d", resp.StatusCode)
	}
}

// cutBody posts a streaming request answered with cut and returns what the
// client read and the error that ended the read.
func cutBody(t *testing.T, r Response, reqBody string) (string, error) {
	t.Helper()
	s := New(t)
	s.Script(r)
	resp, err := post(context.Background(), newClient(t), s, reqBody)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestCutClose(t *testing.T) {
	// The chunked body ends properly: the Go client sees a clean io.EOF
	// (ReadAll: nil error) and only the missing [DONE] tells.
	body, err := cutBody(t, Response{Cut: &Cut{After: 1, How: CutClose}}, streamReq)
	if err != nil {
		t.Fatalf("read error %v, want a clean end", err)
	}
	want := sse(
		chunkJSON(1, `{"role":"assistant","content":""}`, "null", ""),
		chunkJSON(1, `{"content":"Hello"}`, "null", ""),
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestCutCloseAfterAllContent(t *testing.T) {
	body, err := cutBody(t, Response{Cut: &Cut{After: 99, How: CutClose}}, usageReq)
	if err != nil {
		t.Fatal(err)
	}
	r := accumulate(t, body)
	if r.text != "Hello world" || r.finish != "" || r.done || r.usage != nil {
		t.Errorf("got %+v, want all text and nothing after", r)
	}
}

func TestCutReset(t *testing.T) {
	body, err := cutBody(t, Response{Cut: &Cut{After: 1, How: CutReset}}, streamReq)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read error %v, want a connection error", err)
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read error %v, want ECONNRESET", err)
	}
	// What was sent before the reset arrives before the error.
	if want := chunkJSON(1, `{"content":"Hello"}`, "null", ""); !strings.Contains(body, want) {
		t.Errorf("body %q lacks %s", body, want)
	}
}

func TestCutAbort(t *testing.T) {
	body, err := cutBody(t, Response{Cut: &Cut{After: 0, How: CutAbort}}, streamReq)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read error %v, want io.ErrUnexpectedEOF", err)
	}
	if want := sse(chunkJSON(1, `{"role":"assistant","content":""}`, "null", "")); body != want {
		t.Errorf("body %q, want %q", body, want)
	}
}

func TestCutError(t *testing.T) {
	body, err := cutBody(t, Response{Cut: &Cut{After: 1, How: CutError}}, streamReq)
	if err != nil {
		t.Fatal(err)
	}
	want := sse(
		chunkJSON(1, `{"role":"assistant","content":""}`, "null", ""),
		chunkJSON(1, `{"content":"Hello"}`, "null", ""),
		`{"error":{"message":"scripted mid-stream error","type":"server_error","code":"server_error"}}`,
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestCutStall(t *testing.T) {
	s := New(t)
	s.Script(Response{Cut: &Cut{After: 1, How: CutStall}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := post(ctx, newClient(t), s, streamReq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for _, want := range []string{
		chunkJSON(1, `{"role":"assistant","content":""}`, "null", ""),
		chunkJSON(1, `{"content":"Hello"}`, "null", ""),
	} {
		line, err := br.ReadString('\n')
		if err != nil || line != "data: "+want+"\n" {
			t.Fatalf("read %q, %v; want %s", line, err, want)
		}
		if blank, err := br.ReadString('\n'); err != nil || blank != "\n" {
			t.Fatalf("read %q, %v; want a blank line", blank, err)
		}
	}
	read := make(chan error, 1)
	go func() {
		_, err := br.ReadByte()
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("read returned (%v) during a stall", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-read:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("read error %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read still blocked after cancel")
	}
	closesPromptly(t, s)
}

func TestCutNonStreaming(t *testing.T) {
	full := `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Hello world","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`
	half := full[:len(full)/2]
	t.Run("close", func(t *testing.T) {
		body, err := cutBody(t, Response{Cut: &Cut{How: CutClose}}, plainReq)
		if err != nil || body != half {
			t.Errorf("got %q, %v; want %q, nil", body, err, half)
		}
	})
	t.Run("abort", func(t *testing.T) {
		body, err := cutBody(t, Response{Cut: &Cut{How: CutAbort}}, plainReq)
		if !errors.Is(err, io.ErrUnexpectedEOF) || body != half {
			t.Errorf("got %q, %v; want %q, io.ErrUnexpectedEOF", body, err, half)
		}
	})
	t.Run("reset", func(t *testing.T) {
		_, err := cutBody(t, Response{Cut: &Cut{How: CutReset}}, plainReq)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("read error %v, want ECONNRESET", err)
		}
	})
}

func TestRefusal(t *testing.T) {
	s := New(t)
	c := newClient(t)
	r := Response{Refusal: "I can't help with that."}
	s.Script(r, r)
	_, body := call(t, c, s, streamReq)
	want := sse(
		chunkJSON(1, `{"role":"assistant","content":""}`, "null", ""),
		chunkJSON(1, `{"refusal":"I can't help with that."}`, "null", ""),
		chunkJSON(1, `{}`, `"stop"`, ""),
		"[DONE]",
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
	_, body = call(t, c, s, plainReq)
	wantPlain := `{"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`
	if diff := cmp.Diff(wantPlain, body); diff != "" {
		t.Errorf("completion (-want +got):\n%s", diff)
	}
}

func TestToolCall(t *testing.T) {
	s := New(t)
	c := newClient(t)
	r := Response{ToolCall: &ToolCall{ID: "call_abc", Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	s.Script(r, r, Response{ToolCall: &ToolCall{Name: "f", Arguments: "{}"}})
	_, body := call(t, c, s, usageReq)
	want := sse(
		chunkJSON(1, `{"role":"assistant","content":""}`, "null", "null"),
		chunkJSON(1, `{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null", "null"),
		chunkJSON(1, `{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null", "null"),
		chunkJSON(1, `{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null", "null"),
		chunkJSON(1, `{}`, `"tool_calls"`, "null"),
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`,
		"[DONE]",
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
	_, body = call(t, c, s, plainReq)
	wantPlain := `{"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`
	if diff := cmp.Diff(wantPlain, body); diff != "" {
		t.Errorf("completion (-want +got):\n%s", diff)
	}
	// Without an ID, one is made up from the call number.
	_, body = call(t, c, s, plainReq)
	if !strings.Contains(body, `"id":"call_3"`) {
		t.Errorf("no call_3 id in %s", body)
	}
}

func TestPadBytes(t *testing.T) {
	s := New(t)
	c := newClient(t)
	r := Response{Text: []string{"a"}, PadBytes: 256 << 10}
	s.Script(r, r)
	pad := strings.Repeat("x", 256<<10) // beyond bufio.Scanner's default 64 KiB line limit

	_, body := call(t, c, s, usageReq)
	evs := events(t, body)
	if want := chunkJSON(1, `{"content":"`+pad+`"}`, "null", "null"); len(evs) != 6 || evs[2] != want {
		t.Fatalf("%d events; the pad chunk is not the third", len(evs))
	}
	got := accumulate(t, body)
	if got.text != "a"+pad || got.usage["completion_tokens"] != 2.0 {
		t.Errorf("text of %d bytes, usage %v", len(got.text), got.usage)
	}

	_, body = call(t, c, s, plainReq)
	if content(t, body) != "a"+pad {
		t.Error("non-streaming answer lacks the pad")
	}
}

func TestNonStreamingAnswerToStreamRequest(t *testing.T) {
	s := New(t)
	s.Script(Response{NonStreaming: true})
	resp, body := call(t, newClient(t), s, streamReq)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if content(t, body) != "Hello world" {
		t.Errorf("body %s", body)
	}
}

func TestStreamOptions(t *testing.T) {
	s := New(t)
	c := newClient(t)
	s.Script(
		Response{NoUsage: true},
		Response{NoDone: true},
		Response{NoRoleChunk: true, Text: []string{"<a&b>"}, FinishReason: "length", Model: "gpt-test-2024", Usage: &Usage{PromptTokens: 7, CompletionTokens: 5}},
		Response{Text: []string{}},
	)

	_, body := call(t, c, s, usageReq)
	if r := accumulate(t, body); r.usage != nil || !r.done || strings.Contains(body, `"usage"`) {
		t.Errorf("NoUsage: %+v in %s", r, body)
	}

	_, body = call(t, c, s, usageReq)
	if r := accumulate(t, body); r.done || r.usage == nil || r.finish != "stop" {
		t.Errorf("NoDone: %+v", r)
	}

	_, body = call(t, c, s, usageReq)
	want := sse(
		`{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-2024","choices":[{"index":0,"delta":{"content":"<a&b>"},"finish_reason":null}],"usage":null}`,
		`{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-2024","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":null}`,
		`{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-2024","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`,
		"[DONE]",
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("NoRoleChunk etc. (-want +got):\n%s", diff)
	}

	_, body = call(t, c, s, usageReq)
	if r := accumulate(t, body); r.text != "" || r.finish != "stop" || r.usage["completion_tokens"] != 0.0 {
		t.Errorf("empty answer: %+v", r)
	}
}

func TestChunkDelays(t *testing.T) {
	s := New(t)
	c := newClient(t)
	// Client-side timestamps are only lower bounds of server-side events: a
	// reader that falls behind sees chunks bunched. So every delay is
	// measured from before the request.
	const first, between = 100 * time.Millisecond, 50 * time.Millisecond
	s.Script(Response{FirstChunkDelay: first, ChunkDelay: between}, Response{FirstChunkDelay: first, ChunkDelay: between})

	start := time.Now()
	resp, err := post(context.Background(), c, s, streamReq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var at []time.Duration
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			at = append(at, time.Since(start))
		}
	}
	// role, Hello, " world", finish, [DONE]
	if len(at) != 5 {
		t.Fatalf("%d events", len(at))
	}
	if at[1] < first {
		t.Errorf("first content chunk after %v, want at least %v", at[1], first)
	}
	if at[2] < first+between {
		t.Errorf("second content chunk after %v, want at least %v", at[2], first+between)
	}

	start = time.Now()
	call(t, c, s, plainReq)
	if d := time.Since(start); d < first+between {
		t.Errorf("non-streaming answer after %v, want at least %v", d, first+between)
	}
}

// TestRoleChunkBeforeFirstChunkDelay checks that the headers and the role
// chunk are sent at once, not after FirstChunkDelay.
func TestRoleChunkBeforeFirstChunkDelay(t *testing.T) {
	s := New(t)
	s.Script(Response{FirstChunkDelay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := post(ctx, newClient(t), s, streamReq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if want := "data: " + chunkJSON(1, `{"role":"assistant","content":""}`, "null", "") + "\n"; err != nil || line != want {
		t.Errorf("read %q, %v; want %q", line, err, want)
	}
	cancel()
	closesPromptly(t, s)
}

func TestConcurrent(t *testing.T) {
	s := New(t)
	c := newClient(t)
	const n, scripted = 100, 50
	for i := range scripted {
		s.Script(Response{Text: []string{fmt.Sprint("r", i)}})
	}
	s.SetDefault(Response{Text: []string{"default"}})
	answers := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := plainReq
			if i%2 == 0 {
				req = usageReq
			}
			resp, err := post(context.Background(), c, s, req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
				return
			}
			if i%2 == 0 {
				answers[i] = accumulate(t, string(b)).text
			} else {
				answers[i] = content(t, string(b))
			}
		})
	}
	wg.Wait()
	var want []string
	for i := range scripted {
		want = append(want, fmt.Sprint("r", i))
	}
	for range n - scripted {
		want = append(want, "default")
	}
	slices.Sort(want)
	slices.Sort(answers)
	if diff := cmp.Diff(want, answers); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if got := s.Calls(); got != n {
		t.Errorf("Calls() = %d", got)
	}
	if got := len(s.Requests()); got != n {
		t.Errorf("%d requests", got)
	}
}
