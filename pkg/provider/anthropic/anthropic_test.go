package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		upstream.HTTPClient(nil).CloseIdleConnections()
		if err := checkNoLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func checkNoLeaks() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i > 0 && (strings.Contains(g, "net/http.") || strings.Contains(g, "provider/anthropic.")) {
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

const testBody = `{"model":"demo/claude","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":64}`

func testRequest() *llm.UpstreamRequest {
	return &llm.UpstreamRequest{Model: "claude-x", Body: []byte(testBody)}
}

var fixedClock = WithClock(func() time.Time { return time.Unix(1735689600, 0) })

// collect reads a stream to its end and closes it.
func collect(s llm.ChunkStream) ([]llm.Chunk, error) {
	defer s.Close()
	var out []llm.Chunk
	for {
		c, err := s.Next()
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
}

func asProviderError(t *testing.T, err error) *llm.ProviderError {
	t.Helper()
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *llm.ProviderError", err, err)
	}
	return pe
}

// assemble turns chunks into the chat.completion a non-streaming client gets.
func assemble(t *testing.T, chunks []llm.Chunk) map[string]any {
	t.Helper()
	var a llm.Assembler
	for i := range chunks {
		if err := a.AddChunk(&chunks[i]); err != nil {
			t.Fatal(err)
		}
	}
	b, err := a.Completion(llm.Usage{}, "")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRequestOnTheWire(t *testing.T) {
	up := providertest.NewAnthropic(t)
	s, err := New("claude", up.URL()+"/", "sk-ant-secret", nil).ChatStream(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(s); err != io.EOF {
		t.Fatalf("end %v, want io.EOF", err)
	}
	reqs := up.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	h := reqs[0].Header
	for k, want := range map[string]string{"X-Api-Key": "sk-ant-secret", "Anthropic-Version": "2023-06-01", "Content-Type": "application/json", "Authorization": ""} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	want := `{"model":"claude-x","max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"stream":true}`
	if got := string(reqs[0].Body); got != want {
		t.Errorf("body %s, want %s", got, want)
	}
}

// TestAgainstFake runs the adapter against providertest's Anthropic mode
// over loopback.
func TestAgainstFake(t *testing.T) {
	tests := []struct {
		name      string
		resp      providertest.Response
		wantErr   error
		content   any
		refusal   any
		finish    string
		toolCalls string
		usage     string
	}{
		{name: "text", resp: providertest.Response{Text: []string{"Hel", "lo"}}, wantErr: io.EOF, content: "Hello", refusal: nil, finish: "stop",
			usage: `{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"cost":0}`},
		{name: "tool call", resp: providertest.Response{ToolCall: &providertest.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, wantErr: io.EOF, content: "", refusal: nil, finish: "tool_calls",
			toolCalls: `[{"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"toolu_1","type":"function"}]`,
			usage:     `{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"cost":0}`},
		{name: "refusal with text", resp: providertest.Response{Refusal: "I can't help with that."}, wantErr: io.EOF, content: "I can't help with that.", refusal: nil, finish: "content_filter",
			usage: `{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11,"cost":0}`},
		{name: "bare refusal", resp: providertest.Response{Text: []string{}, FinishReason: "refusal"}, wantErr: io.EOF, content: "", refusal: messages.RefusalText, finish: "content_filter",
			usage: `{"prompt_tokens":10,"completion_tokens":0,"total_tokens":10,"cost":0}`},
		{name: "max_tokens", resp: providertest.Response{FinishReason: "max_tokens", Usage: &providertest.Usage{PromptTokens: 7, CompletionTokens: 64}}, wantErr: io.EOF, content: "Hello world", refusal: nil, finish: "length",
			usage: `{"prompt_tokens":7,"completion_tokens":64,"total_tokens":71,"cost":0}`},
		{name: "non-streaming answer", resp: providertest.Response{NonStreaming: true}, wantErr: io.EOF, content: "Hello world", refusal: nil, finish: "stop",
			usage: `{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"cost":0}`},
		{name: "no message_stop", resp: providertest.Response{NoDone: true}, wantErr: llm.ErrStreamCut, content: "Hello world", refusal: nil, finish: "stop"},
		{name: "cut", resp: providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutClose}}, wantErr: llm.ErrStreamCut, content: "Hello", refusal: nil},
		{name: "abort", resp: providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutAbort}}, wantErr: llm.ErrStreamCut, content: "Hello", refusal: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := providertest.NewAnthropic(t)
			up.Script(tt.resp)
			s, err := New("claude", up.URL(), "k", nil, fixedClock).ChatStream(context.Background(), testRequest())
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := collect(s)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("end %v, want %v", err, tt.wantErr)
			}
			var usage string
			for _, c := range chunks {
				if c.Usage != nil {
					b, _ := c.Usage.MarshalJSON()
					usage = string(b)
				}
			}
			if usage != tt.usage {
				t.Errorf("usage %s, want %s", usage, tt.usage)
			}
			m := assemble(t, chunks)
			choice := m["choices"].([]any)[0].(map[string]any)
			msg := choice["message"].(map[string]any)
			if msg["content"] != tt.content || msg["refusal"] != tt.refusal {
				t.Errorf("message %v, want content %v refusal %v", msg, tt.content, tt.refusal)
			}
			if got, _ := choice["finish_reason"].(string); got != tt.finish {
				t.Errorf("finish_reason %q, want %q", got, tt.finish)
			}
			if tt.toolCalls != "" {
				if got := string(jsonobj.Marshal(msg["tool_calls"])); got != tt.toolCalls {
					t.Errorf("tool_calls %s, want %s", got, tt.toolCalls)
				}
			}
			if m["id"] != "msg_1" || m["model"] != "claude-x" || m["created"] != float64(1735689600) {
				t.Errorf("completion %v", m)
			}
		})
	}
}

