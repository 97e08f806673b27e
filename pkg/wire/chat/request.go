package chat

import (
	"encoding/json"
	"strings"
)

// The content part types of a request's messages.
const (
	PartText     = "text"
	PartImageURL = "image_url"
	PartRefusal  = "refusal"
)

// The response_format types.
const (
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// ImagePart is an image_url content part of a user message.
type ImagePart struct {
	Type     string   `json:"type"`
	ImageURL ImageURL `json:"image_url"`
}

// ImageURL is an image part's image: an http(s) or data: URL, and the
// detail to see it at (left out when unset).
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// RefusalPart is a refusal content part of an assistant message.
type RefusalPart struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

// NamedToolChoice is a tool_choice that forces one function.
type NamedToolChoice struct {
	Type     string    `json:"type"`
	Function NamedFunc `json:"function"`
}

// NamedFunc names a function.
type NamedFunc struct {
	Name string `json:"name"`
}

// ResponseFormat is a request's response_format: json_object has a type
// only; json_schema has JSONSchema.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is a json_schema response format's schema. Schema and strict
// are raw, as the client wrote them; strict is left out when nil.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// RequestMessage is one message of a request's messages, as a translation
// into Chat Completions writes it. Content is a string, an array of parts
// or null (an assistant turn of tool calls only), as written.
type RequestMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// TextPart is a text content part.
type TextPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Tool is a function tool of a request's tools.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef is a tool's function: its JSON schema and strict are raw,
// as the client wrote them, and left out when nil.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// PlainContent is the text of a message content that may only hold text
// (a system, developer or tool message's), as a translation out of Chat
// Completions reads it: a string, or an array of text parts,
// concatenated. blocks translates raw as the translation does any
// message's content (at names the message, for errors), and text is one
// block's text, or the error that refuses a block that is not text.
func PlainContent[B any](raw json.RawMessage, at string, blocks func(json.RawMessage, string) ([]B, error), text func(B, string) (string, error)) (string, error) {
	bs, err := blocks(raw, at)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, bl := range bs {
		t, err := text(bl, at)
		if err != nil {
			return "", err
		}
		b.WriteString(t)
	}
	return b.String(), nil
}

// SystemPrompt is how a translation out of Chat Completions gathers the
// system and developer messages, wherever they are, into the one system
// prompt its upstream takes: their texts, empty ones left out, joined by a
// blank line. The zero SystemPrompt is empty.
type SystemPrompt struct{ texts []string }

// Add adds a message's text; an empty one is left out.
func (p *SystemPrompt) Add(text string) {
	if text != "" {
		p.texts = append(p.texts, text)
	}
}

// Text is the prompt: "" when no message added text.
func (p *SystemPrompt) Text() string { return strings.Join(p.texts, "\n\n") }
