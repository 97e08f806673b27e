package llm

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAssembler(t *testing.T) {
	chunks := []string{
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"up","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"up","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"up","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"up","choices":[{"index":1,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"a\""}}]},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"up","choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	}
	var a Assembler
	for _, c := range chunks {
		if err := a.Add([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	body, err := a.Completion(Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5, Cost: 0.25}, "")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"id": "c1", "object": "chat.completion", "created": 7.0, "model": "up", "system_fingerprint": "fp",
		"choices": []any{
			map[string]any{"index": 0.0, "logprobs": nil, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": "Hello", "refusal": nil}},
			map[string]any{"index": 1.0, "logprobs": nil, "finish_reason": "tool_calls",
				"message": map[string]any{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": []any{
					map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "get", "arguments": `{"a":1}`}},
				}}},
		},
		"usage": map[string]any{"prompt_tokens": 3.0, "completion_tokens": 2.0, "total_tokens": 5.0, "cost": 0.25},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("completion (-want +got):\n%s", diff)
	}
}

func TestAssemblerRefusalAndOverride(t *testing.T) {
	var a Assembler
	a.Add([]byte(`{"id":"c","choices":[{"index":0,"delta":{"refusal":"I can't"}}]}`))
	body, err := a.Completion(Usage{}, "incomplete")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal *string `json:"refusal"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if c.Message.Content != nil || c.Message.Refusal == nil || *c.Message.Refusal != "I can't" || c.FinishReason != "incomplete" {
		t.Errorf("got %s", body)
	}
}

func TestParseUsageAndCost(t *testing.T) {
	u, err := ParseUsage(json.RawMessage(`{"prompt_tokens":1000000,"completion_tokens":2000000,"total_tokens":3000000,"cost":99,"prompt_tokens_details":{"cached_tokens":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	u.Cost = PriceOf(Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}, Prices{Input: 0.15, Output: 0.60})
	if u.Cost != 1.35 {
		t.Errorf("cost = %v, want 1.35 (the upstream's own cost must be ignored)", u.Cost)
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"prompt_tokens":1000000,"completion_tokens":2000000,"total_tokens":3000000,"cost":1.35,"prompt_tokens_details":{"cached_tokens":5}}`
	if string(b) != want {
		t.Errorf("usage JSON\n got %s\nwant %s", b, want)
	}
	if got := PriceOf(Usage{PromptTokens: 10}, Prices{Input: 0.15}); got != 1.5e-06 {
		t.Errorf("PriceOf(10 tokens at 0.15/M) = %v, want 1.5e-06", got)
	}
}

func TestParseChunk(t *testing.T) {
	tests := []struct {
		raw    string
		output bool
		finish string
		usage  bool
	}{
		{`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, false, "", false},
		{`{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}`, true, "", false},
		{`{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`, true, "", false},
		{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}`, true, "", false},
		{`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, false, "stop", false},
		{`{"choices":[],"usage":{"prompt_tokens":1}}`, false, "", true},
	}
	for _, tt := range tests {
		c, err := ParseChunk([]byte(tt.raw))
		if err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		if c.Output != tt.output || c.FinishReason != tt.finish || (c.Usage != nil) != tt.usage {
			t.Errorf("%s: output %v finish %q usage %v", tt.raw, c.Output, c.FinishReason, c.Usage != nil)
		}
	}
	if _, err := ParseChunk([]byte(`{"error":{"message":"boom"}}`)); err == nil || err.Error() != "upstream error event: boom" {
		t.Errorf("error event: got %v", err)
	}
	if _, err := ParseChunk([]byte(`nope`)); err == nil {
		t.Error("malformed chunk parsed")
	}
}
