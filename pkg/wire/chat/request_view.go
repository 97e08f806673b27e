package chat

import "encoding/json"

// RequestView is a Chat Completions request as a translation out of Chat
// Completions reads it: the top-level members it translates or refuses,
// decoded once by encoding/json (names matched regardless of case, the
// last of two equal names winning). Values a translation passes on as
// they are, or reads in more than one shape, stay raw; a member it does
// not model is not kept (a translation names those from the body's keys).
//
// A message or a tool that is not an object of its shape does not fail
// the decoding: it carries its own error (RequestViewMessage.Err,
// RequestViewTool.Err), so that a translation names the one at fault.
type RequestView struct {
	Model               string               `json:"model"`
	Messages            []RequestViewMessage `json:"messages"`
	MaxTokens           *float64             `json:"max_tokens"`
	MaxCompletionTokens *float64             `json:"max_completion_tokens"`
	Temperature         json.RawMessage      `json:"temperature"`
	TopP                json.RawMessage      `json:"top_p"`
	TopK                json.RawMessage      `json:"top_k"`
	// Stop is a string or an array of strings.
	Stop              json.RawMessage   `json:"stop"`
	Tools             []RequestViewTool `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	User              string            `json:"user"`
	ReasoningEffort   OptString         `json:"reasoning_effort"`
	ResponseFormat    json.RawMessage   `json:"response_format"`
	N                 json.RawMessage   `json:"n"`
	Logprobs          json.RawMessage   `json:"logprobs"`
	TopLogprobs       json.RawMessage   `json:"top_logprobs"`
	LogitBias         json.RawMessage   `json:"logit_bias"`
	Audio             json.RawMessage   `json:"audio"`
	Modalities        []string          `json:"modalities"`
	Functions         json.RawMessage   `json:"functions"`
	FunctionCall      json.RawMessage   `json:"function_call"`
}

// DecodeRequestView decodes a Chat Completions request body.
func DecodeRequestView(body []byte) (*RequestView, error) {
	v := new(RequestView)
	if err := json.Unmarshal(body, v); err != nil {
		return nil, err
	}
	return v, nil
}

// OptString is a string member as encoding/json reads one into a string
// (a null leaves the value as it was), and whether the last value written
// was not null.
type OptString struct {
	Value string
	Set   bool
}

// UnmarshalJSON reads a string or null.
func (o *OptString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		o.Set = false
		return nil
	}
	o.Set = true
	return json.Unmarshal(b, &o.Value)
}

// RequestViewMessage is one message of a request. Content is a string, an
// array of parts or null, as written; ToolCalls are raw, each read by the
// translation that reads it.
type RequestViewMessage struct {
	Role       string
	Content    json.RawMessage
	ToolCalls  []json.RawMessage
	ToolCallID string
	// HasName: the message has a member "name" (spelled so) that is not
	// null.
	HasName bool
	// Null: the message is null.
	Null bool
	// Err is why the message is not an object of this shape (its members
	// are then what could be read).
	Err error
}

// UnmarshalJSON reads a message; it fails only when b is not JSON, and
// keeps any other problem in Err.
func (m *RequestViewMessage) UnmarshalJSON(b []byte) error {
	// An unnamed struct, so that encoding/json's errors name the field
	// alone.
	var in struct {
		Role       string            `json:"role"`
		Content    json.RawMessage   `json:"content"`
		ToolCalls  []json.RawMessage `json:"tool_calls"`
		ToolCallID string            `json:"tool_call_id"`
		Name       json.RawMessage   `json:"name"`
	}
	*m = RequestViewMessage{Null: string(b) == "null"}
	m.Err = json.Unmarshal(b, &in)
	m.Role, m.Content, m.ToolCalls, m.ToolCallID = in.Role, in.Content, in.ToolCalls, in.ToolCallID
	if in.Name != nil && m.Err == nil {
		// A member whose name folds to "name" is there: look for the one
		// spelled so.
		var keys map[string]json.RawMessage
		if json.Unmarshal(b, &keys) == nil {
			name, ok := keys["name"]
			m.HasName = ok && string(name) != "null"
		}
	}
	return nil
}

// RequestViewTool is one tool of a request's tools.
type RequestViewTool struct {
	Type     string
	Function RequestViewFunction
	// Err is why the tool is not an object of this shape.
	Err error
}

// RequestViewFunction is a tool's function; Parameters is its JSON schema
// as written.
type RequestViewFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// UnmarshalJSON reads a tool; it fails only when b is not JSON, and keeps
// any other problem in Err.
func (t *RequestViewTool) UnmarshalJSON(b []byte) error {
	var in struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		} `json:"function"`
	}
	err := json.Unmarshal(b, &in)
	*t = RequestViewTool{Type: in.Type, Function: RequestViewFunction(in.Function), Err: err}
	return nil
}
