package clientapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// The helpers the translating decoders (Messages, Responses) share: reading
// a request's JSON fields with errors that name them, and writing the Chat
// Completions body.

// HintSet collects the names of the hints a translation drops, each once,
// in the order met.
type HintSet struct{ Names []string }

func (h *HintSet) Add(name string) {
	for _, n := range h.Names {
		if n == name {
			return
		}
	}
	h.Names = append(h.Names, name)
}

// Nested adds name when m has the field (not null).
func (h *HintSet) Nested(m map[string]json.RawMessage, field, name string) {
	if _, ok := Present(m, field); ok {
		h.Add(name)
	}
}

// MaxTokens bounds max_tokens so it fits any upstream's integer.
const MaxTokens = math.MaxInt32

// ChatMessage is one Chat Completions message of the translation.
type ChatMessage struct {
	Role string `json:"role"`
	// Content is a string, an array of parts, or null (an assistant turn of
	// tool calls only).
	Content    json.RawMessage `json:"content"`
	ToolCalls  []llm.ToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type TextPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// TextContent is a Chat message's content of text parts: "" when there
// are none.
func TextContent(parts []TextPart) json.RawMessage {
	if len(parts) == 0 {
		return json.RawMessage(`""`)
	}
	return JSON(parts)
}

// Block reads a content block: an object with a string type.
func Block(raw json.RawMessage, at string) (map[string]json.RawMessage, string, error) {
	m, err := ObjectOf(raw, at)
	if err != nil {
		return nil, "", err
	}
	typ, err := StringField(m, "type", at+".type", true)
	if err != nil {
		return nil, "", err
	}
	return m, typ, nil
}

// EachBlock calls f with each element of list, a block (Block) whose path
// is at[i], until f fails.
func EachBlock(list []json.RawMessage, at string, f func(m map[string]json.RawMessage, bat, typ string) error) error {
	for i, raw := range list {
		bat := fmt.Sprintf("%s[%d]", at, i)
		m, typ, err := Block(raw, bat)
		if err != nil {
			return err
		}
		if err := f(m, bat, typ); err != nil {
			return err
		}
	}
	return nil
}

// Object writes a JSON object member by member.
type Object struct{ b []byte }

// NewObject is an empty Object with room for n bytes.
func NewObject(n int) Object { return Object{b: make([]byte, 0, n)} }

func (o *Object) Add(key string, value json.RawMessage) {
	if len(o.b) == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, JSON(key)...)
	o.b = append(o.b, ':')
	o.b = append(o.b, value...)
}

func (o *Object) Bytes() []byte {
	if len(o.b) == 0 {
		return []byte("{}")
	}
	return append(o.b, '}')
}

// JSON encodes a value of our own types, compactly and without HTML
// escaping. The only raw values inside are the client's, already parsed.
func JSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Unreachable: every value is a string, a struct of strings or a
		// json.RawMessage that the decoder accepted.
		return json.RawMessage("null")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func Invalid(param, format string, args ...any) *llm.Error {
	return llm.Errorf(llm.CodeInvalidRequest, param, format, args...)
}

func JSONProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	return "unexpected end of input"
}

// Quote quotes a client's string for a message, cut short and made
// printable.
func Quote(s string) string {
	if len(s) > 64 || !utf8.ValidString(s) {
		return "(unprintable)"
	}
	return strconv.Quote(s)
}

// Present returns a field that is there and not null.
func Present(m map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := m[name]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// Keys rejects a field not in known, the first in sorted order so the
// error does not depend on map order.
func Keys(m map[string]json.RawMessage, param string, known ...string) error {
	name, ok := llm.UnknownField(m, known...)
	if !ok {
		return nil
	}
	if name == "" {
		name = `""` // an empty key, named so that the error names a param
	}
	if param != "" {
		name = param + "." + name
	}
	return Invalid(name, "unknown field %s", name)
}

func ObjectOf(raw json.RawMessage, param string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, Invalid(param, "%s must be an object", param)
	}
	return m, nil
}

func Array(raw json.RawMessage, param, msg string) ([]json.RawMessage, error) {
	var a []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &a) != nil {
		return nil, Invalid(param, "%s", msg)
	}
	return a, nil
}

// StringField reads a string field; a required one must be there and not
// empty.
func StringField(m map[string]json.RawMessage, name, param string, required bool) (string, error) {
	raw, ok := Present(m, name)
	if !ok {
		if required {
			return "", Invalid(param, "%s is required", param)
		}
		return "", nil
	}
	s, err := StringValue(raw, param)
	if err != nil {
		return "", err
	}
	if required && s == "" {
		return "", Invalid(param, "%s must not be empty", param)
	}
	return s, nil
}

