package providertest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const anthropicStreamReq = `{"model":"claude-test","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

func postMessages(ctx context.Context, c *http.Client, s *Server, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-test")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	return c.Do(req)
}

// callMessages posts body and reads the whole answer and its read error.
func callMessages(t *testing.T, s *Server, body string) (*http.Response, string, error) {
	t.Helper()
	resp, err := postMessages(context.Background(), newClient(t), s, body)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// anthropicEvents writes Messages events: name and data, alternately.
func anthropicEvents(nameData ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(nameData); i += 2 {
		b.WriteString("event: " + nameData[i] + "\ndata: " + nameData[i+1] + "\n\n")
	}
	return b.String()
}

const (
	evStart     = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`
	evPing      = `{"type":"ping"}`
	evTextStart = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	evStop      = `{"type":"content_block_stop","index":0}`
	evMsgStop   = `{"type":"message_stop"}`
)

func textDelta(s string) string {
	return `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + s + `"}}`
}

func messageDelta(stop string, out int) string {
	return `{"type":"message_delta","delta":{"stop_reason":"` + stop + `","stop_sequence":null},"usage":{"output_tokens":` + string(rune('0'+out)) + `}}`
}

func TestAnthropicStream(t *testing.T) {
	s := NewAnthropic(t)
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || strings.HasSuffix(s.URL(), "/v1") {
		t.Errorf("URL %q, want the API root", s.URL())
	}
	resp, body, err := callMessages(t, s, anthropicStreamReq)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %v, err %v", resp.StatusCode, resp.Header, err)
	}
	want := anthropicEvents(
		"message_start", evStart,
		"ping", evPing,
		"content_block_start", evTextStart,
		"content_block_delta", textDelta("Hello"),
		"content_block_delta", textDelta(" world"),
		"content_block_stop", evStop,
		"message_delta", messageDelta("end_turn", 2),
		"message_stop", evMsgStop,
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != "sk-ant-test" || reqs[0].JSON["model"] != "claude-test" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestAnthropicToolCallAndRefusal(t *testing.T) {
	s := NewAnthropic(t)
	s.Script(
		Response{ToolCall: &ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		Response{Refusal: "I can't help with that."},
		Response{Text: []string{}, FinishReason: "refusal", Usage: &Usage{PromptTokens: 5}},
	)
	_, body, _ := callMessages(t, s, anthropicStreamReq)
	want := anthropicEvents(
		"message_start", strings.Replace(evStart, "msg_1", "msg_1", 1),
		"ping", evPing,
		"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`,
		"content_block_stop", evStop,
		"message_delta", messageDelta("tool_use", 3),
		"message_stop", evMsgStop,
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("tool call (-want +got):\n%s", diff)
	}

	_, body, _ = callMessages(t, s, anthropicStreamReq)
	want = anthropicEvents(
		"message_start", strings.Replace(evStart, "msg_1", "msg_2", 1),
		"ping", evPing,
		"content_block_start", evTextStart,
		"content_block_delta", textDelta("I can't help with that."),
		"content_block_stop", evStop,
		"message_delta", messageDelta("refusal", 1),
		"message_stop", evMsgStop,
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("refusal (-want +got):\n%s", diff)
	}

	_, body, _ = callMessages(t, s, anthropicStreamReq)
	want = anthropicEvents(
		"message_start", strings.NewReplacer("msg_1", "msg_3", `"input_tokens":10`, `"input_tokens":5`).Replace(evStart),
		"ping", evPing,
		"message_delta", messageDelta("refusal", 0),
		"message_stop", evMsgStop,
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("bare refusal (-want +got):\n%s", diff)
	}
}

func TestAnthropicErrors(t *testing.T) {
	s := NewAnthropic(t)
	s.Script(
		Response{Status: 529},
		Response{Status: 429, Header: map[string]string{"retry-after": "3"}},
		Response{Status: 400},
		Response{Status: 401},
		Response{Status: 500},
	)
	want := []struct {
		status int
		body   string
	}{
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"scripted 529"}}`},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"scripted 429"}}`},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"scripted 400"}}`},
		{401, `{"type":"error","error":{"type":"authentication_error","message":"scripted 401"}}`},
		{500, `{"type":"error","error":{"type":"api_error","message":"scripted 500"}}`},
	}
	for _, w := range want {
		resp, body, _ := callMessages(t, s, anthropicStreamReq)
		if resp.StatusCode != w.status || body != w.body {
			t.Errorf("got %d %s, want %d %s", resp.StatusCode, body, w.status, w.body)
		}
		if w.status == 429 && resp.Header.Get("Retry-After") != "3" {
			t.Errorf("429 without its retry-after: %v", resp.Header)
		}
	}

	// Only POST /v1/messages is served, and wrong paths answer in the
	// Anthropic envelope.
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/chat/completions", strings.NewReader("{}"))
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.HasPrefix(string(b), `{"type":"error","error":{"type":"not_found_error"`) {
		t.Errorf("wrong path: %d %s", resp.StatusCode, b)
	}
}

func TestAnthropicCuts(t *testing.T) {
	head := anthropicEvents("message_start", evStart, "ping", evPing, "content_block_start", evTextStart, "content_block_delta", textDelta("Hello"))

	s := NewAnthropic(t)
	s.Script(Response{Cut: &Cut{After: 1, How: CutError}})
	_, body, err := callMessages(t, s, anthropicStreamReq)
	want := head + anthropicEvents("error", `{"type":"error","error":{"type":"overloaded_error","message":"scripted mid-stream error"}}`)
	if diff := cmp.Diff(want, body); err != nil || diff != "" {
		t.Errorf("CutError: err %v (-want +got):\n%s", err, diff)
	}

	s.Script(Response{Cut: &Cut{After: 1, How: CutClose}})
	_, body, err = callMessages(t, s, anthropicStreamReq)
	if diff := cmp.Diff(strings.Replace(head, "msg_1", "msg_2", 1), body); err != nil || diff != "" {
		t.Errorf("CutClose: err %v (-want +got):\n%s", err, diff)
	}

	s.Script(Response{Cut: &Cut{After: 1, How: CutReset}})
	_, _, err = callMessages(t, s, anthropicStreamReq)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("CutReset: read error %v, want ECONNRESET", err)
	}

	s.Script(Response{NoDone: true, NoUsage: true})
	_, body, _ = callMessages(t, s, anthropicStreamReq)
	if strings.Contains(body, "message_stop") || strings.Contains(body, "usage") || !strings.Contains(body, `"stop_reason":"end_turn"`) {
		t.Errorf("NoDone NoUsage: %s", body)
	}
}

func TestAnthropicNonStreaming(t *testing.T) {
	s := NewAnthropic(t)
	s.Script(Response{}, Response{ToolCall: &ToolCall{ID: "toolu_x", Name: "f", Arguments: `{"a":1}`}})
	const plain = `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	resp, body, _ := callMessages(t, s, plain)
	want := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Hello world"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":2}}`
	if resp.StatusCode != 200 || body != want {
		t.Errorf("got %d %s, want %s", resp.StatusCode, body, want)
	}
	_, body, _ = callMessages(t, s, plain)
	want = `{"id":"msg_2","type":"message","role":"assistant","model":"claude-test","content":[{"type":"tool_use","id":"toolu_x","name":"f","input":{"a":1}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":3}}`
	if body != want {
		t.Errorf("tool call: got %s, want %s", body, want)
	}
}
