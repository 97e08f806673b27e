package codexcli

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// sseEvent is one event as a client reads it off the wire.
type sseEvent struct {
	name string
	data map[string]any
}

// post sends body to the fake's Responses path and reads the answer: its
// status, content type and events (or raw body when it is not a stream).
func post(t *testing.T, f *Fake, body string) (int, string, []sseEvent, string) {
	t.Helper()
	resp, err := http.Post(f.URL()+"/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, ct, nil, string(b)
	}
	var events []sseEvent
	var name string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var data map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data); err != nil {
				t.Fatalf("event %s: data is not JSON: %v", name, err)
			}
			events = append(events, sseEvent{name, data})
		case line == "":
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, ct, events, ""
}

// TestFakeStreamsTheScript checks the event sequence of a scripted turn
// with reasoning, a function call and a message, the order the script is
// served in, and the answers once it is used up or off the path.
func TestFakeStreamsTheScript(t *testing.T) {
	f := NewFake(t)
	f.Script(
		Response{ID: "resp_1", Items: []Item{
			Reasoning("rs_1", "enc-1", "Thinking."),
			FunctionCall("fc_1", "call_1", "exec_command", `{"cmd":"echo hi"}`),
			Message("msg_1", "Running it."),
		}, Usage: Usage{InputTokens: 100, CachedTokens: 60, OutputTokens: 20, ReasoningTokens: 8}},
		Response{Status: http.StatusTooManyRequests},
	)

	status, ct, events, _ := post(t, f, `{"model":"m-1","stream":true}`)
	if status != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("call 1: %d %s, want a 200 event stream", status, ct)
	}
	var names []string
	for i, e := range events {
		names = append(names, e.name)
		if e.data["type"] != e.name {
			t.Errorf("event %d: type %v under event name %s", i, e.data["type"], e.name)
		}
		if e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d (%s): sequence_number %v", i, e.name, e.data["sequence_number"])
		}
	}
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added",
		"response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done",
		"response.output_item.done",
		"response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.output_item.done",
		"response.output_item.added",
		"response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.output_item.done",
		"response.completed",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("events\n%v\nwant\n%v", names, want)
	}
	item := func(i int) map[string]any { return events[i].data["item"].(map[string]any) }
	if _, ok := item(2)["encrypted_content"]; ok {
		t.Errorf("reasoning output_item.added carries encrypted_content: %v", item(2))
	}
	if got := item(7); got["encrypted_content"] != "enc-1" || got["id"] != "rs_1" {
		t.Errorf("reasoning output_item.done = %v", got)
	}
	if got := item(11); got["call_id"] != "call_1" || got["name"] != "exec_command" ||
		got["arguments"] != `{"cmd":"echo hi"}` || got["status"] != "completed" {
		t.Errorf("function_call output_item.done = %v", got)
	}
	if got := events[14].data["delta"]; got != "Running it." {
		t.Errorf("output_text.delta = %v", got)
	}
	completed := events[len(events)-1].data["response"].(map[string]any)
	if completed["id"] != "resp_1" || completed["model"] != "m-1" || completed["status"] != "completed" {
		t.Errorf("response.completed's response = %v", completed)
	}
	if out := completed["output"].([]any); len(out) != 3 {
		t.Errorf("response.completed has %d output items, want 3", len(out))
	}
	usage := completed["usage"].(map[string]any)
	if usage["input_tokens"] != float64(100) || usage["output_tokens"] != float64(20) || usage["total_tokens"] != float64(120) ||
		usage["input_tokens_details"].(map[string]any)["cached_tokens"] != float64(60) ||
		usage["output_tokens_details"].(map[string]any)["reasoning_tokens"] != float64(8) {
		t.Errorf("usage = %v", usage)
	}

	if status, _, _, body := post(t, f, `{"model":"m-1"}`); status != http.StatusTooManyRequests || !strings.Contains(body, `"error"`) {
		t.Errorf("call 2: %d %s, want the scripted 429 error envelope", status, body)
	}
	if status, _, _, _ := post(t, f, `{"model":"m-1"}`); status != http.StatusInternalServerError {
		t.Errorf("call 3, past the script: %d, want 500", status)
	}
	resp, err := http.Get(f.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/models: %d, want 404", resp.StatusCode)
	}

	if f.Calls() != 3 {
		t.Errorf("Calls() = %d, want 3 (the GET is not one)", f.Calls())
	}
	reqs := f.Requests()
	if len(reqs) != 4 || reqs[3].Method != http.MethodGet || reqs[3].Path != "/v1/models" || reqs[0].JSON["model"] != "m-1" {
		t.Errorf("Requests() = %d requests, the last %s %s", len(reqs), reqs[len(reqs)-1].Method, reqs[len(reqs)-1].Path)
	}
}

// TestConfigQuotesValues checks that the values put in config.toml are
// TOML basic strings, whatever they hold.
func TestConfigQuotesValues(t *testing.T) {
	c := Config(`http://127.0.0.1:1/v1?a="b"`, "m\\x")
	for _, line := range []string{
		`model = "m\\x"`,
		`base_url = "http://127.0.0.1:1/v1?a=\"b\""`,
		`env_key = "` + EnvAPIKey + `"`,
		`exclude = ["` + EnvAPIKey + `"]`,
		`wire_api = "responses"`,
	} {
		if !strings.Contains(c, "\n"+line+"\n") && !strings.HasPrefix(c, line+"\n") {
			t.Errorf("config.toml lacks the line %s:\n%s", line, c)
		}
	}
}
