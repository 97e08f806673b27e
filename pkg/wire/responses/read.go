package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/go-json-experiment/json/jsontext"
)

// The errors of reading what an upstream streamed: data that is not an
// event, an item or a Response as this package reads them.
var (
	ErrNotEvent     = errors.New("malformed event")
	ErrTypeNotText  = errors.New("a type that is not a string")
	ErrItem         = errors.New("an output item that is not an object")
	ErrParts        = errors.New("content parts that are not a list")
	ErrPart         = errors.New("a content part that is not an object")
	ErrResponse     = errors.New("a response that is not an object")
	ErrOutputNoList = errors.New("a response whose output is not a list")
)

// EventView is what is read of any event's data: its type, and the
// members an observer or a translation looks into, raw (sharing the
// data's memory), so that an event of a kind this package does not know
// never fails for the shape of its other members.
type EventView struct {
	Type         string
	OutputIndex  json.RawMessage
	SummaryIndex json.RawMessage
	ItemID       json.RawMessage
	Item         json.RawMessage
	Delta        json.RawMessage
	Arguments    json.RawMessage
	Response     json.RawMessage
	Message      json.RawMessage
	Error        json.RawMessage
}

// EventReader reads events' data, one at a time, with jsontext: every
// event of a stream passed through goes through it, so it checks the data
// and splits its members without decoding them or allocating. Keys are
// matched exactly (escapes decoded); of a key given twice, the last
// counts, as in encoding/json; strings need not be valid UTF-8, as
// encoding/json does not ask. The zero EventReader is ready; it is not
// safe for concurrent use.
type EventReader struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var readerOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// Read reads an event's data, which must be one JSON object whose type,
// if any, is a string; name, the SSE event name, stands in for a missing
// type. Only the type is a new string, and not even that for the types
// this package names. The view's members share data's memory.
func (r *EventReader) Read(name string, data []byte) (EventView, error) {
	var ev EventView
	r.buf = *bytes.NewBuffer(data) // read in place: values alias data
	r.dec.Reset(&r.buf, readerOptions...)
	if r.dec.PeekKind() != '{' {
		return ev, ErrNotEvent
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return ev, ErrNotEvent
	}
	var typ jsontext.Value
	for r.dec.PeekKind() == '"' {
		key, err := r.dec.ReadValue()
		if err != nil {
			return ev, ErrNotEvent
		}
		value, err := r.dec.ReadValue()
		if err != nil {
			return ev, ErrNotEvent
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			_ = json.Unmarshal(key, &k)
			key = jsontext.Value(strconv.Quote(k))
		}
		v := json.RawMessage(value[:len(value):len(value)])
		switch string(key) {
		case `"type"`:
			typ = value
		case `"output_index"`:
			ev.OutputIndex = v
		case `"summary_index"`:
			ev.SummaryIndex = v
		case `"item_id"`:
			ev.ItemID = v
		case `"item"`:
			ev.Item = v
		case `"delta"`:
			ev.Delta = v
		case `"arguments"`:
			ev.Arguments = v
		case `"response"`:
			ev.Response = v
		case `"message"`:
			ev.Message = v
		case `"error"`:
			ev.Error = v
		}
	}
	if tok, err := r.dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return ev, ErrNotEvent
	}
	if _, err := r.dec.ReadToken(); err != io.EOF {
		return ev, ErrNotEvent
	}
	switch {
	case len(typ) > 0 && typ[0] == '"':
		if t, ok := eventTypes[string(typ)]; ok {
			ev.Type = t
		} else {
			ev.Type = String(json.RawMessage(typ))
		}
	case len(typ) > 0 && !jsonobj.IsNull(json.RawMessage(typ)):
		return ev, errors.Join(ErrNotEvent, ErrTypeNotText)
	}
	if ev.Type == "" {
		ev.Type = name
	}
	return ev, nil
}

