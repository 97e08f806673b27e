package responses

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
func textContent(parts []chat.TextPart) json.RawMessage {
	if len(parts) == 0 {
		return json.RawMessage(`""`)
	}
	return jsonValue(parts)
}

// objectWriter writes a JSON object member by member.
type objectWriter struct{ b []byte }

// newObjectWriter is an empty objectWriter with room for n bytes.
func newObjectWriter(n int) objectWriter { return objectWriter{b: make([]byte, 0, n)} }

func (o *objectWriter) Add(key string, value json.RawMessage) {
	if len(o.b) == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, jsonValue(key)...)
	o.b = append(o.b, ':')
	o.b = append(o.b, value...)
}

func (o *objectWriter) Bytes() []byte {
	if len(o.b) == 0 {
		return []byte("{}")
	}
	return append(o.b, '}')
}

// jsonValue encodes a value of this package's own types, compactly and
// without HTML escaping. The only raw values inside are the client's,
// already parsed.
func jsonValue(v any) json.RawMessage {
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

func invalid(param, format string, args ...any) *llm.Error {
	return llm.Errorf(llm.CodeInvalidRequest, param, format, args...)
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	return "unexpected end of input"
}

// quote quotes a client's string for a message, cut short and made
// printable.
func quote(s string) string {
	if len(s) > 64 || !utf8.ValidString(s) {
		return "(unprintable)"
	}
	return strconv.Quote(s)
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

// objectBody reads a request body into its top-level fields: a body that
// is not JSON, or not an object, is an invalid request saying which.
func objectBody(body []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		trimmed := bytes.TrimSpace(body)
		if err != nil && (len(trimmed) == 0 || trimmed[0] == '{') {
			return nil, invalid("", "request body is not valid JSON: %s", jsonProblem(err))
		}
		return nil, invalid("", "request body must be a JSON object")
	}
	return fields, nil
}
