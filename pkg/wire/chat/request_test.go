package chat

import (
	"encoding/json"
	"testing"
)

// TestRequestPartsEncoding pins what a translated request's messages,
// parts, tools, formats and tool_choice read as: members in OpenAI's order, unset optional ones
// left out.
func TestRequestPartsEncoding(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   any
		want string
	}{
		{"image", ImagePart{Type: PartImageURL, ImageURL: ImageURL{URL: "https://x", Detail: "low"}},
			`{"type":"image_url","image_url":{"url":"https://x","detail":"low"}}`},
		{"image without detail", ImagePart{Type: PartImageURL, ImageURL: ImageURL{URL: "data:image/png;base64,AA=="}},
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}`},
		{"refusal", RefusalPart{Type: PartRefusal, Refusal: ""}, `{"type":"refusal","refusal":""}`},
		{"tool_choice", NamedToolChoice{Type: ToolTypeFunction, Function: NamedFunc{Name: "f"}},
			`{"type":"function","function":{"name":"f"}}`},
		{"json_object", ResponseFormat{Type: FormatJSONObject}, `{"type":"json_object"}`},
		{"json_schema", ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchema{Name: "a", Description: "d", Schema: json.RawMessage(`{"type":"object"}`), Strict: json.RawMessage(`true`)}},
			`{"type":"json_schema","json_schema":{"name":"a","description":"d","schema":{"type":"object"},"strict":true}}`},
		{"json_schema, least", ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchema{Name: "a", Schema: json.RawMessage(`{}`)}},
			`{"type":"json_schema","json_schema":{"name":"a","schema":{}}}`},
		{"message", RequestMessage{Role: "user", Content: json.RawMessage(`"q"`)}, `{"role":"user","content":"q"}`},
		{"tool calls", RequestMessage{Role: RoleAssistant, Content: json.RawMessage(`null`), ToolCalls: []ToolCall{{ID: "c", Type: ToolTypeFunction, Function: Function{Name: "f", Arguments: "{}"}}}},
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
		{"tool message", RequestMessage{Role: "tool", Content: json.RawMessage(`[{"type":"text","text":"r"}]`), ToolCallID: "c"},
			`{"role":"tool","content":[{"type":"text","text":"r"}],"tool_call_id":"c"}`},
		{"text", TextPart{Type: PartText, Text: ""}, `{"type":"text","text":""}`},
		{"tool", Tool{Type: ToolTypeFunction, Function: FunctionDef{Name: "f", Description: "d", Parameters: json.RawMessage(`{}`), Strict: json.RawMessage(`false`)}},
			`{"type":"function","function":{"name":"f","description":"d","parameters":{},"strict":false}}`},
		{"tool, least", Tool{Type: ToolTypeFunction, Function: FunctionDef{Name: "f"}}, `{"type":"function","function":{"name":"f"}}`},
	} {
		got, err := json.Marshal(tt.in)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: got %s (%v), want %s", tt.name, got, err, tt.want)
		}
	}
}
