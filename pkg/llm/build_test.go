package llm

import (
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// buildCases are chunks of every shape a translation makes.
func buildCases() map[string]chat.Chunk {
	one := func(d chat.Delta, finish *string) chat.Chunk {
		return chat.Chunk{ID: "chatcmpl-1", Object: chat.ObjectChunk, Created: 1735689600, Model: "m",
			Choices: []chat.ChunkChoice{{Delta: d, FinishReason: finish}}}
	}
	return map[string]chat.Chunk{
		"role":      one(chat.Delta{Role: "assistant", Content: ptr("")}, nil),
		"text":      one(chat.Delta{Content: ptr("Hello <b> & \u2028 \"x\"")}, nil),
		"refusal":   one(chat.Delta{Refusal: ptr("No.")}, nil),
		"reasoning": one(chat.Delta{ReasoningContent: ptr("Think \"hard\".")}, nil),
		"tool start": one(chat.Delta{ToolCalls: []chat.DeltaToolCall{{Index: 1, ID: "t1", Type: "function",
			Function: &chat.DeltaFunction{Name: ptr("get_weather"), Arguments: ptr("")}}}}, nil),
		"tool args":    one(chat.Delta{ToolCalls: []chat.DeltaToolCall{{Index: 1, Function: &chat.DeltaFunction{Arguments: ptr(`{"city":`)}}}}, nil),
		"tool bare":    one(chat.Delta{ToolCalls: []chat.DeltaToolCall{{Index: 0}}}, nil),
		"finish":       one(chat.Delta{}, ptr("tool_calls")),
		"empty finish": one(chat.Delta{}, ptr("")),
		"stop reason": {ID: "c", Model: "m", Choices: []chat.ChunkChoice{{Delta: chat.Delta{Content: ptr("x")},
			FinishReason: ptr("stop"), StopReason: ptr("END")}}},
		"logprobs": {ID: "c", Model: "m", Choices: []chat.ChunkChoice{{Delta: chat.Delta{Content: ptr("x")},
			Logprobs: json.RawMessage(`{"content":[{"token":"x","logprob":-0.1}],"refusal":null}`)}}},
		"choices": {ID: "c", Model: "m", SystemFingerprint: "fp", ServiceTier: "default", Choices: []chat.ChunkChoice{
			{Index: 0, Delta: chat.Delta{Content: ptr("a")}, FinishReason: ptr("stop")},
			{Index: 1, Delta: chat.Delta{Content: ptr("b")}},
			{Index: 70, Delta: chat.Delta{}, FinishReason: ptr("length")}}},
		"usage": {ID: "c", Object: chat.ObjectChunk, Model: "m", Choices: []chat.ChunkChoice{},
			Usage: json.RawMessage(`{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`)},
		"usage null": {ID: "c", Model: "m", Choices: []chat.ChunkChoice{}, Usage: json.RawMessage(`null`)},
	}
}

// firstChoice is what FirstChoice passes on, in order.
func firstChoice(c *Chunk) []string {
	var got []string
	finish := c.FirstChoice(&DeltaFuncs{
		Text:         func(s string) { got = append(got, "text "+s) },
		Refusal:      func(s string) { got = append(got, "refusal "+s) },
		Reasoning:    func(s string) { got = append(got, "reasoning "+s) },
		StopSequence: func(s string) { got = append(got, "stop "+s) },
		ToolCall: func(index int, id, name, args string) {
			got = append(got, fmt.Sprintf("tool %d %s %s %s", index, id, name, args))
		},
	})
	return append(got, "finish "+finish)
}

// TestChatChunk: a chunk made from typed fields is the chunk ParseChunk
// reads from its JSON, in everything the pipeline and the codecs read of
// it (its fields, FirstChoice, the Assembler's answer).
func TestChatChunk(t *testing.T) {
	for name, c := range buildCases() {
		t.Run(name, func(t *testing.T) {
			got, err := ChatChunk(&c, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ParseChunk(got.Raw)
			if err != nil {
				t.Fatalf("Raw %s: %v", got.Raw, err)
			}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Chunk{})); diff != "" {
				t.Errorf("chunk of %s (-parsed +built):\n%s", got.Raw, diff)
			}
			if diff := cmp.Diff(firstChoice(&want), firstChoice(&got)); diff != "" {
				t.Errorf("FirstChoice (-parsed +built):\n%s", diff)
			}
			var fromRaw, built Assembler
			if err := fromRaw.Add(got.Raw); err != nil {
				t.Fatal(err)
			}
			if err := built.AddChunk(&got); err != nil {
				t.Fatal(err)
			}
			a, _ := fromRaw.Answer(Usage{})
			b, _ := built.Answer(Usage{})
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("assembled (-parsed +built):\n%s", diff)
			}
		})
	}
}

// TestChatChunkRaw: Raw is the chunk as OpenAI writes it.
func TestChatChunkRaw(t *testing.T) {
	c := buildCases()["text"]
	got, err := ChatChunk(&c, nil)
	want := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"Hello <b> & \u2028 \"x\""},"finish_reason":null}]}`
	if err != nil || string(got.Raw) != want {
		t.Errorf("Raw %s, %v; want %s", got.Raw, err, want)
	}
	c = buildCases()["usage"]
	c.Usage = json.RawMessage(`{"prompt_tokens":`)
	if _, err := ChatChunk(&c, nil); err == nil {
		t.Error("a malformed usage: no error")
	}
	c = buildCases()["logprobs"]
	c.Choices[0].Logprobs = json.RawMessage(`{"content":7}`)
	if _, err := ChatChunk(&c, nil); err == nil {
		t.Error("logprobs of another shape: no error")
	}
}

// FuzzChatChunk: for any text, a built chunk is its parsed JSON.
func FuzzChatChunk(f *testing.F) {
	f.Add("Hello", "get_weather", `{"city":"Paris"}`, "stop")
	f.Add("", "", "", "")
	f.Add("<\u2028\x00\"\\>", "\u00e9", "\U0001F600", "tool_calls")
	f.Fuzz(func(t *testing.T, text, name, args, finish string) {
		for _, s := range []string{text, name, args, finish} {
			if !utf8.ValidString(s) {
				return // the SDK's decoder gives valid UTF-8 alone
			}
		}
		c := chat.Chunk{ID: text, Model: name, Choices: []chat.ChunkChoice{{Delta: chat.Delta{Content: &text, ReasoningContent: &args,
			ToolCalls: []chat.DeltaToolCall{{ID: args, Function: &chat.DeltaFunction{Name: &name, Arguments: &args}}}}, FinishReason: &finish}}}
		got, err := ChatChunk(&c, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ParseChunk(got.Raw)
		if err != nil {
			t.Fatalf("Raw %s: %v", got.Raw, err)
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Chunk{})); diff != "" {
			t.Errorf("chunk of %s (-parsed +built):\n%s", got.Raw, diff)
		}
		if diff := cmp.Diff(firstChoice(&want), firstChoice(&got)); diff != "" {
			t.Errorf("FirstChoice (-parsed +built):\n%s", diff)
		}
	})
}
