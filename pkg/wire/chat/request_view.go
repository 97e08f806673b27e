package chat

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// RequestView is a Chat Completions request as a translation out of Chat
// Completions reads it, decoded in one pass, two ways at once:
//
//   - the top-level members it translates or refuses, as encoding/json
//     reads them into a struct (names matched regardless of case, the
//     last of two equal names winning, the first value of a wrong type
//     the error);
//   - every member as written (Members), for a translation that reads
//     names exactly (a "Model" is not "model") and names what it leaves
//     out.
//
// Values a translation passes on as they are, or reads in more than one
// shape, stay raw: slices of the body, which must not change afterwards.
//
// A message or a tool that is not an object of its shape does not fail
// the decoding: it carries its own error (RequestViewMessage.Err,
// RequestViewTool.Err), so that a translation names the one at fault.
type RequestView struct {
	Model               string
	Messages            []RequestViewMessage
	MaxTokens           *float64
	MaxCompletionTokens *float64
	Temperature         json.RawMessage
	TopP                json.RawMessage
	TopK                json.RawMessage
	// Stop is a string or an array of strings.
	Stop              json.RawMessage
	Tools             []RequestViewTool
	ToolChoice        json.RawMessage
	ParallelToolCalls *bool
	User              string
	ReasoningEffort   OptString
	ResponseFormat    json.RawMessage
	N                 json.RawMessage
	Logprobs          json.RawMessage
	TopLogprobs       json.RawMessage
	LogitBias         json.RawMessage
	Audio             json.RawMessage
	Modalities        []string
	Functions         json.RawMessage
	FunctionCall      json.RawMessage

	// Members are the body's members as written, in order; nil when the
	// body, spaces of any kind aside, is not one JSON object.
	Members Object

	// spaced: the body is an object only between spaces that JSON does
	// not allow (Spaced).
	spaced bool

	// messagesAt and toolsAt are the index in Members of the member
	// Messages and Tools were read from (-1: none).
	messagesAt, toolsAt int
}

// Member is one member of a JSON object as written: its name, escapes
// read (a name without escapes is kept byte for byte), and its value.
type Member struct {
	Key   string
	Value json.RawMessage
}

// Object is a JSON object's members in the order written, a name given
// twice kept twice.
type Object []Member

// ParseObject reads b, one JSON object, as its members; ok is false when b
// is anything else. Names given twice and strings that are not valid
// UTF-8 are read, as encoding/json reads them; values are slices of b.
func ParseObject(b []byte) (o Object, ok bool) {
	d := decoders.Get().(*decoder)
	o, ok = d.object(b)
	d.reset(nil) // let go of b
	decoders.Put(d)
	return o, ok
}

// ParseArray reads b, one JSON array, as its elements; ok is false when b
// is anything else. Strings need not be valid UTF-8; elements are slices
// of b.
func ParseArray(b []byte) (l []json.RawMessage, ok bool) {
	d := decoders.Get().(*decoder)
	d.reset(b)
	if d.dec.PeekKind() == '[' {
		l, ok = d.elements(b), true
		if _, err := d.dec.ReadToken(); err != nil || !d.end() || l == nil {
			l, ok = nil, false
		}
	}
	d.reset(nil) // let go of b
	decoders.Put(d)
	return l, ok
}

// decoders are ParseObject's and ParseArray's, which a request's reader calls for each of
// its items, parts and tools.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

// Get is the value of the last member named exactly k, as encoding/json
// reads an object into a map; nil when there is none.
func (o Object) Get(k string) json.RawMessage {
	if i := o.index(k); i >= 0 {
		return o[i].Value
	}
	return nil
}

// Spaced reports whether the body is an object only between spaces that
// JSON does not allow (bytes.TrimSpace's, a form feed or a no-break
// space): Members are read, but the body is not JSON.
func (v *RequestView) Spaced() bool { return v.spaced }

// Unread are the names of the members, in order, that are not null and
// not in read: what a translation that reads only read leaves out. A body
// that is not JSON (Spaced) has none.
func (v *RequestView) Unread(read map[string]bool) []string {
	if v.spaced {
		return nil
	}
	var out []string
	for _, m := range v.Members {
		if !read[m.Key] && string(m.Value) != "null" {
			out = append(out, m.Key)
		}
	}
	return out
}

