package responses_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// observed is what a test compares of an observed chunk.
type observed struct {
	Event             string
	Output            bool
	Text              string
	FinishReason      string
	Seen, Finished    uint64
	Usage             *llm.Usage
	ID, Model         string
	Created           int64
	RawSame, Choices  bool
	Proto             llm.Proto
	ErrClass          llm.FailureClass
	ErrMessage, Error string
}

func observe(o *responses.Observer, name, data string) observed {
	c, err := o.Observe(name, []byte(data))
	if err != nil {
		var pe *llm.ProviderError
		if !errors.As(err, &pe) {
			return observed{Error: err.Error()}
		}
		return observed{Error: "provider error", ErrClass: pe.Class, ErrMessage: pe.Message}
	}
	return observed{
		Event: c.Event, Output: c.Output, Text: c.Text, FinishReason: c.FinishReason,
		Seen: c.Seen, Finished: c.Finished, Usage: c.Usage, ID: c.ID, Model: c.Model, Created: c.Created,
		RawSame: string(c.Raw) == data, Choices: c.HasChoices, Proto: c.Proto,
	}
}

const created = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1700000001,"status":"in_progress","model":"gpt-x","output":[],"usage":null}}`

// TestObserver pins what the observer reads off each kind of event: output
// exactly on the events that carry the answer, the finish and the usage on
// the terminal one, and the event itself unchanged.
func TestObserver(t *testing.T) {
	pass := func(event string, output bool, text string) observed {
		return observed{Event: event, Output: output, Text: text, ID: "resp_1", Model: "gpt-x", Created: 1700000001,
			RawSame: true, Choices: true, Proto: llm.ProtoResponses}
	}
	tests := []struct {
		name, event, data string
		want              observed
	}{
		{"created", "response.created", created, pass("response.created", false, "")},
		{"in progress", "response.in_progress", `{"type":"response.in_progress","response":{"id":"resp_1","status":"in_progress"}}`, pass("response.in_progress", false, "")},
		{"empty message added", "response.output_item.added",
			`{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`,
			pass("response.output_item.added", false, "")},
		{"empty reasoning added", "response.output_item.added",
			`{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
			pass("response.output_item.added", false, "")},
		{"function call added", "response.output_item.added",
			`{"type":"response.output_item.added","output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}`,
			pass("response.output_item.added", true, "get_weather")},
		{"custom tool call added", "response.output_item.added",
			`{"type":"response.output_item.added","output_index":1,"item":{"id":"ctc_1","type":"custom_tool_call","call_id":"call_1","name":"apply_patch","input":""}}`,
			pass("response.output_item.added", true, "apply_patch")},
		{"built-in tool call added", "response.output_item.added",
			`{"type":"response.output_item.added","output_index":0,"item":{"id":"ws_1","type":"web_search_call","status":"in_progress"}}`,
			pass("response.output_item.added", true, "")},
		{"reasoning done with encrypted content", "response.output_item.done",
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"gAAA"}}`,
			pass("response.output_item.done", true, "")},
		{"reasoning done with a summary", "response.output_item.done",
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Thinking"}]}}`,
			pass("response.output_item.done", true, "")},
		{"empty reasoning done", "response.output_item.done",
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
			pass("response.output_item.done", false, "")},
		{"message done with text", "response.output_item.done",
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","content":[{"type":"output_text","text":"Hi","annotations":[]}]}}`,
			pass("response.output_item.done", true, "")},
		{"message done with a refusal", "response.output_item.done",
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","content":[{"type":"refusal","refusal":"No."}]}}`,
			pass("response.output_item.done", true, "")},
		{"content part added", "response.content_part.added",
			`{"type":"response.content_part.added","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}`,
			pass("response.content_part.added", false, "")},
		{"empty text delta", "response.output_text.delta", `{"type":"response.output_text.delta","delta":""}`, pass("response.output_text.delta", false, "")},
		{"text delta", "response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_1","delta":"Hello"}`, pass("response.output_text.delta", true, "Hello")},
		{"text delta with escapes", "response.output_text.delta", `{"type":"response.output_text.delta","delta":"a\nb"}`, pass("response.output_text.delta", true, "a\nb")},
		{"refusal delta", "response.refusal.delta", `{"type":"response.refusal.delta","delta":"No"}`, pass("response.refusal.delta", true, "No")},
		{"arguments delta", "response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","delta":"{\"a\":1}"}`, pass("response.function_call_arguments.delta", true, `{"a":1}`)},
		{"custom tool input delta", "response.custom_tool_call_input.delta", `{"type":"response.custom_tool_call_input.delta","delta":"*** Begin"}`, pass("response.custom_tool_call_input.delta", true, "*** Begin")},
		{"reasoning summary delta", "response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","delta":"Hmm"}`, pass("response.reasoning_summary_text.delta", true, "Hmm")},
		{"reasoning text delta", "response.reasoning_text.delta", `{"type":"response.reasoning_text.delta","delta":"Hmm"}`, pass("response.reasoning_text.delta", true, "Hmm")},
		{"text done", "response.output_text.done", `{"type":"response.output_text.done","text":"Hello"}`, pass("response.output_text.done", false, "")},
		{"partial image", "response.image_generation_call.partial_image", `{"type":"response.image_generation_call.partial_image","partial_image_b64":"iVBO"}`, pass("response.image_generation_call.partial_image", true, "")},
		{"an event this code does not know", "response.future_thing", `{"type":"response.future_thing","delta":{"x":1},"item":"odd"}`, pass("response.future_thing", false, "")},
		{"no SSE name: the data's type", "", `{"type":"response.output_text.delta","delta":"Hi"}`, pass("response.output_text.delta", true, "Hi")},
		{"no type: the SSE name", "response.output_text.delta", `{"delta":"Hi"}`, pass("response.output_text.delta", true, "Hi")},
		{"completed", "response.completed",
			`{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[],"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":4},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":42}}}`,
			func() observed {
				o := pass("response.completed", false, "")
				o.Seen, o.Finished = 1, 1
				o.Usage = llm.ReadUsage([]byte(`{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":20}}`))
				return o
			}()},
		{"incomplete, no usage", "response.incomplete",
			`{"type":"response.incomplete","response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":null}}`,
			func() observed {
				o := pass("response.incomplete", false, "")
				o.Seen, o.Finished = 1, 1
				return o
			}()},
		{"error event", "error", `{"type":"error","code":"server_error","message":"The server had an error","param":null}`,
			observed{Error: "provider error", ErrClass: llm.FailTransient, ErrMessage: "The server had an error"}},
		{"error event, nested", "error", `{"type":"error","error":{"type":"server_error","message":"Overloaded"}}`,
			observed{Error: "provider error", ErrClass: llm.FailTransient, ErrMessage: "Overloaded"}},
		{"error event without a message", "error", `{"type":"error"}`,
			observed{Error: "provider error", ErrClass: llm.FailTransient, ErrMessage: "unspecified upstream error"}},
		{"failed", "response.failed", `{"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"Something broke"}}}`,
			observed{Error: "provider error", ErrClass: llm.FailTransient, ErrMessage: "Something broke"}},
		{"not JSON", "response.output_text.delta", `{"type":"response.output_text.delta","delta":"wor`,
			observed{Error: "provider error", ErrClass: llm.FailTransient, ErrMessage: "malformed upstream event"}},
		{"not an object", "", `[1,2]`, observed{Error: "provider error", ErrClass: llm.FailTransient, ErrMessage: "malformed upstream event"}},
		{"an item that is not an object", "response.output_item.added", `{"type":"response.output_item.added","item":"x"}`,
			observed{Error: "provider error", ErrClass: llm.FailTransient, ErrMessage: "malformed upstream event"}},
		{"a terminal response that is not an object", "response.completed", `{"type":"response.completed","response":[]}`,
			observed{Error: "provider error", ErrClass: llm.FailTransient, ErrMessage: "malformed upstream event"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o responses.Observer
			if tt.name != "created" {
				observe(&o, "response.created", created) // the Response's id and model
			}
			if diff := cmp.Diff(tt.want, observe(&o, tt.event, tt.data)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestObserverEnd: the observer is done at the terminal event only, and
// reports a failed Response's usage so far.
func TestObserverEnd(t *testing.T) {
	var o responses.Observer
	observe(&o, "response.created", created)
	if o.Done() || o.UsageSoFar() != nil {
		t.Fatalf("Done %v, UsageSoFar %+v after response.created", o.Done(), o.UsageSoFar())
	}
	observe(&o, "response.completed", `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":1,"output_tokens":2}}}`)
	if !o.Done() || !reflect.DeepEqual(o.UsageSoFar(), &llm.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}) {
		t.Errorf("Done %v, UsageSoFar %+v after response.completed", o.Done(), o.UsageSoFar())
	}

	var f responses.Observer
	observe(&f, "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"message":"x"},"usage":{"input_tokens":5,"output_tokens":7}}}`)
	if f.Done() || !reflect.DeepEqual(f.UsageSoFar(), &llm.Usage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12}) {
		t.Errorf("Done %v, UsageSoFar %+v after response.failed", f.Done(), f.UsageSoFar())
	}
}

func TestChatUsage(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"input_tokens":10,"input_tokens_details":{"cached_tokens":3},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":15}`,
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}`},
		// The sum, whatever total_tokens says; details only when sent.
		{`{"input_tokens":10,"output_tokens":5,"total_tokens":99}`, `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`},
		{`{"input_tokens":10,"input_tokens_details":{},"output_tokens_details":null}`, `{"prompt_tokens":10,"completion_tokens":0,"total_tokens":10}`},
		{`{"input_tokens":"10","output_tokens":-3}`, `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`},
		{`{"input_tokens":7.9,"output_tokens":1e3}`, `{"prompt_tokens":7,"completion_tokens":1000,"total_tokens":1007}`},
		{`{}`, ``},
		{`null`, ``},
		{`[1]`, ``},
		{``, ``},
	}
	for _, tt := range tests {
		got := responses.ChatUsage(json.RawMessage(tt.in), nil)
		if string(got) != tt.want {
			t.Errorf("ChatUsage(%s) = %s, want %s", tt.in, got, tt.want)
			continue
		}
		if got == nil {
			continue
		}
		u, err := llm.ParseUsage(got)
		if err != nil {
			t.Errorf("ChatUsage(%s) = %s: llm.ParseUsage: %v", tt.in, got, err)
		} else if u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Errorf("ChatUsage(%s) = %s: total is not the sum", tt.in, got)
		}
	}
}
