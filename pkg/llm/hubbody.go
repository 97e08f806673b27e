package llm

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
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
// an empty object. It keeps the members it writes, so that the request
// they make is read from them (Hub.Request), not decoded again.
type ObjectWriter struct {
	b      []byte
	fields map[string]json.RawMessage
	// messages is the number of messages AddMessages wrote (-1: the
	// member was not written by AddMessages).
	messages int
	// reread: a member's name was written twice, or escaped, or is not
	// valid UTF-8, or a value has spaces around it; the object is then
	// read by DecodeChatRequest, which names the problem or reads such a
	// member as it does.
	reread bool
}

// NewObjectWriter is an empty ObjectWriter with room for n bytes.
func NewObjectWriter(n int) ObjectWriter {
	return ObjectWriter{b: make([]byte, 0, n), messages: -1}
}

// Add writes the member key with value, which must be one JSON value.
func (o *ObjectWriter) Add(key string, value json.RawMessage) {
	if len(o.b) == 0 {
		o.b = append(o.b, '{')
		o.messages = -1
	} else {
		o.b = append(o.b, ',')
	}
	o.b = jsonstr.Append(o.b, key, false)
	o.b = append(o.b, ':')
	o.b = append(o.b, value...)
	if o.fields == nil {
		o.fields = make(map[string]json.RawMessage, 8)
	}
	if _, twice := o.fields[key]; twice || !plainName(key) || !trimmed(value) {
		o.reread = true
	}
	o.fields[key] = value
}

// AddMessages writes the member "messages", list: an array of n Chat
// Completions messages, each an object whose member "role" is a non-empty
// string, as a translation writes them (checkMessages's checks hold). A
// list that is not an array (the null of an encoder that failed) is
// checked all the same.
func (o *ObjectWriter) AddMessages(n int, list json.RawMessage) {
	o.Add("messages", list)
	if len(list) > 0 && list[0] == '[' {
		o.messages = n
	}
}

// plainName reports whether key is written as it is, and read back so
// by the request's scanner: valid UTF-8 with nothing to escape (as
// jsonstr escapes U+2028 and U+2029 too).
func plainName(key string) bool {
	for _, c := range []byte(key) {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.ValidString(key) && !strings.ContainsAny(key, "\u2028\u2029")
}

// trimmed reports whether v begins and ends with no space, as a value
// the request's scanner reads (a member's value is read without them).
func trimmed(v json.RawMessage) bool {
	return len(v) > 0 && !isSpace(v[0]) && !isSpace(v[len(v)-1])
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// Bytes is the object written.
func (o *ObjectWriter) Bytes() []byte {
	if len(o.b) == 0 {
		return []byte("{}")
	}
	return append(o.b, '}')
}

// Hub is a client's request translated into the hub: the Chat Completions
// body a translation wrote and, when an ObjectWriter wrote it, the members
// it wrote, which Request reads rather than decoding the body again.
type Hub struct {
	body     []byte
	fields   map[string]json.RawMessage
	messages int
	reread   bool
}

// HubOf is body, a Chat Completions request, as a Hub that Request
// decodes.
func HubOf(body []byte) Hub { return Hub{body: body, messages: -1, reread: true} }

// Hub is the object written, as a Hub.
func (o *ObjectWriter) Hub() Hub {
	return Hub{body: o.Bytes(), fields: o.fields, messages: o.messages, reread: o.reread || o.fields == nil}
}

// Bytes is the Chat Completions body.
func (h Hub) Bytes() []byte { return h.body }

// Request is the Chat Completions request of the hub's body, as
// DecodeChatRequest returns it, with its error. When unique is true, the
// caller vouches that the values written, as copied from the client's
// body, name no member twice at any depth (the client's body passed
// RequestMembers): the request is then read from the members as written,
// without a second scan, and messages written by AddMessages are not
// checked again; otherwise the body is decoded.
func (h Hub) Request(unique bool) (*ChatRequest, error) {
	if !unique || h.reread {
		return DecodeChatRequest(h.body)
	}
	return newChatRequest(h.fields, len(h.body), h.messages > 0)
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