// eventTypes are the event types this package names, by their JSON
// string: looking one up makes no new string.
var eventTypes = func() map[string]string {
	m := map[string]string{}
	for _, t := range []string{
		EventCreated, EventInProgress, EventQueued, EventOutputItemAdded, EventOutputItemDone,
		EventContentPartAdded, EventContentPartDone, EventOutputTextDelta, EventOutputTextDone,
		EventRefusalDelta, EventRefusalDone, EventFunctionCallArgumentsDelta, EventFunctionCallArgumentsDone,
		EventReasoningSummaryPartAdded, EventReasoningSummaryPartDone,
		EventReasoningSummaryTextDelta, EventReasoningSummaryTextDone,
		EventReasoningTextDelta, EventReasoningTextDone,
		EventCustomToolCallInputDelta, EventImageGenerationCallPartialImage,
		EventCompleted, EventIncomplete, EventFailed, EventError,
	} {
		m[`"`+t+`"`] = t
	}
	return m
}()

// ItemView is what is read of an output item of any type.
type ItemView struct {
	Type             string
	ID               string
	CallID           string
	Name             string
	Arguments        string
	EncryptedContent string
	// Content is a message's output_text and refusal parts, or a
	// reasoning item's reasoning_text parts; Summary a reasoning item's
	// summary_text parts.
	Content, Summary []PartView
}

// PartView is what is read of a content or summary part.
type PartView struct {
	Type          string
	Text, Refusal string
	// RawText and RawRefusal are the members as written (JSON strings), or nil.
	RawText, RawRefusal json.RawMessage
}

// ReadItem reads an output item. Only an item that is not an object
// (ErrItem), or a message's or reasoning item's parts that are not a list
// of objects (ErrParts, ErrPart), fails: the members of items of other
// kinds are read when they are strings and ignored when they are not.
// Arguments given as an object, as some servers send them, read as its
// JSON text.
func ReadItem(raw json.RawMessage) (ItemView, error) {
	var m struct {
		Type             json.RawMessage `json:"type"`
		ID               json.RawMessage `json:"id"`
		CallID           json.RawMessage `json:"call_id"`
		Name             json.RawMessage `json:"name"`
		Arguments        json.RawMessage `json:"arguments"`
		EncryptedContent json.RawMessage `json:"encrypted_content"`
		Content          json.RawMessage `json:"content"`
		Summary          json.RawMessage `json:"summary"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return ItemView{}, ErrItem
	}
	it := ItemView{
		Type: String(m.Type), ID: String(m.ID), CallID: String(m.CallID), Name: String(m.Name),
		EncryptedContent: String(m.EncryptedContent),
	}
	if len(m.Arguments) > 0 && m.Arguments[0] != '"' && !jsonobj.IsNull(m.Arguments) {
		it.Arguments = string(m.Arguments)
	} else {
		it.Arguments = String(m.Arguments)
	}
	switch it.Type {
	case ItemMessage, ItemReasoning:
		var err error
		if it.Content, err = readParts(m.Content); err != nil {
			return ItemView{}, err
		}
		if it.Summary, err = readParts(m.Summary); err != nil {
			return ItemView{}, err
		}
	}
	return it, nil
}

func readParts(raw json.RawMessage) ([]PartView, error) {
	if jsonobj.IsNull(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, ErrParts
	}
	parts := make([]PartView, len(list))
	for i, p := range list {
		var err error
		if parts[i], err = ReadPart(p); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// ReadPart reads one content or summary part; one that is not an object
// is ErrPart.
func ReadPart(raw json.RawMessage) (PartView, error) {
	var p struct {
		Type    json.RawMessage `json:"type"`
		Text    json.RawMessage `json:"text"`
		Refusal json.RawMessage `json:"refusal"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &p) != nil {
		return PartView{}, ErrPart
	}
	w := PartView{Type: String(p.Type), Text: String(p.Text), Refusal: String(p.Refusal)}
	if w.Text != "" || string(p.Text) == `""` {
		w.RawText = p.Text
	}
	if w.Refusal != "" || string(p.Refusal) == `""` {
		w.RawRefusal = p.Refusal
	}
	return w, nil
}