func (o Object) index(k string) int {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].Key == k {
			return i
		}
	}
	return -1
}

// viewError is the struct name encoding/json gives a RequestView's errors.
const viewError = "RequestView"

// DecodeRequestView decodes a Chat Completions request body. The error is
// the one encoding/json gives reading the body into the view's members;
// the view is returned with it, its Members read all the same.
func DecodeRequestView(body []byte) (*RequestView, error) {
	v := &RequestView{messagesAt: -1, toolsAt: -1}
	var d decoder
	ms, ok := d.object(body)
	if !ok {
		// Not one JSON object: encoding/json says why (null is no error).
		// A translation that reads names exactly takes an object between
		// spaces of any kind (bytes.TrimSpace), as jsonobj.Parse does.
		if trimmed := bytes.TrimSpace(body); len(trimmed) < len(body) {
			v.Members, _ = d.object(trimmed)
			v.spaced = v.Members != nil
		}
		return v, json.Unmarshal(body, new(RequestView))
	}
	v.Members = ms
	err := readMembers(ms, viewNames, viewError, func(i int, name string, raw json.RawMessage) error {
		switch name {
		case "model":
			return json.Unmarshal(raw, &v.Model)
		case "messages":
			if raw[0] == '[' {
				v.Messages, v.messagesAt = d.messages(raw), i
				return nil
			}
			v.messagesAt = i
			return json.Unmarshal(raw, &v.Messages)
		case "max_tokens":
			return json.Unmarshal(raw, &v.MaxTokens)
		case "max_completion_tokens":
			return json.Unmarshal(raw, &v.MaxCompletionTokens)
		case "temperature":
			v.Temperature = raw
		case "top_p":
			v.TopP = raw
		case "top_k":
			v.TopK = raw
		case "stop":
			v.Stop = raw
		case "tools":
			if raw[0] == '[' {
				v.Tools, v.toolsAt = d.tools(raw), i
				return nil
			}
			v.toolsAt = i
			return json.Unmarshal(raw, &v.Tools)
		case "tool_choice":
			v.ToolChoice = raw
		case "parallel_tool_calls":
			return json.Unmarshal(raw, &v.ParallelToolCalls)
		case "user":
			return json.Unmarshal(raw, &v.User)
		case "reasoning_effort":
			// An error of a member's own UnmarshalJSON ends encoding/json's
			// decoding at once.
			if err := json.Unmarshal(raw, &v.ReasoningEffort); err != nil {
				return stop{err}
			}
		case "response_format":
			v.ResponseFormat = raw
		case "n":
			v.N = raw
		case "logprobs":
			v.Logprobs = raw
		case "top_logprobs":
			v.TopLogprobs = raw
		case "logit_bias":
			v.LogitBias = raw
		case "audio":
			v.Audio = raw
		case "modalities":
			return json.Unmarshal(raw, &v.Modalities)
		case "functions":
			v.Functions = raw
		case "function_call":
			v.FunctionCall = raw
		}
		return nil
	})
	return v, err
}

// viewNames are the members RequestView reads.
var viewNames = []string{
	"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
	"stop", "tools", "tool_choice", "parallel_tool_calls", "user", "reasoning_effort",
	"response_format", "n", "logprobs", "top_logprobs", "logit_bias", "audio", "modalities",
	"functions", "function_call",
}

// ExactMessages are the messages of the last member named exactly
// "messages", whose value is an array: Messages, unless a member named
// otherwise but for case came after it.
func (v *RequestView) ExactMessages() []RequestViewMessage {
	return v.MessagesIn(v.Members.index("messages"))
}

// MessagesIn are the messages of member i, whose value is an array:
// Messages when they were read from it.
func (v *RequestView) MessagesIn(i int) []RequestViewMessage {
	if i == v.messagesAt {
		return v.Messages
	}
	var d decoder
	return d.messages(v.Members[i].Value)
}

// ExactTools are the tools of the last member named exactly "tools",
// whose value is an array, as ExactMessages.
func (v *RequestView) ExactTools() []RequestViewTool {
	i := v.Members.index("tools")
	if i == v.toolsAt {
		return v.Tools
	}
	var d decoder
	return d.tools(v.Members[i].Value)
}