func TestStreamFailures(t *testing.T) {
	up := providertest.NewAnthropic(t)
	c := New("claude", up.URL(), "k", nil)

	up.Script(providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutError}})
	s, err := c.ChatStream(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(s)
	pe := asProviderError(t, err)
	if pe.Class != llm.FailTransient || pe.Message != "scripted mid-stream error" || len(chunks) != 2 {
		t.Errorf("error event: %v after %d chunks", pe, len(chunks))
	}
	if _, again := s.Next(); again != err {
		t.Errorf("error not sticky: %v", again)
	}

	up.Script(providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutReset}})
	s, err = c.ChatStream(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(s)
	if pe := asProviderError(t, err); pe.Class != llm.FailTransient || pe.Message != "upstream connection broken" {
		t.Errorf("reset: %v", pe)
	}

	up.Script(providertest.Response{Body: `{"type":"message","content":`})
	s, err = c.ChatStream(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(s)
	if pe := asProviderError(t, err); pe.Class != llm.FailTransient || pe.Message != "malformed upstream answer" {
		t.Errorf("malformed JSON answer: %v", pe)
	}
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		name string
		resp providertest.Response
		want llm.ProviderError
	}{
		{"529 overloaded", providertest.Response{Status: 529}, llm.ProviderError{Class: llm.FailTransient, Status: 529, Message: "upstream status 529"}},
		{"500", providertest.Response{Status: 500}, llm.ProviderError{Class: llm.FailTransient, Status: 500, Message: "upstream status 500"}},
		{"503", providertest.Response{Status: 503}, llm.ProviderError{Class: llm.FailTransient, Status: 503, Message: "upstream status 503"}},
		{"401", providertest.Response{Status: 401}, llm.ProviderError{Class: llm.FailConfig, Status: 401, Message: "upstream status 401"}},
		{"403", providertest.Response{Status: 403}, llm.ProviderError{Class: llm.FailConfig, Status: 403, Message: "upstream status 403"}},
		{"404 model", providertest.Response{Status: 404, Body: `{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"},"request_id":"req_011CVz"}`},
			llm.ProviderError{Class: llm.FailConfig, Status: 404, Message: "upstream status 404"}},
		{"404 path", providertest.Response{Status: 404, Body: `{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`},
			llm.ProviderError{Class: llm.FailConfig, Status: 404, Message: "upstream status 404"}},
		{"404 file", providertest.Response{Status: 404, Body: `{"type":"error","error":{"type":"not_found_error","message":"File not found: file_011CNha8iCJcU1wXNR6q4V8w"},"request_id":"req_011CVz"}`},
			llm.ProviderError{Class: llm.FailRejected, Status: 404, Message: "File not found: file_011CNha8iCJcU1wXNR6q4V8w"}},
		{"429 retry-after", providertest.Response{Status: 429, Header: map[string]string{"retry-after": "7"}},
			llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "upstream status 429", RetryAfter: 7 * time.Second}},
		{"429 capped", providertest.Response{Status: 429, Header: map[string]string{"retry-after": "3600"}},
			llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "upstream status 429", RetryAfter: time.Minute}},
		{"429 no hint", providertest.Response{Status: 429}, llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "upstream status 429"}},
		{"400 envelope", providertest.Response{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: must be greater than 0"}}`},
			llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "max_tokens: must be greater than 0"}},
		{"400 scripted", providertest.Response{Status: 400}, llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "scripted 400"}},
		{"400 plain text", providertest.Response{Status: 400, Body: "bad\nrequest", Header: map[string]string{"Content-Type": "text/plain"}},
			llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "bad request"}},
		{"400 empty", providertest.Response{Status: 400, Body: " "}, llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "status 400"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := providertest.NewAnthropic(t)
			up.Script(tt.resp)
			s, err := New("claude", up.URL(), "k", nil).ChatStream(context.Background(), testRequest())
			if s != nil {
				s.Close()
				t.Fatal("got a stream for an error status")
			}
			pe := asProviderError(t, err)
			pe.Err = nil
			if diff := cmp.Diff(tt.want, *pe); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if n := up.Calls(); n != 1 {
				t.Errorf("%d calls, want exactly 1", n)
			}
		})
	}
}

