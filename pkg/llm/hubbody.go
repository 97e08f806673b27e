package llm

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/internal/jsonstr"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// What a translation into the hub (a Messages or Responses request read
// as a Chat Completions body) needs to check a client's request and write
// the body it becomes: the errors that name the request's member at
// fault, the hints it drops, and the body written member by member.

// HintSet collects the names of the hints a translation drops, each once,
// in the order met.
type HintSet struct{ Names []string }

// Add adds name unless it is there already.
func (h *HintSet) Add(name string) {
	for _, n := range h.Names {
		if n == name {
			return
		}
	}
	h.Names = append(h.Names, name)
}

// MaxTokensBound bounds a request's max_tokens so it fits any upstream's
// integer.
const MaxTokensBound = math.MaxInt32

// TextContent is a Chat message's content of text parts: "" when there
// are none.
func TextContent(parts []chat.TextPart) json.RawMessage {
	if len(parts) == 0 {
		return json.RawMessage(`""`)
	}
	return jsonobj.Marshal(parts)
}

// ObjectWriter writes a JSON object member by member; the zero value is
// an empty object.
type ObjectWriter struct{ b []byte }

// NewObjectWriter is an empty ObjectWriter with room for n bytes.
func NewObjectWriter(n int) ObjectWriter { return ObjectWriter{b: make([]byte, 0, n)} }

// Add writes the member key with value, which must be one JSON value.
func (o *ObjectWriter) Add(key string, value json.RawMessage) {
	if len(o.b) == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	o.b = jsonstr.Append(o.b, key, false)
	o.b = append(o.b, ':')
	o.b = append(o.b, value...)
}

// Bytes is the object written.
func (o *ObjectWriter) Bytes() []byte {
	if len(o.b) == 0 {
		return []byte("{}")
	}
	return append(o.b, '}')
}

// Invalid is the invalid_request error naming param, the request's member
// at fault ("" for the whole body).
func Invalid(param, format string, args ...any) *Error {
	return Errorf(CodeInvalidRequest, param, format, args...)
}

// Quote quotes a client's string for an error message, made printable:
// one longer than 64 bytes or not valid UTF-8 reads "(unprintable)".
func Quote(s string) string {
	if len(s) > 64 || !utf8.ValidString(s) {
		return "(unprintable)"
	}
	return strconv.Quote(s)
}

// BodyError is the error of a request body a translation could not read
// as its request at the top level: where the body stops being JSON, or
// that it must be a JSON object (also for an object that a stricter
// reading than encoding/json's refused).
func BodyError(body []byte) *Error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return bodyError(body, err)
	}
	return Invalid("", "request body must be a JSON object")
}
