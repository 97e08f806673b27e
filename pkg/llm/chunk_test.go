package llm

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

func ptr[T any](v T) *T { return &v }

// TestParseChunkTyped: a chunk's choices read as typed values, and the
// fields derived from them.
func TestParseChunkTyped(t *testing.T) {
	for _, c := range []struct {
		name string
		raw  string
		want Chunk
	}{
		{
			name: "text",
			raw:  `{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","system_fingerprint":"fp","service_tier":"default","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":null}]}`,
			want: Chunk{ID: "c1", Model: "m", Created: 7, SystemFingerprint: "fp", ServiceTier: "default",
				Choices: []ChunkChoice{{Delta: Delta{Role: "assistant", Content: ptr("Hi")}}},
				Output:  true, Seen: 1, HasChoices: true, Text: "Hi"},
		},
		{
			name: "reasoning, a refusal and a finish",
			raw:  `{"choices":[{"index":1,"delta":{"reasoning_content":"hmm","reasoning":{"odd":1},"refusal":"no"},"finish_reason":"stop","stop_reason":"END"}]}`,
			want: Chunk{
				Choices: []ChunkChoice{{Index: 1, Delta: Delta{ReasoningContent: "hmm", Refusal: ptr("no")}, FinishReason: "stop", StopSequence: ptr("END")}},
				Output:  true, FinishReason: "stop", Seen: 2, Finished: 2, HasChoices: true, Text: "nohmm"},
		},
		{
			name: "a tool call, a token id as stop reason",
			raw:  `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"stop_reason":128}]}`,
			want: Chunk{
				Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCallDelta{{Index: 2, ID: "call_1", Type: "function", Function: chat.Function{Name: "f", Arguments: `{"a":1}`}}}}}},
				Output:  true, Seen: 1, HasChoices: true, Text: `f{"a":1}`},
		},
		{
			name: "usage only",
			raw:  `{"id":"c1","choices":[],"usage":{"prompt_tokens":3}}`,
			want: Chunk{ID: "c1", Choices: []ChunkChoice{}, Usage: &Usage{PromptTokens: 3, TotalTokens: 3}},
		},
		{
			name: "logprobs, through encoding/json (a key in other case)",
			raw:  `{"Id":"c1","choices":[{"index":0,"delta":{"content":""},"logprobs":{"content":[{"token":"a"}]}}]}`,
			want: Chunk{ID: "c1",
				Choices: []ChunkChoice{{Delta: Delta{Content: ptr("")}, Logprobs: &chat.Logprobs{Content: []json.RawMessage{json.RawMessage(`{"token":"a"}`)}}}},
				Seen:    1, HasChoices: true},
		},
	} {
		got, err := ParseChunk([]byte(c.raw))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		c.want.Raw = []byte(c.raw)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: ParseChunk (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestChunkFromTypedFields: a chunk built from its typed fields, with no
// Raw, reads as the chunk parsed from its JSON does.
func TestChunkFromTypedFields(t *testing.T) {
	raw := []string{
		`{"id":"c1","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","reasoning":"think","content":"Hel"}}]}`,
		`{"id":"c1","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"lo","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls","stop_reason":"x"}]}`,
	}
	typed := []Chunk{
		{ID: "c1", Created: 7, Model: "m", Choices: []ChunkChoice{{Delta: Delta{Role: "assistant", Reasoning: "think", Content: ptr("Hel")}}}},
		{ID: "c1", Created: 7, Model: "m", Choices: []ChunkChoice{{
			Delta:        Delta{Content: ptr("lo"), ToolCalls: []ToolCallDelta{{ID: "call_1", Type: "function", Function: chat.Function{Name: "f", Arguments: "{}"}}}},
			FinishReason: "tool_calls", StopSequence: ptr("x"),
		}}},
	}
	var fromRaw, fromTyped Assembler
	var relayRaw, relayTyped []string
	funcs := func(out *[]string) *DeltaFuncs {
		add := func(kind string) func(string) { return func(s string) { *out = append(*out, kind+":"+s) } }
		return &DeltaFuncs{Text: add("text"), Refusal: add("refusal"), Reasoning: add("reasoning"), StopSequence: add("stop"),
			ToolCall: func(i int, id, name, args string) { *out = append(*out, "tool:"+id+name+args) }}
	}
	for i := range raw {
		parsed, err := ParseChunk([]byte(raw[i]))
		if err != nil {
			t.Fatal(err)
		}
		c := typed[i]
		c.derive()
		parsed.Raw = nil
		if diff := cmp.Diff(parsed, c); diff != "" {
			t.Errorf("chunk %d: derived fields (-parsed +typed):\n%s", i, diff)
		}
		if err := fromRaw.AddChunk(&Chunk{Raw: []byte(raw[i])}); err != nil {
			t.Fatal(err)
		}
		if err := fromTyped.AddChunk(&c); err != nil {
			t.Fatal(err)
		}
		(&Chunk{Raw: []byte(raw[i])}).FirstChoice(funcs(&relayRaw))
		c.FirstChoice(funcs(&relayTyped))
	}
	want, err := fromRaw.Completion(Usage{}, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := fromTyped.Completion(Usage{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("assembled (-from Raw +from typed fields):\n%s", diff)
	}
	if diff := cmp.Diff(relayRaw, relayTyped); diff != "" || len(relayRaw) != 5 {
		t.Errorf("relayed %q (-from Raw +from typed fields):\n%s", relayRaw, diff)
	}
}

// TestParseChunkError: a chunk's "error" member is a *ChunkError with its
// message, whatever else the error object holds.
func TestParseChunkError(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`{"error":{"message":"overloaded","type":"server_error","code":null}}`, "overloaded"},
		{`{"error":{"message":"overloaded","type":5,"code":503,"param":{}}}`, "overloaded"},
		{`{"error":{"type":"server_error"}}`, "unspecified upstream error"},
		{`{"error":{"message":5}}`, "unspecified upstream error"},
		{`{"error":"overloaded"}`, "unspecified upstream error"},
		{`{"error":[1]}`, "unspecified upstream error"},
	} {
		_, err := ParseChunk([]byte(tt.raw))
		var ce *ChunkError
		if !errors.As(err, &ce) || ce.Message != tt.want {
			t.Errorf("ParseChunk(%s) = %v, want a *ChunkError %q", tt.raw, err, tt.want)
		}
	}
}
