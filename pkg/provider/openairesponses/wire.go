package openairesponses

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// wireEvent is what is read of any event's data: its type, and the members
// the observer and the decoder look into, raw (sharing the data's memory),
// so that an event of a kind this code does not know never fails for the
// shape of its other members. Keys are matched exactly; of a key given
// twice, the last counts, as in encoding/json.
type wireEvent struct {
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

var errMalformed = errors.New("malformed event")

// parseEvent reads an event's data, which must be one JSON object whose
// type, if any, is a string; name, the SSE event name, stands in for a
// missing type. Every event of a stream goes through here, so it checks the
// data (json.Valid) and splits its members without decoding them or
// allocating; only the type is a new string, and not even that for the
// types this code knows.
func parseEvent(name string, data []byte) (wireEvent, error) {
	var ev wireEvent
	if !json.Valid(data) || firstByte(data) != '{' {
		return ev, malformed(errMalformed)
	}
	var typ json.RawMessage
	eachMember(data, func(key, value []byte) {
		switch string(key) {
		case "type":
			typ = value
		case "output_index":
			ev.OutputIndex = value
		case "summary_index":
			ev.SummaryIndex = value
		case "item_id":
			ev.ItemID = value
		case "item":
			ev.Item = value
		case "delta":
			ev.Delta = value
		case "arguments":
			ev.Arguments = value
		case "response":
			ev.Response = value
		case responses.ItemMessage:
			ev.Message = value
		case "error":
			ev.Error = value
		}
	})
	switch {
	case len(typ) > 0 && typ[0] == '"':
		if t, ok := eventTypes[string(typ)]; ok {
			ev.Type = t
		} else {
			ev.Type = str(typ)
		}
	case len(typ) > 0 && !upstream.IsNull(typ):
		return ev, malformed(errors.Join(errMalformed, errors.New("a type that is not a string")))
	}
	if ev.Type == "" {
		ev.Type = name
	}
	return ev, nil
}

// eventTypes are the types the observer and the decoder read, by their
// JSON string: looking one up makes no new string.
var eventTypes = func() map[string]string {
	m := map[string]string{}
	for _, t := range []string{
		responses.EventCreated, responses.EventInProgress, responses.EventQueued,
		responses.EventOutputItemAdded, responses.EventOutputItemDone,
		responses.EventContentPartAdded, responses.EventContentPartDone,
		responses.EventOutputTextDelta, responses.EventOutputTextDone, responses.EventRefusalDelta, responses.EventRefusalDone,
		responses.EventFunctionCallArgumentsDelta, responses.EventFunctionCallArgumentsDone,
		responses.EventReasoningSummaryPartAdded, responses.EventReasoningSummaryPartDone,
		responses.EventReasoningSummaryTextDelta, responses.EventReasoningSummaryTextDone,
		responses.EventReasoningTextDelta, responses.EventReasoningTextDone,
		responses.EventCustomToolCallInputDelta, responses.EventImageGenerationCallPartialImage,
		responses.EventCompleted, responses.EventIncomplete, responses.EventFailed, responses.EventError,
	} {
		m[`"`+t+`"`] = t
	}
	return m
}()

// firstByte is data's first byte that is not white space, or 0.
func firstByte(data []byte) byte {
	for _, c := range data {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

// eachMember calls f with the key (unquoted; a key with escapes or invalid
// UTF-8 decoded as encoding/json decodes it) and
// the value, as written, of each top-level member of data, a valid JSON
// object (json.Valid).
func eachMember(data []byte, f func(key, value []byte)) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return
	}
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] == '"' {
		end := skipValue(data, i)
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			var k string
			_ = json.Unmarshal(data[i:end], &k)
			key = []byte(k)
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return
		}
		start := skipSpace(data, i+1)
		end = skipValue(data, start)
		f(key, data[start:end:end])
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ',' {
			return
		}
		i = skipSpace(data, i+1)
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the value of valid JSON that starts at i.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		for j := i + 1; j < len(data); j++ {
			switch data[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(data)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				j = skipValue(data, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(data)
	}
	j := i
	for j < len(data) && data[j] != ',' && data[j] != '}' && data[j] != ']' && data[j] != ' ' && data[j] != '\t' && data[j] != '\n' && data[j] != '\r' {
		j++
	}
	return j
}

func malformed(err error) *llm.ProviderError {
	return &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream event", Err: err}
}

// wireItem is what is read of an output item.
type wireItem struct {
	Type             string
	ID               string
	CallID           string
	Name             string
	Arguments        string
	EncryptedContent string
	// Content is a message's output_text and refusal parts, or a
	// reasoning item's reasoning_text parts; Summary a reasoning item's
	// summary_text parts.
	Content, Summary []wirePart
}

type wirePart struct {
	Type          string
	Text, Refusal string
	// RawText and RawRefusal are the members as written (JSON strings), or nil.
	RawText, RawRefusal json.RawMessage
}

// parseItem reads an output item. Only an item that is not an object, or a
// message's or reasoning item's parts that are not a list of objects, is
// malformed: the members of items of other kinds are read when they are
// strings and ignored when they are not.
func parseItem(raw json.RawMessage) (wireItem, error) {
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
		return wireItem{}, malformed(errors.New("an output item that is not an object"))
	}
	it := wireItem{
		Type: str(m.Type), ID: str(m.ID), CallID: str(m.CallID), Name: str(m.Name),
		EncryptedContent: str(m.EncryptedContent),
	}
	if len(m.Arguments) > 0 && m.Arguments[0] != '"' && !upstream.IsNull(m.Arguments) {
		it.Arguments = string(m.Arguments) // arguments as an object, as some servers send them
	} else {
		it.Arguments = str(m.Arguments)
	}
	switch it.Type {
	case responses.ItemMessage, responses.ItemReasoning:
		var err error
		if it.Content, err = parseParts(m.Content); err != nil {
			return wireItem{}, err
		}
		if it.Summary, err = parseParts(m.Summary); err != nil {
			return wireItem{}, err
		}
	}
	return it, nil
}

func parseParts(raw json.RawMessage) ([]wirePart, error) {
	if upstream.IsNull(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, malformed(errors.New("content parts that are not a list"))
	}
	parts := make([]wirePart, len(list))
	for i, p := range list {
		var err error
		if parts[i], err = parsePart(p); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// parsePart reads one content or summary part.
func parsePart(raw json.RawMessage) (wirePart, error) {
	var p struct {
		Type    json.RawMessage `json:"type"`
		Text    json.RawMessage `json:"text"`
		Refusal json.RawMessage `json:"refusal"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &p) != nil {
		return wirePart{}, malformed(errors.New("a content part that is not an object"))
	}
	w := wirePart{Type: str(p.Type), Text: str(p.Text), Refusal: str(p.Refusal)}
	if w.Text != "" || string(p.Text) == `""` {
		w.RawText = p.Text
	}
	if w.Refusal != "" || string(p.Refusal) == `""` {
		w.RawRefusal = p.Refusal
	}
	return w, nil
}

// hasOutput reports whether an output item, added or done, is output: a
// message or reasoning item with text in it (or a reasoning item's
// encrypted content), or an item of any other kind (a function call, a
// custom tool call, a built-in tool's call), which is the model acting.
func (it *wireItem) hasOutput() bool {
	switch it.Type {
	case "":
		return false
	case responses.ItemMessage, responses.ItemReasoning:
		if it.EncryptedContent != "" {
			return true
		}
		for _, list := range [2][]wirePart{it.Content, it.Summary} {
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

// wireResponse is what is read of a Response object.
type wireResponse struct {
	ID        string
	Model     string
	CreatedAt int64
	Status    string
	// Usage is the Response's usage object, raw (nil when null).
	Usage             json.RawMessage
	IncompleteReason  string
	ErrorMessage      string
	ErrorCode         string
	Output            []json.RawMessage
	HasStatus, HasErr bool
}

// parseResponse reads a Response object; output, when set, reads its
// items too. Anything but an object is malformed; members of the wrong
// type read as absent.
func parseResponse(raw json.RawMessage, output bool) (wireResponse, error) {
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
		return wireResponse{}, malformed(errors.New("a response that is not an object"))
	}
	r := wireResponse{ID: str(m.ID), Model: str(m.Model), Status: str(m.Status), HasStatus: len(m.Status) > 0}
	if n, err := strconv.ParseFloat(string(m.CreatedAt), 64); err == nil && n >= 0 && n < 1<<53 {
		r.CreatedAt = int64(n)
	}
	if !upstream.IsNull(m.Usage) && m.Usage[0] == '{' {
		r.Usage = m.Usage
	}
	var details struct {
		Reason json.RawMessage `json:"reason"`
	}
	if !upstream.IsNull(m.IncompleteDetails) && json.Unmarshal(m.IncompleteDetails, &details) == nil {
		r.IncompleteReason = str(details.Reason)
	}
	if !upstream.IsNull(m.Error) {
		r.HasErr = true
		r.ErrorMessage, r.ErrorCode = errorText(m.Error)
	}
	if output && !upstream.IsNull(m.Output) {
		if m.Output[0] != '[' || json.Unmarshal(m.Output, &r.Output) != nil {
			return wireResponse{}, malformed(errors.New("a response whose output is not a list"))
		}
	}
	return r, nil
}

// errorText reads an error object's message and code, or an error given as
// a string.
func errorText(raw json.RawMessage) (message, code string) {
	if s := str(raw); s != "" {
		return s, ""
	}
	var e struct {
		Message json.RawMessage `json:"message"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &e) == nil {
		return str(e.Message), str(e.Code)
	}
	return "", ""
}

// failure is the error of an "error" event or of response.failed: a
// FailTransient *llm.ProviderError with the upstream's message (the router
// falls back when it comes before any output).
func failure(ev *wireEvent) error {
	var msg string
	if ev.Type == responses.EventFailed {
		if r, err := parseResponse(ev.Response, false); err == nil {
			msg = r.ErrorMessage
		}
		if msg == "" {
			msg = "the upstream's response failed"
		}
	} else {
		msg = str(ev.Message)
		if msg == "" && !upstream.IsNull(ev.Error) {
			msg, _ = errorText(ev.Error)
		}
		if msg == "" {
			msg = "unspecified upstream error"
		}
	}
	return &llm.ProviderError{Class: llm.FailTransient, Message: msg, Err: &llm.ChunkError{Message: msg}}
}

// index reads an output_index or summary_index; -1 when absent or not a
// whole number.
func index(raw json.RawMessage) int {
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// str is raw as a Go string when it is a JSON string, else "".
func str(raw json.RawMessage) string {
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

// identity is what a Response's chunks carry of it: its id, model and
// creation time, as the events so far named them.
type identity struct {
	id, model string
	created   int64
}

// note takes the id, model and creation time r names.
func (n *identity) note(r *wireResponse) {
	if r.ID != "" {
		n.id = r.ID
	}
	if r.Model != "" {
		n.model = r.Model
	}
	if r.CreatedAt != 0 {
		n.created = r.CreatedAt
	}
}
