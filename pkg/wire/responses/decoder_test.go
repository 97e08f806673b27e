package responses_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// ev is one event for the decoder: its SSE name and data.
type ev struct{ name, data string }

func named(data string) ev {
	var t struct{ Type string }
	_ = json.Unmarshal([]byte(data), &t)
	return ev{t.Type, data}
}

// decodeAll decodes events in order and returns the chunks' JSON, and the
// error that stopped it.
func decodeAll(t *testing.T, d *responses.Decoder, events ...ev) ([]string, error) {
	t.Helper()
	var out []string
	for _, e := range events {
		chunks, err := d.Decode(e.name, []byte(e.data))
		for _, c := range chunks {
			// Every chunk is one ParseChunk reads the same way.
			again, perr := llm.ParseChunk(c.Raw)
			if perr != nil || again.Output != c.Output || again.FinishReason != c.FinishReason || again.Text != c.Text {
				t.Errorf("chunk %s: fields %+v, parsed again %+v (%v)", c.Raw, c, again, perr)
			}
			out = append(out, string(c.Raw))
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// chunk is a translated chunk of the test Response (resp_1, gpt-x, created
// 1700000001) with one choice of delta (JSON) and finish.
func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"resp_1","object":"chat.completion.chunk","created":1700000001,"model":"gpt-x","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

func usageChunk(usage string) string {
	return `{"id":"resp_1","object":"chat.completion.chunk","created":1700000001,"model":"gpt-x","choices":[],"usage":` + usage + `}`
}

var roleChunk = chunk(`{"role":"assistant","content":""}`, "")

// The events of a typical stream, as OpenAI sends them.
func msgAdded(oi int) ev {
	return named(fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":2,"output_index":%d,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`, oi))
}

func textDelta(oi int, s string) ev {
	return named(fmt.Sprintf(`{"type":"response.output_text.delta","item_id":"msg_1","output_index":%d,"content_index":0,"delta":%q,"logprobs":[]}`, oi, s))
}

func msgDone(oi int, text string) ev {
	return named(fmt.Sprintf(`{"type":"response.output_item.done","output_index":%d,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":%q}],"role":"assistant"}}`, oi, text))
}

func callAdded(oi int, id, call, name string) ev {
	return named(fmt.Sprintf(`{"type":"response.output_item.added","output_index":%d,"item":{"id":%q,"type":"function_call","status":"in_progress","arguments":"","call_id":%q,"name":%q}}`, oi, id, call, name))
}

func argsDelta(oi int, id, s string) ev {
	return named(fmt.Sprintf(`{"type":"response.function_call_arguments.delta","item_id":%q,"output_index":%d,"delta":%q}`, id, oi, s))
}

func callDone(oi int, id, call, name, args string) ev {
	return named(fmt.Sprintf(`{"type":"response.output_item.done","output_index":%d,"item":{"id":%q,"type":"function_call","status":"completed","arguments":%q,"call_id":%q,"name":%q}}`, oi, id, args, call, name))
}

func completed(output, usage string) ev {
	return named(`{"type":"response.completed","response":{"id":"resp_1","object":"response","created_at":1700000001,"status":"completed","model":"gpt-x","output":` + output + `,"usage":` + usage + `}}`)
}

func incomplete(reason, usage string) ev {
	return named(`{"type":"response.incomplete","response":{"id":"resp_1","created_at":1700000001,"status":"incomplete","incomplete_details":{"reason":"` + reason + `"},"model":"gpt-x","output":[],"usage":` + usage + `}}`)
}

const usage12 = `{"input_tokens":12,"input_tokens_details":{"cached_tokens":4},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":42}`
const chatUsage12 = `{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":20}}`

func TestDecoder(t *testing.T) {
	start := named(created)
	inProgress := named(`{"type":"response.in_progress","response":{"id":"resp_1","status":"in_progress"}}`)
	tests := []struct {
		name   string
		events []ev
		want   []string
	}{
		{"text", []ev{
			start, inProgress, msgAdded(0),
			named(`{"type":"response.content_part.added","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}`),
			textDelta(0, "Hello"), textDelta(0, ", <world> & \"you\""),
			named(`{"type":"response.output_text.done","item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello, <world> & \"you\""}`),
			msgDone(0, `Hello, <world> & "you"`), completed(`[]`, usage12),
		}, []string{roleChunk, chunk(`{"content":"Hello"}`, ""), chunk(`{"content":", <world> & \"you\""}`, ""), chunk(`{}`, "stop"), usageChunk(chatUsage12)}},
		{"refusal", []ev{
			start, msgAdded(0), named(`{"type":"response.refusal.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"I can't."}`),
			named(`{"type":"response.refusal.done","item_id":"msg_1","output_index":0,"content_index":0,"refusal":"I can't."}`),
			named(`{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","content":[{"type":"refusal","refusal":"I can't."}]}}`),
			completed(`[]`, `null`),
		}, []string{roleChunk, chunk(`{"refusal":"I can't."}`, ""), chunk(`{}`, "stop")}},
		{"two function calls", []ev{
			start, callAdded(0, "fc_1", "call_a", "get_weather"), argsDelta(0, "fc_1", `{"city":`), argsDelta(0, "fc_1", `"Paris"}`),
			named(`{"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":0,"arguments":"{\"city\":\"Paris\"}"}`),
			callDone(0, "fc_1", "call_a", "get_weather", `{"city":"Paris"}`),
			callAdded(1, "fc_2", "call_b", "get_time"), argsDelta(1, "fc_2", `{}`), callDone(1, "fc_2", "call_b", "get_time", `{}`),
			completed(`[]`, `{"input_tokens":3,"output_tokens":4}`),
		}, []string{
			roleChunk,
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
			usageChunk(`{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}`),
		}},
		{"reasoning, then text", []ev{
			start,
			named(`{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`),
			named(`{"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`),
			named(`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"First"}`),
			named(`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":" thought."}`),
			named(`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":1,"delta":"Second."}`),
			named(`{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"First thought."},{"type":"summary_text","text":"Second."}],"encrypted_content":"gAAAA"}}`),
			msgAdded(1), textDelta(1, "Blue."), msgDone(1, "Blue."), completed(`[]`, usage12),
		}, []string{
			roleChunk, chunk(`{"reasoning_content":"First"}`, ""), chunk(`{"reasoning_content":" thought."}`, ""),
			chunk(`{"reasoning_content":"\n\nSecond."}`, ""), chunk(`{"content":"Blue."}`, ""), chunk(`{}`, "stop"), usageChunk(chatUsage12),
		}},
		{"reasoning text", []ev{
			start, named(`{"type":"response.reasoning_text.delta","item_id":"rs_1","output_index":0,"content_index":0,"delta":"Raw thinking"}`),
			completed(`[]`, `null`),
		}, []string{roleChunk, chunk(`{"reasoning_content":"Raw thinking"}`, ""), chunk(`{}`, "stop")}},
		{"incomplete: max_output_tokens", []ev{start, msgAdded(0), textDelta(0, "Hel"), incomplete("max_output_tokens", usage12)},
			[]string{roleChunk, chunk(`{"content":"Hel"}`, ""), chunk(`{}`, "length"), usageChunk(chatUsage12)}},
		{"incomplete: content_filter", []ev{start, incomplete("content_filter", `null`)},
			[]string{roleChunk, chunk(`{}`, "content_filter")}},
		// What no delta streamed comes from the done event: a server that
		// streams whole items still answers.
		{"items done without deltas", []ev{
			start, msgAdded(0), msgDone(0, "Whole text"),
			callAdded(1, "fc_1", "call_a", "f"), callDone(1, "fc_1", "call_a", "f", ""),
			completed(`[]`, `null`),
		}, []string{
			roleChunk, chunk(`{"content":"Whole text"}`, ""),
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
		}},
		{"arguments only in their done event", []ev{
			start, callAdded(0, "fc_1", "call_a", "f"),
			named(`{"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":0,"arguments":"{\"x\":1}"}`),
			callDone(0, "fc_1", "call_a", "f", `{"x":1}`), completed(`[]`, `null`),
		}, []string{
			roleChunk,
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":1}"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
		}},
		{"output only in the terminal Response", []ev{
			start,
			completed(`[{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Hmm."}]},`+
				`{"id":"msg_1","type":"message","content":[{"type":"output_text","text":"Hi"}]},`+
				`{"id":"fc_1","type":"function_call","call_id":"call_a","name":"f","arguments":"{\"y\":2}"}]`, `null`),
		}, []string{
			roleChunk, chunk(`{"reasoning_content":"Hmm."}`, ""), chunk(`{"content":"Hi"}`, ""),
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"y\":2}"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
		}},
		// The terminal Response repeats what was streamed: nothing twice.
		{"streamed items repeated in the terminal Response", []ev{
			start, msgAdded(0), textDelta(0, "Hi"), msgDone(0, "Hi"),
			completed(`[{"id":"msg_1","type":"message","content":[{"type":"output_text","text":"Hi"}]}]`, `null`),
		}, []string{roleChunk, chunk(`{"content":"Hi"}`, ""), chunk(`{}`, "stop")}},
		{"no response.created: the role chunk before the first output", []ev{msgAdded(0), textDelta(0, "Hi"), completed(`[]`, `null`)},
			[]string{
				`{"id":"","object":"chat.completion.chunk","created":1,"model":"","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
				`{"id":"","object":"chat.completion.chunk","created":1,"model":"","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`,
				chunk(`{}`, "stop"),
			}},
		{"unknown events, and events after the end, are nothing", []ev{
			start, named(`{"type":"keepalive"}`), named(`{"type":"response.web_search_call.searching","item_id":"ws_1"}`),
			named(`{"type":"response.output_item.added","output_index":0,"item":{"id":"ws_1","type":"web_search_call"}}`),
			completed(`[]`, `null`), textDelta(0, "late"),
		}, []string{roleChunk, chunk(`{}`, "stop")}},
		{"the SSE name stands in for a missing type", []ev{start, {"response.output_text.delta", `{"item_id":"msg_1","delta":"Hi"}`}, completed(`[]`, `null`)},
			[]string{roleChunk, chunk(`{"content":"Hi"}`, ""), chunk(`{}`, "stop")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := responses.NewDecoder(1)
			got, err := decodeAll(t, d, tt.events...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			if !d.Done() {
				t.Error("not Done after the terminal event")
			}
		})
	}
}

func TestDecoderFailures(t *testing.T) {
	start := named(created)
	tests := []struct {
		name    string
		events  []ev
		message string
		usage   string // UsageSoFar after the failure
	}{
		{"error event", []ev{start, named(`{"type":"error","code":"rate_limit_exceeded","message":"Slow down","param":null}`)}, "Slow down", ""},
		{"error event, nested", []ev{start, named(`{"type":"error","error":{"message":"Overloaded"}}`)}, "Overloaded", ""},
		{"failed, with usage", []ev{start, textDelta(0, "Hi"),
			named(`{"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"The model failed"},"usage":{"input_tokens":9,"output_tokens":1}}}`)},
			"The model failed", `{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}`},
		{"failed, no message", []ev{named(`{"type":"response.failed","response":{"status":"failed"}}`)}, "the upstream's response failed", ""},
		{"malformed JSON", []ev{start, {"response.output_text.delta", `{"type":"response.output_text.delta","delta":"wor`}}, "malformed upstream event", ""},
		{"a type that is not a string", []ev{{"", `{"type":7}`}}, "malformed upstream event", ""},
		{"an item that is not an object", []ev{named(`{"type":"response.output_item.done","item":[]}`)}, "malformed upstream event", ""},
		{"a message's parts that are not a list", []ev{named(`{"type":"response.output_item.done","item":{"type":"message","content":"x"}}`)}, "malformed upstream event", ""},
		{"a terminal Response whose output is not a list", []ev{named(`{"type":"response.completed","response":{"status":"completed","output":{}}}`)}, "malformed upstream event", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := responses.NewDecoder(1)
			_, err := decodeAll(t, d, tt.events...)
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Class != llm.FailTransient || pe.Message != tt.message {
				t.Fatalf("error %v, want a transient failure %q", err, tt.message)
			}
			if got := d.UsageSoFar(); !reflect.DeepEqual(got, llm.ReadUsage([]byte(tt.usage))) {
				t.Errorf("UsageSoFar %+v, want %s", got, tt.usage)
			}
			if d.Done() {
				t.Error("Done after a failure")
			}
		})
	}
}

// TestToolCallRoundTrip: a function call the upstream makes reaches the
// client as a Chat Completions tool call, and that tool call, sent back
// with its result in the next request, reaches the upstream as the same
// function call and its output.
func TestToolCallRoundTrip(t *testing.T) {
	d := responses.NewDecoder(1)
	var chunks []llm.Chunk
	for _, e := range []ev{
		named(created), callAdded(0, "fc_9", "call_9", "get_weather"),
		argsDelta(0, "fc_9", `{"city":"Pa`), argsDelta(0, "fc_9", `ris"}`),
		callDone(0, "fc_9", "call_9", "get_weather", `{"city":"Paris"}`),
		completed(`[]`, `{"input_tokens":20,"output_tokens":8}`),
	} {
		cs, err := d.Decode(e.name, []byte(e.data))
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, cs...)
	}
	var a llm.Assembler
	for i := range chunks {
		if err := a.AddChunk(&chunks[i]); err != nil {
			t.Fatal(err)
		}
	}
	completion, err := a.Completion(llm.Usage{PromptTokens: 20, CompletionTokens: 8, TotalTokens: 28}, "")
	if err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(completion, &cc); err != nil || len(cc.Choices) != 1 {
		t.Fatalf("completion %s: %v", completion, err)
	}
	var msg struct {
		ToolCalls []chat.ToolCall `json:"tool_calls"`
	}
	_ = json.Unmarshal(cc.Choices[0].Message, &msg)
	want := []chat.ToolCall{{ID: "call_9", Type: "function", Function: chat.Function{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	if diff := cmp.Diff(want, msg.ToolCalls); diff != "" || cc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("completion %s: finish %q, tool calls (-want +got):\n%s", completion, cc.Choices[0].FinishReason, diff)
	}

	next := `{"model":"m","messages":[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_9","content":"18C, sunny"}],"stream":true}`
	body, err := responses.EncodeRequest(&llm.UpstreamRequest{Model: "m", Body: []byte(next)})
	if err != nil {
		t.Fatal(err)
	}
	wantInput := `[{"type":"message","role":"user","content":"Weather in Paris?"},` +
		`{"type":"function_call","call_id":"call_9","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},` +
		`{"type":"function_call_output","call_id":"call_9","output":"18C, sunny"}]`
	if !strings.Contains(string(body), `"input":`+wantInput) {
		t.Errorf("the next request went out as\n%s\nwant its input to be\n%s", body, wantInput)
	}
}
