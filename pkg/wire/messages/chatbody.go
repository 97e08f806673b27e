package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/pkg/llm"
	chatwire "github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// What ToHub needs to check a request and write the Chat Completions body
// it becomes: the errors that name a request's member, the hints dropped,
// and the body written member by member.

// hintSet collects the names of the hints a translation drops, each once,
// in the order met.
type hintSet struct{ Names []string }

func (h *hintSet) Add(name string) {
	for _, n := range h.Names {
		if n == name {
			return
		}
	}
	h.Names = append(h.Names, name)
}

// maxTokens bounds max_tokens so it fits any upstream's integer.
const maxTokens = math.MaxInt32

// textContent is a Chat message's content of text parts: "" when there
// are none.
func textContent(parts []chatwire.TextPart) json.RawMessage {
	if len(parts) == 0 {
		return json.RawMessage(`""`)
	}
	return marshal(parts)
}

// object writes a JSON object member by member.
type object struct{ b []byte }

func (o *object) Add(key string, value json.RawMessage) {
	if len(o.b) == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, marshal(key)...)
	o.b = append(o.b, ':')
	o.b = append(o.b, value...)
}

func (o *object) Bytes() []byte {
	if len(o.b) == 0 {
		return []byte("{}")
	}
	return append(o.b, '}')
}

func invalid(param, format string, args ...any) *llm.Error {
	return llm.Errorf(llm.CodeInvalidRequest, param, format, args...)
}

// quote quotes a client's string for a message, cut short and made
// printable.
func quote(s string) string {
	if len(s) > 64 || !utf8.ValidString(s) {
		return "(unprintable)"
	}
	return strconv.Quote(s)
}

// unknownKey rejects a field not in known, the first in sorted order so
// the error does not depend on map order.
func unknownKey(m map[string]json.RawMessage, param string, known ...string) error {
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
	return invalid(name, "unknown field %s", name)
}

// number reads a JSON number.
func number(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// bodyError is the error of a request body that is not JSON, or not an
// object, saying which; nil for an object.
func bodyError(body []byte) error {
	var fields map[string]json.RawMessage
	err := json.Unmarshal(body, &fields)
	if err == nil && fields != nil {
		return nil
	}
	trimmed := bytes.TrimSpace(body)
	if err != nil && (len(trimmed) == 0 || trimmed[0] == '{') {
		problem := "unexpected end of input"
		var se *json.SyntaxError
		if errors.As(err, &se) {
			problem = fmt.Sprintf("syntax error at byte %d", se.Offset)
		}
		return invalid("", "request body is not valid JSON: %s", problem)
	}
	return invalid("", "request body must be a JSON object")
}
