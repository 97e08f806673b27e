package chat

import "testing"

// TestDecodeRequestView: the members are read as encoding/json reads them
// (any case, the last of two equal names winning); a message or tool not
// of its shape keeps its own error; a message's name counts only when
// spelled "name" and not null.
func TestDecodeRequestView(t *testing.T) {
	v, err := DecodeRequestView([]byte(`{"Model":"m","max_tokens":5,"reasoning_effort":"high","reasoning_effort":null,
		"messages":[{"role":"user","content":"hi","name":"bob"},null,1,{"ROLE":"assistant","content":null,"tool_calls":[{"id":"c"}],"Name":"x"},{"role":"tool","tool_call_id":"c","name":null}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":true}},{"type":1},null]}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "m" || v.MaxTokens == nil || *v.MaxTokens != 5 {
		t.Errorf("model %q max_tokens %v", v.Model, v.MaxTokens)
	}
	if v.ReasoningEffort != (OptString{Value: "high", Set: false}) {
		t.Errorf("reasoning_effort %+v, want high left by null, not set", v.ReasoningEffort)
	}
	type msg struct {
		role, content string
		calls         int
		id            string
		name, null    bool
		err           bool
	}
	want := []msg{
		{role: "user", content: `"hi"`, name: true},
		{null: true},
		{err: true},
		{role: "assistant", content: "null", calls: 1},
		{role: "tool", id: "c"},
	}
	if len(v.Messages) != len(want) {
		t.Fatalf("%d messages, want %d", len(v.Messages), len(want))
	}
	for i, m := range v.Messages {
		got := msg{m.Role, string(m.Content), len(m.ToolCalls), m.ToolCallID, m.HasName, m.Null, m.Err != nil}
		if got != want[i] {
			t.Errorf("messages[%d] = %+v, want %+v", i, got, want[i])
		}
	}
	if len(v.Tools) != 3 {
		t.Fatalf("%d tools", len(v.Tools))
	}
	if f := v.Tools[0]; f.Err != nil || f.Type != "function" || f.Function.Name != "f" || string(f.Function.Parameters) != `{"type":"object"}` || f.Function.Strict == nil || !*f.Function.Strict {
		t.Errorf("tools[0] = %+v", f)
	}
	if v.Tools[1].Err == nil {
		t.Error("tools[1]: no error for a type that is not a string")
	}
	if f := v.Tools[2]; f.Err != nil || f.Type != "" {
		t.Errorf("tools[2] (null) = %+v", f)
	}
}

// TestDecodeRequestViewFails: a body that is not an object of the shape
// fails as encoding/json fails it.
func TestDecodeRequestViewFails(t *testing.T) {
	for _, body := range []string{`[]`, `{"max_tokens":"x"}`, `{"messages":"x"}`, `{"tools":{}}`, `{"reasoning_effort":1}`, `{`} {
		if _, err := DecodeRequestView([]byte(body)); err == nil {
			t.Errorf("%s: no error", body)
		}
	}
}
