package messages

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

const (
	start     = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}`
	textStart = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	blockStop = `{"type":"content_block_stop","index":0}`
	msgStop   = `{"type":"message_stop"}`
	ping      = `{"type":"ping"}`
)

func text(index int, s string) string {
	return `{"type":"content_block_delta","index":` + itoa(index) + `,"delta":{"type":"text_delta","text":"` + s + `"}}`
}

func stopWith(reason string, out int) string {
	return `{"type":"message_delta","delta":{"stop_reason":"` + reason + `","stop_sequence":null},"usage":{"output_tokens":` + itoa(out) + `}}`
}

func itoa(n int) string { return strings.TrimSpace(string(jsonobj.Marshal(n))) }

// chunk is the wire form of a synthesized chunk with one choice.
func chunk(delta, finish string) string {
	return `{"id":"msg_1","object":"chat.completion.chunk","created":1735689600,"model":"claude-x","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
}

func usageChunk(usage string) string {
	return `{"id":"msg_1","object":"chat.completion.chunk","created":1735689600,"model":"claude-x","choices":[],"usage":` + usage + `}`
}

var roleChunk = chunk(`{"role":"assistant","content":""}`, "null")

// decodeAll runs events through a Decoder and returns the chunks' JSON, the
// error that stopped it, and whether the decoder is done.
func decodeAll(events ...string) ([]string, error, bool) {
	d := NewDecoder(1735689600)
	var out []string
	for _, ev := range events {
		chunks, err := d.Decode("", []byte(ev))
		for _, c := range chunks {
			out = append(out, string(c.Raw))
		}
		if err != nil {
			return out, err, d.Done()
		}
	}
	return out, nil, d.Done()
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   []string
	}{
		{
			name:   "text",
			events: []string{start, ping, textStart, text(0, "Hello"), text(0, " world"), blockStop, stopWith("end_turn", 2), msgStop},
			want: []string{roleChunk, chunk(`{"content":"Hello"}`, "null"), chunk(`{"content":" world"}`, "null"),
				chunk(`{}`, `"stop"`), usageChunk(`{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14}`)},
		},
		{
			name: "tool calls with streamed arguments, after text",
			events: []string{start, textStart, text(0, "Let me look."), blockStop,
				`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`,
				`{"type":"content_block_stop","index":1}`,
				`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"now","input":{}}}`,
				`{"type":"content_block_stop","index":2}`,
				stopWith("tool_use", 30), msgStop},
			want: []string{roleChunk, chunk(`{"content":"Let me look."}`, "null"),
				chunk(`{"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null"),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null"),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null"),
				chunk(`{"tool_calls":[{"index":1,"id":"toolu_2","type":"function","function":{"name":"now","arguments":""}}]}`, "null"),
				chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, "null"),
				chunk(`{}`, `"tool_calls"`), usageChunk(`{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}`)},
		},
		{
			name:   "refusal before any output",
			events: []string{start, stopWith("refusal", 0), msgStop},
			want: []string{roleChunk, chunk(`{"refusal":"`+RefusalText+`"}`, "null"), chunk(`{}`, `"content_filter"`),
				usageChunk(`{"prompt_tokens":12,"completion_tokens":0,"total_tokens":12}`)},
		},
		{
			name:   "refusal after text",
			events: []string{start, textStart, text(0, "I can't"), stopWith("refusal", 2), msgStop},
			want: []string{roleChunk, chunk(`{"content":"I can't"}`, "null"), chunk(`{}`, `"content_filter"`),
				usageChunk(`{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14}`)},
		},
		{
			name:   "max_tokens is length; cache tokens count as prompt",
			events: []string{`{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":3,"cache_creation_input_tokens":4,"cache_read_input_tokens":5,"output_tokens":1}}}`, stopWith("max_tokens", 7), msgStop},
			want: []string{roleChunk, chunk(`{}`, `"length"`),
				usageChunk(`{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":5,"cache_write_tokens":4}}`)},
		},
		{
			name:   "no usage at all: no usage chunk",
			events: []string{`{"type":"message_start","message":{"id":"msg_1","model":"claude-x"}}`, `{"type":"message_delta","delta":{"stop_reason":"stop_sequence"}}`, msgStop},
			want:   []string{roleChunk, chunk(`{}`, `"stop"`)},
		},
		{
			name: "thinking as reasoning_content; signatures, unknown events and types skipped",
			events: []string{start, `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}`,
				`{"type":"brand_new_event"}`, text(1, ""), stopWith("pause_turn", 1), msgStop, text(0, "after the end")},
			want: []string{roleChunk, chunk(`{"reasoning_content":"hmm"}`, "null"), chunk(`{}`, `"stop"`), usageChunk(`{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err, done := decodeAll(tt.events...)
			if err != nil || !done {
				t.Fatalf("err %v, done %v", err, done)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecoderOutput(t *testing.T) {
	d := NewDecoder(0)
	for _, ev := range []string{start, textStart} {
		chunks, _ := d.Decode("", []byte(ev))
		for _, c := range chunks {
			if c.Output {
				t.Errorf("%s: output before any text", ev)
			}
		}
	}
	chunks, _ := d.Decode("", []byte(text(0, "x")))
	if len(chunks) != 1 || !chunks[0].Output || chunks[0].Text != "x" {
		t.Errorf("text delta: %+v", chunks)
	}
}

func TestDecoderErrors(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		msg    string
	}{
		{"error event", []string{start, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, "Overloaded"},
		{"error event without message", []string{`{"type":"error"}`}, "unspecified upstream error"},
		{"not JSON", []string{start, `{"type":`}, "malformed upstream event"},
		{"not an object", []string{`[1]`}, "malformed upstream event"},
		{"message_start without message", []string{`{"type":"message_start"}`}, "malformed upstream event"},
		{"delta without delta", []string{`{"type":"content_block_delta","index":0}`}, "malformed upstream event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err, _ := decodeAll(tt.events...)
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Class != llm.FailTransient || pe.Message != tt.msg {
				t.Errorf("error %v, want transient %q", err, tt.msg)
			}
		})
	}
	// An error event is an upstream's mid-stream error, as ParseChunk reports one.
	_, err, _ := decodeAll(`{"type":"error","error":{"message":"boom"}}`)
	var ce *llm.ChunkError
	if !errors.As(err, &ce) || ce.Message != "boom" {
		t.Errorf("error %v does not wrap a *llm.ChunkError", err)
	}
}

// FuzzDecoder: no event sequence panics, every chunk is one ParseChunk
// accepts and the Assembler can take, and only ProviderErrors come out.
func FuzzDecoder(f *testing.F) {
	seqs := [][]string{
		{start, ping, textStart, text(0, "Hello"), blockStop, stopWith("end_turn", 2), msgStop},
		{start, `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`, `{"type":"content_block_stop","index":1}`, stopWith("tool_use", 1), msgStop},
		{start, stopWith("refusal", 0), msgStop},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{`{"type":"message_delta","usage":{"input_tokens":-1,"output_tokens":1e30}}`},
	}
	for _, s := range seqs {
		f.Add(strings.Join(s, "\n"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		d := NewDecoder(1)
		var a llm.Assembler
		for _, line := range strings.Split(in, "\n") {
			chunks, err := d.Decode("", []byte(line))
			for _, c := range chunks {
				if _, perr := llm.ParseChunk(c.Raw); perr != nil {
					t.Fatalf("chunk %s does not parse: %v", c.Raw, perr)
				}
				if err := a.AddChunk(&c); err != nil {
					t.Fatalf("assembler: %v", err)
				}
			}
			if err != nil {
				var pe *llm.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("error %T %v is not a ProviderError", err, err)
				}
				return
			}
		}
	})
}
