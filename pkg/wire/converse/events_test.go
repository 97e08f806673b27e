package converse

import (
	"encoding/json"
	"testing"
)

// TestEvents encodes each event as the Bedrock Runtime's API reference
// shows it (ConverseStreamOutput's members, PayloadPart, the error body).
func TestEvents(t *testing.T) {
	text, half := "Hello", `{"city":`
	for _, tt := range []struct {
		v    any
		want string
	}{
		{MessageStart{Role: "assistant"}, `{"role":"assistant"}`},
		{ContentBlockStart{ContentBlockIndex: 1, Start: BlockStart{ToolUse: &ToolUseStart{ToolUseID: "tooluse_1", Name: "get_weather"}}},
			`{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather"}}}`},
		{ContentBlockDelta{Delta: BlockDelta{Text: &text}}, `{"contentBlockIndex":0,"delta":{"text":"Hello"}}`},
		{ContentBlockDelta{Delta: BlockDelta{ToolUse: &ToolUseDelta{Input: half}}},
			`{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"city\":"}}}`},
		{ContentBlockStop{ContentBlockIndex: 2}, `{"contentBlockIndex":2}`},
		{MessageStop{StopReason: StopToolUse}, `{"stopReason":"tool_use"}`},
		{Metadata{Usage: Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}, Metrics: Metrics{LatencyMs: 7}},
			`{"usage":{"inputTokens":10,"outputTokens":2,"totalTokens":12},"metrics":{"latencyMs":7}}`},
		{PayloadPart{Bytes: []byte(`{"type":"ping"}`)}, `{"bytes":"eyJ0eXBlIjoicGluZyJ9"}`},
		{Error{Message: "Too many requests"}, `{"message":"Too many requests"}`},
	} {
		b, err := json.Marshal(tt.v)
		if err != nil || string(b) != tt.want {
			t.Errorf("%T: %s, %v; want %s", tt.v, b, err, tt.want)
		}
	}
}

func TestIsException(t *testing.T) {
	for member, want := range map[string]bool{
		"throttlingException": true, "ThrottlingException": true, "modelStreamErrorEXCEPTION": true, "exception": true,
		"messageStart": false, "metadata": false, "": false, "xception": false, "exceptionNot": false,
	} {
		if got := IsException(member); got != want {
			t.Errorf("IsException(%q) = %v, want %v", member, got, want)
		}
	}
}
