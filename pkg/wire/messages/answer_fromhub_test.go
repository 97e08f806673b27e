package messages

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/reqtest"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

func usageOf(t *testing.T, raw string, cost float64) llm.Usage {
	t.Helper()
	u, err := llm.ParseUsage(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	u.Cost = cost
	return u
}

func TestUsageOf(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", `{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}`,
			`{"input_tokens":3,"output_tokens":5,"cost":0.25}`},
		{"cache reads apart from input", `{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105,"prompt_tokens_details":{"cached_tokens":90}}`,
			`{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":5,"cost":0.25}`},
		{"cache writes, one hour of them, and server tools", `{"prompt_tokens":1112,"completion_tokens":40,"total_tokens":1152,"prompt_tokens_details":{"cache_write_tokens":1100,"cache_write_1h_tokens":1000},"server_tool_use":{"web_search_requests":3}}`,
			`{"input_tokens":12,"cache_creation_input_tokens":1100,"output_tokens":40,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":1000},"server_tool_use":{"web_search_requests":3},"cost":0.25}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(UsageOf(usageOf(t, tc.in, 0.25)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(reqtest.DecodeJSON(t, []byte(tc.want)), reqtest.DecodeJSON(t, got)); diff != "" {
				t.Errorf("usage (-want +got):\n%s\ngot %s", diff, got)
			}
		})
	}
}

// recorder is a Sender that keeps the events it is given, encoded.
type recorder struct{ events []string }

func (r *recorder) Send(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	r.events = append(r.events, name+" "+string(b))
}

func TestStreamWriter(t *testing.T) {
	usage := `{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}`
	start := func(in int) string {
		return `message_start {"type":"message_start","message":{"id":"msg_0123abcd","type":"message","role":"assistant","model":"up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":` +
			map[bool]string{true: "3", false: "0"}[in == 3] + `,"output_tokens":0}}}`
	}
	const ping = `ping {"type":"ping"}`
	for _, tc := range []struct {
		name      string
		estimated bool
		write     func(w *StreamWriter)
		finish    string
		finished  bool
		want      []string
	}{
		{
			name: "thinking, text, a tool call without an id, finished",
			write: func(w *StreamWriter) {
				w.Reasoning("hm")
				w.Text("Hi")
				w.Text("")
				w.ToolCall(0, "", "f", `{"a"`)
				w.ToolCall(0, "", "", `:1}`)
			},
			finish: "tool_calls", finished: true,
			want: []string{
				`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`,
				`content_block_stop {"type":"content_block_stop","index":0}`,
				`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
				`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}`,
				`content_block_stop {"type":"content_block_stop","index":1}`,
				`content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_0123abcd_2","name":"f","input":{}}}`,
				`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`,
				`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":":1}"}}`,
				`content_block_stop {"type":"content_block_stop","index":2}`,
				`message_delta {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":3,"output_tokens":5,"cost":0.5}}`,
				`message_stop {"type":"message_stop"}`,
			},
		},
		{
			name:   "a refusal is text, and the stop reason",
			write:  func(w *StreamWriter) { w.Refusal("no"); w.Refusal("") },
			finish: "stop", finished: true,
			want: []string{
				`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"no"}}`,
				`content_block_stop {"type":"content_block_stop","index":0}`,
				`message_delta {"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null},"usage":{"input_tokens":3,"output_tokens":5,"cost":0.5}}`,
				`message_stop {"type":"message_stop"}`,
			},
		},
		{
			name:   "stopped at a stop sequence",
			write:  func(w *StreamWriter) { w.Text("a"); w.StopSequence("END") },
			finish: "stop", finished: true,
			want: []string{
				`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
				`content_block_stop {"type":"content_block_stop","index":0}`,
				`message_delta {"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"input_tokens":3,"output_tokens":5,"cost":0.5}}`,
				`message_stop {"type":"message_stop"}`,
			},
		},
		{
			name:      "a stream that just stopped, its usage estimated",
			estimated: true,
			write:     func(w *StreamWriter) { w.Text("a") },
			want: []string{
				`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
				`content_block_stop {"type":"content_block_stop","index":0}`,
				`message_delta {"type":"message_delta","delta":{"stop_reason":null,"stop_sequence":null},"usage":{"input_tokens":3,"output_tokens":5,"cost":0.5,"estimated":true}}`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := usageOf(t, usage, 0.5)
			u.Estimated = tc.estimated
			var r recorder
			var w StreamWriter
			w.Init(&r, "req_0123abcd")
			w.Start("up", u)
			tc.write(&w)
			w.CloseBlock()
			w.End(tc.finish, u, tc.finished)
			in := 3
			if tc.estimated {
				in = 0
			}
			want := append([]string{start(in), ping}, tc.want...)
			if diff := cmp.Diff(want, r.events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewMessage(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name     string
		ch       chat.Choice
		finished bool
		want     string
	}{
		{
			name: "thinking, text, tool calls, finished",
			ch: chat.Choice{FinishReason: str("tool_calls"), Message: chat.Message{Content: str("Hi"), ReasoningContent: str("hm"),
				ToolCalls: []chat.ToolCall{{ID: "call_1", Function: chat.Function{Name: "f", Arguments: `{"a": 1}`}}, {Function: chat.Function{Name: "g", Arguments: `[1`}}}}},
			finished: true,
			want: `{"id":"msg_0123abcd","type":"message","role":"assistant","model":"up","content":[` +
				`{"type":"thinking","thinking":"hm","signature":""},{"type":"text","text":"Hi"},` +
				`{"type":"tool_use","id":"call_1","name":"f","input":{"a":1}},{"type":"tool_use","id":"toolu_0123abcd_3","name":"g","input":{}}],` +
				`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":5,"cost":0.5}}`,
		},
		{
			name:     "a refusal",
			ch:       chat.Choice{FinishReason: str("stop"), Message: chat.Message{Refusal: json.RawMessage(`"no"`)}},
			finished: true,
			want: `{"id":"msg_0123abcd","type":"message","role":"assistant","model":"up","content":[{"type":"text","text":"no"}],` +
				`"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":5,"cost":0.5}}`,
		},
		{
			name:     "a stop sequence",
			ch:       chat.Choice{FinishReason: str("stop"), StopReason: str("END"), Message: chat.Message{Content: str("a")}},
			finished: true,
			want: `{"id":"msg_0123abcd","type":"message","role":"assistant","model":"up","content":[{"type":"text","text":"a"}],` +
				`"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":3,"output_tokens":5,"cost":0.5}}`,
		},
		{
			name: "not finished",
			ch:   chat.Choice{Message: chat.Message{Content: str("a")}},
			want: `{"id":"msg_0123abcd","type":"message","role":"assistant","model":"up","content":[{"type":"text","text":"a"}],` +
				`"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":5,"cost":0.5}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewMessage("req_0123abcd", "up", &tc.ch, usageOf(t, `{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}`, 0.5), tc.finished)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("message:\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestErrorEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    *llm.Error
		end  error
		want string
	}{
		{"timeout", &llm.Error{Code: llm.CodeRequestTimeout, Message: "slow"}, nil,
			`{"type":"error","error":{"type":"timeout_error","message":"slow","code":"request_timeout"}}`},
		{"overloaded", &llm.Error{Code: llm.CodeStreamInterrupted, Message: "busy"}, &llm.ProviderError{Status: 529},
			`{"type":"error","error":{"type":"overloaded_error","message":"busy","code":"stream_interrupted"}}`},
		{"unavailable", &llm.Error{Code: llm.CodeStreamInterrupted, Message: "busy"}, &llm.ProviderError{Status: 503},
			`{"type":"error","error":{"type":"overloaded_error","message":"busy","code":"stream_interrupted"}}`},
		{"other", &llm.Error{Code: llm.CodeStreamInterrupted, Message: "cut", Param: "x"}, errors.New("eof"),
			`{"type":"error","error":{"type":"api_error","message":"cut","code":"stream_interrupted","param":"x"}}`},
	} {
		if got := string(ErrorEvent(tc.e, tc.end)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
