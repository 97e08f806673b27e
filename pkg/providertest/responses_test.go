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

const responsesStreamReq = `{"model":"gpt-test","input":"hi","stream":true}`

// callResponses posts body to /v1/responses and reads the whole answer and
// its read error.
func callResponses(t *testing.T, s *Server, body string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL()+"/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("Openai-Beta", "responses=v1")
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// responsesEvents writes named events: name and data, alternately.
func responsesEvents(nameData ...string) string { return anthropicEvents(nameData...) }

const (
	rsHead = `{"id":"resp_1","object":"response","created_at":1700000000,"status":"in_progress","background":false,"error":null,"incomplete_details":null,` +
		`"model":"gpt-test","output":[],"parallel_tool_calls":true,"store":false,"tool_choice":"auto","tools":[],"usage":null,"metadata":{}}`
	rsMsg      = `{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello world"}],"role":"assistant"}`
	rsUsage    = `{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12}`
	rsMsgStart = `"item_id":"msg_1","output_index":0,"content_index":0`
)

func rsEnd(status, details, output, usage string) string {
	return `{"id":"resp_1","object":"response","created_at":1700000000,"status":"` + status + `","background":false,"error":null,"incomplete_details":` + details +
		`,"model":"gpt-test","output":` + output + `,"parallel_tool_calls":true,"store":false,"tool_choice":"auto","tools":[],"usage":` + usage + `,"metadata":{}}`
}

func TestResponsesStream(t *testing.T) {
	s := NewResponses(t)
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || !strings.HasSuffix(s.URL(), "/v1") {
		t.Errorf("URL %q, want a loopback base URL ending in /v1", s.URL())
	}
	resp, body, err := callResponses(t, s, responsesStreamReq)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %v, err %v", resp.StatusCode, resp.Header, err)
	}
	want := responsesEvents(
		"response.created", `{"type":"response.created","sequence_number":0,"response":`+rsHead+`}`,
		"response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":`+rsHead+`}`,
		"response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`,
		"response.content_part.added", `{"type":"response.content_part.added","sequence_number":3,`+rsMsgStart+`,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`,
		"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":4,`+rsMsgStart+`,"delta":"Hello","logprobs":[]}`,
		"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":5,`+rsMsgStart+`,"delta":" world","logprobs":[]}`,
		"response.output_text.done", `{"type":"response.output_text.done","sequence_number":6,`+rsMsgStart+`,"text":"Hello world","logprobs":[]}`,
		"response.content_part.done", `{"type":"response.content_part.done","sequence_number":7,`+rsMsgStart+`,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello world"}}`,
		"response.output_item.done", `{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":`+rsMsg+`}`,
		"response.completed", `{"type":"response.completed","sequence_number":9,"response":`+rsEnd("completed", "null", "["+rsMsg+"]", rsUsage)+`}`,
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || string(reqs[0].Body) != responsesStreamReq || reqs[0].Header.Get("Authorization") != "Bearer sk-test" ||
		reqs[0].Header.Get("Openai-Beta") != "responses=v1" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestResponsesReasoningAndToolCall(t *testing.T) {
	s := NewResponses(t)
	s.Script(Response{
		ToolCall:  &ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`},
		Usage:     &Usage{PromptTokens: 20, CompletionTokens: 30},
		Responses: &ResponsesAnswer{Reasoning: []string{"Weather."}, EncryptedContent: "gAAA", CachedTokens: 8, ReasoningTokens: 25},
	})
	_, body, _ := callResponses(t, s, responsesStreamReq)
	rs := `{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Weather."}],"encrypted_content":"gAAA"}`
	fc := `{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"city\":\"Paris\"}","call_id":"call_1","name":"get_weather"}`
	at := `"item_id":"rs_1","output_index":0,"summary_index":0`
	fcAt := `"item_id":"fc_1","output_index":1`
	want := responsesEvents(
		"response.created", `{"type":"response.created","sequence_number":0,"response":`+rsHead+`}`,
		"response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":`+rsHead+`}`,
		"response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
		"response.reasoning_summary_part.added", `{"type":"response.reasoning_summary_part.added","sequence_number":3,`+at+`,"part":{"type":"summary_text","text":""}}`,
		"response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","sequence_number":4,`+at+`,"delta":"Weather."}`,
		"response.reasoning_summary_text.done", `{"type":"response.reasoning_summary_text.done","sequence_number":5,`+at+`,"text":"Weather."}`,
		"response.reasoning_summary_part.done", `{"type":"response.reasoning_summary_part.done","sequence_number":6,`+at+`,"part":{"type":"summary_text","text":"Weather."}}`,
		"response.output_item.done", `{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":`+rs+`}`,
		"response.output_item.added", `{"type":"response.output_item.added","sequence_number":8,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}`,
		"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":9,`+fcAt+`,"delta":"{\"city\":"}`,
		"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":10,`+fcAt+`,"delta":"\"Paris\"}"}`,
		"response.function_call_arguments.done", `{"type":"response.function_call_arguments.done","sequence_number":11,`+fcAt+`,"arguments":"{\"city\":\"Paris\"}"}`,
		"response.output_item.done", `{"type":"response.output_item.done","sequence_number":12,"output_index":1,"item":`+fc+`}`,
		"response.completed", `{"type":"response.completed","sequence_number":13,"response":`+rsEnd("completed", "null", "["+rs+","+fc+"]",
			`{"input_tokens":20,"input_tokens_details":{"cached_tokens":8},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":25},"total_tokens":50}`)+`}`,
	)
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestResponsesEnds(t *testing.T) {
	s := NewResponses(t)
	s.Script(
		Response{FinishReason: "length", NoUsage: true},
		Response{FinishReason: "content_filter", Refusal: "No."},
		Response{FinishReason: "failed"},
		Response{NoDone: true, NoRoleChunk: true},
	)
	_, body, _ := callResponses(t, s, responsesStreamReq)
	msg := `{"id":"msg_1","type":"message","status":"incomplete","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello world"}],"role":"assistant"}`
	if end := `event: response.incomplete` + "\n" + `data: {"type":"response.incomplete","sequence_number":9,"response":` +
		rsEnd("incomplete", `{"reason":"max_output_tokens"}`, "["+msg+"]", "null") + "}\n\n"; !strings.HasSuffix(body, end) {
		t.Errorf("length: %s\nwant it to end with\n%s", body, end)
	}

	_, body, _ = callResponses(t, s, responsesStreamReq)
	for _, want := range []string{
		`"type":"response.refusal.delta","sequence_number":4,"item_id":"msg_2","output_index":0,"content_index":0,"delta":"No."}`,
		`"type":"response.refusal.done","sequence_number":5,"item_id":"msg_2","output_index":0,"content_index":0,"refusal":"No."}`,
		`"status":"incomplete","background":false,"error":null,"incomplete_details":{"reason":"content_filter"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("content_filter: %s\nwant %s", body, want)
		}
	}

	_, body, _ = callResponses(t, s, responsesStreamReq)
	if !strings.Contains(body, "event: response.failed\n") || !strings.Contains(body, `"status":"failed","background":false,"error":{"code":"server_error","message":"scripted failure"}`) {
		t.Errorf("failed: %s", body)
	}

	_, body, _ = callResponses(t, s, responsesStreamReq)
	if strings.Contains(body, "response.created") || strings.Contains(body, "response.completed") || !strings.Contains(body, "response.output_item.done") {
		t.Errorf("NoRoleChunk NoDone: %s", body)
	}
}

func TestResponsesCuts(t *testing.T) {
	s := NewResponses(t)
	s.Script(Response{Cut: &Cut{After: 1, How: CutError}}, Response{Cut: &Cut{After: 0, How: CutClose}}, Response{Cut: &Cut{After: 1, How: CutReset}})
	_, body, err := callResponses(t, s, responsesStreamReq)
	end := responsesEvents(
		"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":4,`+rsMsgStart+`,"delta":"Hello","logprobs":[]}`,
		"error", `{"type":"error","sequence_number":5,"code":"server_error","message":"scripted mid-stream error","param":null}`)
	if err != nil || !strings.HasSuffix(body, end) {
		t.Errorf("CutError: err %v, %s\nwant it to end with\n%s", err, body, end)
	}

	_, body, err = callResponses(t, s, responsesStreamReq)
	if err != nil || strings.Contains(body, "output_item") || !strings.HasSuffix(body, "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":"+strings.Replace(rsHead, "resp_1", "resp_2", 1)+"}\n\n") {
		t.Errorf("CutClose after 0: err %v, %s", err, body)
	}

	_, _, err = callResponses(t, s, responsesStreamReq)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("CutReset: read error %v, want ECONNRESET", err)
	}
}

