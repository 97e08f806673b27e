package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

func TestWithStore(t *testing.T) {
	cases := []struct {
		in   string
		kept bool
		want string
	}{
		{"{\"id\":\"resp_1\"}\n", false, "{\"id\":\"resp_1\",\"store\":false}\n"},
		{`{"id":"resp_1"}`, true, `{"id":"resp_1","store":true}`},
		{`{"store":true,"id":"resp_1"}`, false, `{"store":false,"id":"resp_1"}`},
		{`not json`, true, `not json`},
	}
	for _, c := range cases {
		if got := string(WithStore([]byte(c.in), c.kept)); got != c.want {
			t.Errorf("WithStore(%s, %v) = %s, want %s", c.in, c.kept, got, c.want)
		}
	}
}

// recorder is a Sender that keeps each event's name and data.
type recorder struct{ events []string }

func (r *recorder) Send(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	r.events = append(r.events, name+" "+string(b))
}

func (*recorder) Err() error { return nil }

// TestItemWriter: deltas open and close the items they belong to, each
// event numbered in order, and the closed items and the turn are what
// the deltas said.
func TestItemWriter(t *testing.T) {
	h := &Head{RequestID: "req_ab"}
	var rec recorder
	w := NewItemWriter(&rec, h)
	w.Reasoning("Think.")
	w.Text("Hi")
	w.Refusal("No.")
	w.ToolCall(0, "", "f", `{"a":`)
	w.ToolCall(0, "", "", `1}`)
	w.StopSequence("END")
	w.CloseItem(StatusIncomplete)
	want := []string{
		`response.output_item.added {"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"rs_ab_0","type":"reasoning","summary":[],"status":"in_progress"}}`,
		`response.reasoning_summary_part.added {"type":"response.reasoning_summary_part.added","sequence_number":1,"item_id":"rs_ab_0","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`,
		`response.reasoning_summary_text.delta {"type":"response.reasoning_summary_text.delta","sequence_number":2,"item_id":"rs_ab_0","output_index":0,"summary_index":0,"delta":"Think."}`,
		`response.reasoning_summary_text.done {"type":"response.reasoning_summary_text.done","sequence_number":3,"item_id":"rs_ab_0","output_index":0,"summary_index":0,"text":"Think."}`,
		`response.reasoning_summary_part.done {"type":"response.reasoning_summary_part.done","sequence_number":4,"item_id":"rs_ab_0","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"Think."}}`,
		`response.output_item.done {"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"id":"rs_ab_0","type":"reasoning","summary":[{"type":"summary_text","text":"Think."}],"status":"completed"}}`,
	}
	if len(rec.events) < len(want) {
		t.Fatalf("%d events: %q", len(rec.events), rec.events)
	}
	if diff := cmp.Diff(want, rec.events[:len(want)]); diff != "" {
		t.Errorf("reasoning events (-want +got):\n%s", diff)
	}
	var names []string
	for i, e := range rec.events {
		name, data, _ := strings.Cut(e, " ")
		names = append(names, name)
		var ev struct {
			Type           string `json:"type"`
			SequenceNumber int    `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Type != name || ev.SequenceNumber != i {
			t.Errorf("event %d %s: type %q, sequence_number %d (%v)", i, name, ev.Type, ev.SequenceNumber, err)
		}
	}
	wantNames := []string{
		EventOutputItemAdded, EventReasoningSummaryPartAdded, EventReasoningSummaryTextDelta, EventReasoningSummaryTextDone,
		EventReasoningSummaryPartDone, EventOutputItemDone,
		EventOutputItemAdded, EventContentPartAdded, EventOutputTextDelta, EventOutputTextDone, EventContentPartDone,
		EventContentPartAdded, EventRefusalDelta, EventRefusalDone, EventContentPartDone, EventOutputItemDone,
		EventOutputItemAdded, EventFunctionCallArgumentsDelta, EventFunctionCallArgumentsDelta, EventFunctionCallArgumentsDone,
		EventOutputItemDone,
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	out, err := json.Marshal(w.Output())
	if err != nil {
		t.Fatal(err)
	}
	wantOut := `[{"id":"rs_ab_0","type":"reasoning","summary":[{"type":"summary_text","text":"Think."}],"status":"completed"},` +
		`{"id":"msg_ab_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hi"},{"type":"refusal","refusal":"No."}],"role":"assistant"},` +
		`{"id":"fc_ab_2","type":"function_call","status":"incomplete","arguments":"{\"a\":1}","call_id":"call_ab_2","name":"f"}]`
	if diff := cmp.Diff(wantOut, string(out)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	turn := w.Turn()
	msg, err := turn.Message()
	if err != nil {
		t.Fatal(err)
	}
	wantMsg := `{"role":"assistant","content":"Hi","refusal":"No.","tool_calls":[{"id":"call_ab_2","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`
	if diff := cmp.Diff(wantMsg, string(msg)); diff != "" {
		t.Errorf("turn message (-want +got):\n%s", diff)
	}
}

// TestOutput: an assembled answer's items, ids from the request id, the
// last one incomplete when the answer is.
func TestOutput(t *testing.T) {
	h := &Head{RequestID: "req_ab"}
	content, reasoning, finish := "Hi", "Think.", "length"
	ch := &chat.Choice{FinishReason: &finish, Message: chat.Message{Role: "assistant", Content: &content, ReasoningContent: &reasoning,
		ToolCalls: []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.Function{Name: "f", Arguments: "{}"}}}}}
	for _, tc := range []struct {
		status, last string
	}{{StatusCompleted, StatusCompleted}, {StatusIncomplete, StatusIncomplete}} {
		output, turn := h.Output(ch, tc.status)
		out, err := json.Marshal(output)
		if err != nil {
			t.Fatal(err)
		}
		want := `[{"id":"rs_ab_0","type":"reasoning","summary":[{"type":"summary_text","text":"Think."}],"status":"completed"},` +
			`{"id":"msg_ab_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hi"}],"role":"assistant"},` +
			`{"id":"fc_ab_2","type":"function_call","status":"` + tc.last + `","arguments":"{}","call_id":"call_1","name":"f"}]`
		if diff := cmp.Diff(want, string(out)); diff != "" {
			t.Errorf("%s: output (-want +got):\n%s", tc.status, diff)
		}
		wantTurn := Turn{Text: "Hi", Calls: []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.Function{Name: "f", Arguments: "{}"}}}}
		if diff := cmp.Diff(wantTurn, turn); diff != "" {
			t.Errorf("%s: turn (-want +got):\n%s", tc.status, diff)
		}
	}
}
