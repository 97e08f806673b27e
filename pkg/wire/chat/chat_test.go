package chat

import (
	"encoding/json"
	"testing"
)

func TestRefusalText(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want string
		ok   bool
	}{
		{`"I can't help with that."`, "I can't help with that.", true},
		{`""`, "", true},
		{`"a\nb\u00e9"`, "a\nbé", true},
		{``, "", false}, // left out, as vLLM does
		{`null`, "", false},
		{`1`, "", false},
		{`"unterminated`, "", false},
	} {
		m := Message{Refusal: json.RawMessage(tt.raw)}
		if got, ok := m.RefusalText(); got != tt.want || ok != tt.ok {
			t.Errorf("RefusalText of %q = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
	}
}

// TestUpstreamDeltaReads checks that an upstream's delta reads the Delta's
// role, content and refusal, and its own tool calls and raw reasoning in
// place of the Delta's fields of the same names.
func TestUpstreamDeltaReads(t *testing.T) {
	raw := `{"role":"assistant","content":"hi","refusal":"no","reasoning_content":7,"reasoning":"r",` +
		`"tool_calls":[{"index":1,"id":"c","type":"function","function":{"name":null,"arguments":"{}"}}],` +
		`"function_call":{"name":"f","arguments":"a"}}`
	var d UpstreamDelta
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Role != "assistant" || d.Content == nil || *d.Content != "hi" || d.Refusal == nil || *d.Refusal != "no":
		t.Errorf("role, content, refusal = %q, %v, %v", d.Role, d.Content, d.Refusal)
	case string(d.ReasoningContent) != "7" || string(d.Reasoning) != `"r"`:
		t.Errorf("reasoning_content, reasoning = %s, %s; want them raw", d.ReasoningContent, d.Reasoning)
	case len(d.ToolCalls) != 1 || d.ToolCalls[0] != (UpstreamToolCall{Index: 1, ID: "c", Type: "function", Function: Function{Arguments: "{}"}}):
		t.Errorf("tool_calls = %+v", d.ToolCalls)
	case d.FunctionCall == nil || *d.FunctionCall != (Function{Name: "f", Arguments: "a"}):
		t.Errorf("function_call = %+v", d.FunctionCall)
	case d.Delta.ToolCalls != nil || d.Delta.ReasoningContent != nil:
		t.Errorf("the Delta's own tool_calls and reasoning_content were set: %+v", d.Delta)
	}
}
