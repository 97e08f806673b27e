package chat

import (
	"encoding/json"
	"errors"
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

// TestPlainContent checks that PlainContent joins the text of the blocks
// a translation reads, and passes on the translation's errors, the first
// block that is not text refusing the content.
func TestPlainContent(t *testing.T) {
	// blocks reads a content as a translation would: a string is one
	// block, an array its strings; anything else fails.
	blocks := func(raw json.RawMessage, at string) ([]string, error) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []string{s}, nil
		}
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, errors.New(at + ".content is malformed")
		}
		return l, nil
	}
	// text takes blocks that do not start with "img:" as text.
	text := func(b, at string) (string, error) {
		if len(b) >= 4 && b[:4] == "img:" {
			return "", errors.New(at + ".content may only hold text")
		}
		return b, nil
	}
	for _, tt := range []struct {
		raw, want, err string
	}{
		{`"hi"`, "hi", ""},
		{`["a","b","c"]`, "abc", ""},
		{`[]`, "", ""},
		{`["a","img:x","b"]`, "", "messages[2].content may only hold text"},
		{`5`, "", "messages[2].content is malformed"},
	} {
		got, err := PlainContent(json.RawMessage(tt.raw), "messages[2]", blocks, text)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err || got != "" {
				t.Errorf("PlainContent(%s) = %q, %v; want error %q", tt.raw, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("PlainContent(%s) = %q, %v; want %q", tt.raw, got, err, tt.want)
		}
	}
}

// TestSystemPrompt checks that the system prompt joins the messages' texts
// by a blank line, leaving out empty ones.
func TestSystemPrompt(t *testing.T) {
	for _, tt := range []struct {
		texts []string
		want  string
	}{
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "", "b\n", "c"}, "a\n\nb\n\n\nc"},
	} {
		var p SystemPrompt
		for _, s := range tt.texts {
			p.Add(s)
		}
		if got := p.Text(); got != tt.want {
			t.Errorf("%q: Text() = %q, want %q", tt.texts, got, tt.want)
		}
	}
}