func TestResponsesNonStreaming(t *testing.T) {
	s := NewResponses(t)
	s.Script(Response{}, Response{NonStreaming: true, ToolCall: &ToolCall{ID: "call_x", Name: "f", Arguments: `{"a":1}`}})
	resp, body, _ := callResponses(t, s, `{"model":"gpt-test","input":"hi"}`)
	if want := rsEnd("completed", "null", "["+rsMsg+"]", rsUsage); resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || body != want {
		t.Errorf("got %d %s, want %s", resp.StatusCode, body, want)
	}
	_, body, _ = callResponses(t, s, responsesStreamReq)
	if !strings.Contains(body, `"output":[{"id":"fc_2","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_x","name":"f"}]`) {
		t.Errorf("tool call: %s", body)
	}
}

func TestResponsesErrors(t *testing.T) {
	s := NewResponses(t)
	s.Script(Response{Status: 429, Header: map[string]string{"retry-after": "2"}}, Response{Status: 500}, Response{Status: 400, Body: `{"error":{"message":"Bad input"}}`})
	for _, w := range []struct {
		status int
		body   string
	}{
		{429, `{"error":{"message":"scripted 429","type":"rate_limit_error","code":null,"param":null}}`},
		{500, `{"error":{"message":"scripted 500","type":"server_error","code":null,"param":null}}`},
		{400, `{"error":{"message":"Bad input"}}`},
	} {
		resp, body, _ := callResponses(t, s, responsesStreamReq)
		if resp.StatusCode != w.status || body != w.body {
			t.Errorf("got %d %s, want %d %s", resp.StatusCode, body, w.status, w.body)
		}
		if w.status == 429 && resp.Header.Get("Retry-After") != "2" {
			t.Errorf("429 without its retry-after: %v", resp.Header)
		}
	}
	// Only POST /v1/responses is served.
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/chat/completions", strings.NewReader("{}"))
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || s.Calls() != 3 {
		t.Errorf("wrong path: %d, %d calls", resp.StatusCode, s.Calls())
	}
}