// readMembers reads ms as encoding/json reads an object into a struct
// named st whose fields are names: set is given each member that stands
// for one of names (fold), with its index in ms. The first error set
// returns, named as encoding/json names it, is the error, and the members
// after it are still read, unless it is a stop, which ends the reading.
func readMembers(ms Object, names []string, st string, set func(i int, name string, raw json.RawMessage) error) error {
	var first error
	for i, m := range ms {
		name := fold(m.Key, names)
		if name == "" {
			continue
		}
		err := set(i, name, m.Value)
		if s, ok := err.(stop); ok {
			return fieldError(s.err, st, name)
		}
		if err != nil && first == nil {
			first = fieldError(err, st, name)
		}
	}
	return first
}

// stop is the error of a member that ends encoding/json's reading of an
// object (one from a field's UnmarshalJSON).
type stop struct{ err error }

func (s stop) Error() string { return s.err.Error() }

// fold is the name of names that key stands for as encoding/json matches
// a member to a field (the same name but for case; names differ in more
// than case), or "".
func fold(key string, names []string) string {
	for _, n := range names {
		if strings.EqualFold(key, n) {
			return n
		}
	}
	return ""
}

// fieldError is err, of decoding the member name of a struct named st
// alone, as encoding/json reports it decoding the whole struct.
func fieldError(err error, st, name string) error {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		te.Struct = st
		if te.Field != "" {
			name += "." + te.Field
		}
		te.Field = name
	}
	return err
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
	// Members are the message's members as written; nil when it is not
	// an object.
	Members Object
}

// messageIn is a message as encoding/json reads it: an unnamed struct, so
// that its errors name the field alone.
type messageIn = struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	ToolCalls  []json.RawMessage `json:"tool_calls"`
	ToolCallID string            `json:"tool_call_id"`
	Name       json.RawMessage   `json:"name"`
}

var messageNames = []string{"role", "content", "tool_calls", "tool_call_id", "name"}

// elementsOf reads each element of b, a JSON array, with read.
func elementsOf[T any](d *decoder, b []byte, read func([]byte) T) []T {
	elems := d.elements(b)
	out := make([]T, len(elems))
	for i, e := range elems {
		out[i] = read(e)
	}
	return out
}

func (d *decoder) messages(b []byte) []RequestViewMessage { return elementsOf(d, b, d.message) }

// message reads a message; a problem is kept in its Err.
func (d *decoder) message(b []byte) RequestViewMessage {
	ms, ok := d.object(b)
	if !ok {
		var in messageIn
		return RequestViewMessage{Null: string(b) == "null", Err: json.Unmarshal(b, &in)}
	}
	m := RequestViewMessage{Members: ms}
	var name json.RawMessage
	m.Err = readMembers(ms, messageNames, "", func(_ int, field string, raw json.RawMessage) error {
		switch field {
		case "role":
			return json.Unmarshal(raw, &m.Role)
		case "content":
			m.Content = raw
		case "tool_calls":
			if raw[0] != '[' {
				return json.Unmarshal(raw, &m.ToolCalls)
			}
			m.ToolCalls = d.elements(raw)
		case "tool_call_id":
			return json.Unmarshal(raw, &m.ToolCallID)
		case "name":
			name = raw
		}
		return nil
	})
	if name != nil && m.Err == nil {
		// A member whose name folds to "name" is there: look for the one
		// spelled so.
		v := ms.Get("name")
		m.HasName = v != nil && string(v) != "null"
	}
	return m
}

// RequestViewTool is one tool of a request's tools.
type RequestViewTool struct {
	Type     string
	Function RequestViewFunction
	// Err is why the tool is not an object of this shape.
	Err error
	// Members are the tool's members as written; nil when it is not an
	// object.
	Members Object
}

// RequestViewFunction is a tool's function; Parameters is its JSON schema
// as written.
type RequestViewFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// functionIn is a tool's function as encoding/json reads it, an unnamed
// struct as messageIn.
type functionIn = struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

var toolNames = []string{"type", "function"}

func (d *decoder) tools(b []byte) []RequestViewTool { return elementsOf(d, b, d.tool) }