// HasOutput reports whether an output item, added or done, is output: a
// message or reasoning item with text in it (or a reasoning item's
// encrypted content), or an item of any other kind (a function call, a
// custom tool call, a built-in tool's call), which is the model acting.
func (it *ItemView) HasOutput() bool {
	switch it.Type {
	case "":
		return false
	case ItemMessage, ItemReasoning:
		if it.EncryptedContent != "" {
			return true
		}
		for _, list := range [2][]PartView{it.Content, it.Summary} {
			for _, p := range list {
				if p.Text != "" || p.Refusal != "" {
					return true
				}
			}
		}
		return false
	}
	return true
}

// ResponseView is what is read of a Response object.
type ResponseView struct {
	ID        string
	Model     string
	CreatedAt int64
	Status    string
	// Usage is the Response's usage object, raw (nil when null or not an
	// object).
	Usage            json.RawMessage
	IncompleteReason string
	ErrorMessage     string
	ErrorCode        string
	// Output is the output's items, when ReadResponse is asked to read
	// them; RawOutput the output member as written, whatever it holds.
	Output            []json.RawMessage
	RawOutput         json.RawMessage
	HasStatus, HasErr bool
}

// ReadResponse reads a Response object; output, when set, reads its items
// too. Anything but an object is ErrResponse, an output that is not a
// list ErrOutputNoList; members of the wrong type read as absent.
func ReadResponse(raw json.RawMessage, output bool) (ResponseView, error) {
	var m struct {
		ID                json.RawMessage `json:"id"`
		Model             json.RawMessage `json:"model"`
		CreatedAt         json.RawMessage `json:"created_at"`
		Status            json.RawMessage `json:"status"`
		Usage             json.RawMessage `json:"usage"`
		IncompleteDetails json.RawMessage `json:"incomplete_details"`
		Error             json.RawMessage `json:"error"`
		Output            json.RawMessage `json:"output"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return ResponseView{}, ErrResponse
	}
	r := ResponseView{ID: String(m.ID), Model: String(m.Model), Status: String(m.Status), HasStatus: len(m.Status) > 0, RawOutput: m.Output}
	if n, err := strconv.ParseFloat(string(m.CreatedAt), 64); err == nil && n >= 0 && n < 1<<53 {
		r.CreatedAt = int64(n)
	}
	if !jsonobj.IsNull(m.Usage) && m.Usage[0] == '{' {
		r.Usage = m.Usage
	}
	var details struct {
		Reason json.RawMessage `json:"reason"`
	}
	if !jsonobj.IsNull(m.IncompleteDetails) && json.Unmarshal(m.IncompleteDetails, &details) == nil {
		r.IncompleteReason = String(details.Reason)
	}
	if !jsonobj.IsNull(m.Error) {
		r.HasErr = true
		r.ErrorMessage, r.ErrorCode = ErrorText(m.Error)
	}
	if output && !jsonobj.IsNull(m.Output) {
		if m.Output[0] != '[' || json.Unmarshal(m.Output, &r.Output) != nil {
			return ResponseView{}, ErrOutputNoList
		}
	}
	return r, nil
}

// FailureMessage is the message of an "error" event (its message, else
// its error's) or of response.failed (its Response's error's); "" when it
// has none or ev is neither.
func FailureMessage(ev *EventView) string {
	switch ev.Type {
	case EventFailed:
		if r, err := ReadResponse(ev.Response, false); err == nil {
			return r.ErrorMessage
		}
	case EventError:
		if msg := String(ev.Message); msg != "" {
			return msg
		}
		if !jsonobj.IsNull(ev.Error) {
			msg, _ := ErrorText(ev.Error)
			return msg
		}
	}
	return ""
}

// ErrorText reads an error object's message and code, or an error given
// as a string.
func ErrorText(raw json.RawMessage) (message, code string) {
	if s := String(raw); s != "" {
		return s, ""
	}
	var e struct {
		Message json.RawMessage `json:"message"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &e) == nil {
		return String(e.Message), String(e.Code)
	}
	return "", ""
}

// Index reads an output_index or summary_index; -1 when absent or not a
// whole number.
func Index(raw json.RawMessage) int {
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// String is raw as a Go string when it is a JSON string, else "".
func String(raw json.RawMessage) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]) // nothing to unescape
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
