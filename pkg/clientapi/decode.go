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
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// The helpers the translating decoders (Messages, Responses) share: the
// errors that name a request's member, the hints dropped, and writing the
// Chat Completions body.

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

// MaxTokens bounds max_tokens so it fits any upstream's integer.
const MaxTokens = math.MaxInt32

// TextContent is a Chat message's content of text parts: "" when there
// are none.
func TextContent(parts []chat.TextPart) json.RawMessage {
	if len(parts) == 0 {
		return json.RawMessage(`""`)
	}
	return JSON(parts)
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