func StringValue(raw json.RawMessage, param string) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", Invalid(param, "%s must be a string", param)
	}
	return s, nil
}

// Number reads a JSON number.
func Number(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// IntField reads an integer in [lo, hi] (1024 and 1024.0 alike).
func IntField(m map[string]json.RawMessage, name, param string, lo, hi int64, required bool) (int64, error) {
	raw, ok := Present(m, name)
	if !ok {
		if required {
			return 0, Invalid(param, "%s is required", param)
		}
		return 0, nil
	}
	f, ok := Number(raw)
	if !ok || f != math.Trunc(f) {
		return 0, Invalid(param, "%s must be an integer", param)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, Invalid(param, "%s must be an integer from %d to %d", param, lo, hi)
	}
	return int64(f), nil
}

// ObjectField reads a member that holds a JSON object, kept as written
// (what says what it must be: "an object", "a JSON schema object"); a
// required one must be there. It is nil when absent or null.
func ObjectField(m map[string]json.RawMessage, name, at string, required bool, what string) (json.RawMessage, error) {
	param := at + "." + name
	raw, ok := Present(m, name)
	if !ok {
		if required {
			return nil, Invalid(param, "%s is required", param)
		}
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, Invalid(param, "%s must be %s", param, what)
	}
	return raw, nil
}

// BoolField reads a boolean field; nil when absent or null.
func BoolField(m map[string]json.RawMessage, name, param string) (*bool, error) {
	raw, ok := Present(m, name)
	if !ok {
		return nil, nil
	}
	var b bool
	switch string(raw) {
	case "true":
		b = true
	case "false":
	default:
		return nil, Invalid(param, "%s must be a boolean", param)
	}
	return &b, nil
}

// ChatTool is a Chat Completions function tool, as a request translated
// into Chat Completions carries it.
type ChatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      json.RawMessage `json:"strict,omitempty"`
	} `json:"function"`
}

// ReadTools reads the request's tools array into Chat tools: read is given
// each element, with its path tools[i] and the names of the tools so far,
// and appends the Chat tools it makes of it (none for a tool it drops) to
// tools. Both results are nil when the request has no tools.
func ReadTools(fields map[string]json.RawMessage,
	read func(tools []ChatTool, t json.RawMessage, at string, names map[string]bool) ([]ChatTool, error)) ([]ChatTool, map[string]bool, error) {
	raw, ok := Present(fields, "tools")
	if !ok {
		return nil, nil, nil
	}
	list, err := Array(raw, "tools", "tools must be an array of tools")
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]bool, len(list))
	tools := make([]ChatTool, 0, len(list))
	for i, t := range list {
		if tools, err = read(tools, t, fmt.Sprintf("tools[%d]", i), names); err != nil {
			return nil, nil, err
		}
	}
	return tools, names, nil
}

// FunctionTool reads what a function tool at at holds in every API into a
// Chat tool: its name (required; checked by nameErr when set, then unique
// among names, to which it is added), description, JSON schema (the member
// schema, an object, required when required) and strict.
func FunctionTool(m map[string]json.RawMessage, at string, names map[string]bool, nameErr func(name string) error, schema string, required bool) (ChatTool, error) {
	var out ChatTool
	out.Type = "function"
	var err error
	if out.Function.Name, err = StringField(m, "name", at+".name", true); err != nil {
		return out, err
	}
	if nameErr != nil {
		if err := nameErr(out.Function.Name); err != nil {
			return out, err
		}
	}
	if names[out.Function.Name] {
		return out, Invalid(at+".name", "%s.name: tool names must be unique", at)
	}
	names[out.Function.Name] = true
	if out.Function.Description, err = StringField(m, "description", at+".description", false); err != nil {
		return out, err
	}
	if out.Function.Parameters, err = ObjectField(m, schema, at, required, "a JSON schema object"); err != nil {
		return out, err
	}
	if strict, err := BoolField(m, "strict", at+".strict"); err != nil {
		return out, err
	} else if strict != nil {
		out.Function.Strict = json.RawMessage(strconv.FormatBool(*strict))
	}
	return out, nil
}

// ObjectBody reads a request body into its top-level fields: a body that
// is not JSON, or not an object, is an invalid request saying which.
func ObjectBody(body []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		trimmed := bytes.TrimSpace(body)
		if err != nil && (len(trimmed) == 0 || trimmed[0] == '{') {
			return nil, Invalid("", "request body is not valid JSON: %s", JSONProblem(err))
		}
		return nil, Invalid("", "request body must be a JSON object")
	}
	return fields, nil
}