func TestRejectedWithoutCall(t *testing.T) {
	up := providertest.NewAnthropic(t)
	_, err := New("claude", up.URL(), "k", nil).ChatStream(context.Background(),
		&llm.UpstreamRequest{Model: "m", Body: []byte(`{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`)})
	if pe := asProviderError(t, err); pe.Class != llm.FailRejected {
		t.Errorf("class %v, want rejected", pe.Class)
	}
	if up.Calls() != 0 {
		t.Errorf("the upstream was called")
	}
}

func TestConnectionAndURLFailures(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := New("claude", url, "", nil).ChatStream(context.Background(), testRequest())
	if pe := asProviderError(t, err); pe.Class != llm.FailTransient || pe.Message != "connection failed" {
		t.Errorf("refused: %v", pe)
	}
	_, err = New("claude", "ftp://x", "", nil).ChatStream(context.Background(), testRequest())
	if pe := asProviderError(t, err); pe.Message != "invalid upstream URL" {
		t.Errorf("bad URL: %v", pe)
	}
}

func TestContext(t *testing.T) {
	// A fresh upstream for each part: a script that a request did not
	// reach in time (the deadline may beat it) stays with its upstream,
	// and does not answer the next part's request.
	up := providertest.NewAnthropic(t)
	c := New("claude", up.URL(), "", nil)

	up.Script(providertest.Response{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.ChatStream(ctx, testRequest())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang: %v, want the context's error", err)
	}

	up = providertest.NewAnthropic(t)
	c = New("claude", up.URL(), "", nil)
	up.Script(providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutStall}})
	ctx, cancel = context.WithCancel(context.Background())
	s, err := c.ChatStream(ctx, testRequest())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // role chunk, "Hello"
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := s.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("stalled stream: %v, want context.Canceled", err)
	}
	s.Close()

	// Close unblocks a waiting Next.
	up = providertest.NewAnthropic(t)
	c = New("claude", up.URL(), "", nil)
	up.Script(providertest.Response{Cut: &providertest.Cut{After: 0, How: providertest.CutStall}})
	s, err = c.ChatStream(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Bool
	time.AfterFunc(20*time.Millisecond, func() { closed.Store(true); s.Close() })
	for {
		_, err := s.Next()
		if err != nil {
			if !errors.Is(err, ErrClosed) || !closed.Load() {
				t.Errorf("after Close: %v", err)
			}
			break
		}
	}
}