// tool reads a tool; a problem is kept in its Err.
func (d *decoder) tool(b []byte) RequestViewTool {
	ms, ok := d.object(b)
	if !ok {
		var in struct {
			Type     string     `json:"type"`
			Function functionIn `json:"function"`
		}
		return RequestViewTool{Err: json.Unmarshal(b, &in)}
	}
	t := RequestViewTool{Members: ms}
	var fn functionIn
	t.Err = readMembers(ms, toolNames, "", func(_ int, field string, raw json.RawMessage) error {
		if field == "type" {
			return json.Unmarshal(raw, &t.Type)
		}
		return json.Unmarshal(raw, &fn)
	})
	t.Function = RequestViewFunction(fn)
	return t
}

// decoder reads JSON values of a body as slices of it.
type decoder struct {
	dec jsontext.Decoder
	buf bytes.Buffer
}

// readOptions read what encoding/json reads: a name given twice, and
// strings that are not valid UTF-8.
var readOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// reset makes d read b, which it parses in place.
func (d *decoder) reset(b []byte) {
	d.buf = *bytes.NewBuffer(b)
	d.dec.Reset(&d.buf, readOptions...)
}

// value reads the next value of b, which d reads.
func (d *decoder) value(b []byte) (json.RawMessage, bool) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, false
	}
	end := int(d.dec.InputOffset())
	return json.RawMessage(b[end-len(v) : end]), true
}

// end reports whether what d read of b is all of it.
func (d *decoder) end() bool {
	_, err := d.dec.ReadToken()
	return err == io.EOF
}

// object reads b, one JSON object, as its members; ok is false when b is
// anything else.
func (d *decoder) object(b []byte) (o Object, ok bool) {
	d.reset(b)
	if d.dec.PeekKind() != '{' {
		return nil, false
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, false
	}
	o = make(Object, 0, 8)
	for d.dec.PeekKind() != '}' {
		name, ok := d.value(b)
		if !ok {
			return nil, false
		}
		v, ok := d.value(b)
		if !ok {
			return nil, false
		}
		o = append(o, Member{Key: memberName(name), Value: v})
	}
	if _, err := d.dec.ReadToken(); err != nil || !d.end() {
		return nil, false
	}
	return o, true
}

// elements is b's elements, b being a JSON array; nil when it is not
// one. It reads up to the closing bracket, not that bracket.
func (d *decoder) elements(b []byte) []json.RawMessage {
	d.reset(b)
	if _, err := d.dec.ReadToken(); err != nil {
		return nil
	}
	l := make([]json.RawMessage, 0, 8)
	for d.dec.PeekKind() != ']' {
		v, ok := d.value(b)
		if !ok {
			return nil
		}
		l = append(l, v)
	}
	return l
}

// memberName is a member's name, quoted as written: its escapes read as
// encoding/json reads them, a name without escapes kept byte for byte
// (one of knownNames without a new string).
func memberName(quoted []byte) string {
	if bytes.IndexByte(quoted, '\\') < 0 {
		name := quoted[1 : len(quoted)-1]
		if k, ok := knownNames[string(name)]; ok {
			return k
		}
		return string(name)
	}
	var s string
	_ = json.Unmarshal(quoted, &s)
	return s
}

// knownNames are the member names the requests' readers look for (Chat
// Completions' and Responses'), each kept once: the names of a large
// request's many messages, items and parts make no new strings
// (BenchmarkFromHub in converse, BenchmarkToHub in responses).
var knownNames = func() map[string]string {
	m := map[string]string{}
	for _, names := range [][]string{viewNames, messageNames, toolNames, {
		"stream", "stream_options", "include_usage", "id", "arguments", "text", "refusal", "image_url",
		"url", "detail", "input", "instructions", "max_output_tokens", "metadata",
		"safety_identifier", "store", "previous_response_id", "reasoning", "include",
		"prompt_cache_key", "call_id", "output", "status", "phase", "summary",
		"encrypted_content", "annotations", "logprobs", "description", "parameters", "strict",
		"format", "verbosity", "schema", "effort", "gateway", "provider",
	}} {
		for _, n := range names {
			m[n] = n
		}
	}
	return m
}()
