package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// Event is one Responses stream event: its name and its data.
type Event struct {
	Name string
	Data []byte
}

// ResponseEvents turns a whole Response object (the answer of an upstream
// that ignored "stream": true) into the events it would have streamed, so
// that one reader takes both and a client passed through sees one shape:
//
//	response.created, response.in_progress    the Response with status in_progress,
//	                                          no output, no usage
//	each output item                          response.output_item.added (the item as
//	                                          it starts: no text, no arguments, no
//	                                          summary), the events of its parts (below),
//	                                          response.output_item.done (the item)
//	  message                                 per part: response.content_part.added,
//	                                          response.output_text.delta (or
//	                                          response.refusal.delta) of the whole text,
//	                                          response.output_text.done (.refusal.done),
//	                                          response.content_part.done
//	  function_call                           response.function_call_arguments.delta
//	                                          and .done
//	  reasoning                               per summary part:
//	                                          response.reasoning_summary_part.added,
//	                                          response.reasoning_summary_text.delta and
//	                                          .done, response.reasoning_summary_part.done;
//	                                          per reasoning_text part:
//	                                          response.reasoning_text.delta and .done
//	status completed, incomplete, failed      response.completed, response.incomplete,
//	                                          response.failed, with the whole Response
//
// Every event has "type" and "sequence_number" (from 0) first. A Response
// with another status (in progress, queued, cancelled) gets no terminal
// event: it did not end. An error envelope ({"error": {...}} without a
// status) is one "error" event. A body that is not such an object is a
// FailTransient *llm.ProviderError.
func ResponseEvents(body []byte) ([]Event, error) {
	ms, err := llm.Members(body)
	if err != nil {
		return nil, malformedAnswer(err)
	}
	var hasStatus bool
	var errRaw json.RawMessage
	for _, m := range ms {
		switch m.Key {
		case "status":
			hasStatus = true
		case "error":
			errRaw = m.Value
		}
	}
	var w eventWriter
	if !hasStatus && !jsonobj.IsNull(errRaw) {
		msg, code := ErrorText(errRaw)
		if msg == "" {
			msg = "unspecified upstream error"
		}
		w.event(EventError, "code", nullable(code), "message", llm.AppendString(nil, msg), "param", []byte("null"))
		return w.events, nil
	}
	r, err := readResponse(body, true)
	if err != nil {
		return nil, malformedAnswer(err)
	}
	start := llm.Splice(ms, len(body), map[string][]byte{
		"status": []byte(`"` + StatusInProgress + `"`), "output": []byte("[]"), "usage": []byte("null"),
		"incomplete_details": []byte("null"), "error": []byte("null"),
	})
	w.event(EventCreated, "response", start)
	w.event(EventInProgress, "response", start)
	for i, raw := range r.Output {
		if err := w.item(i, raw); err != nil {
			return nil, malformedAnswer(err)
		}
	}
	switch r.Status {
	case StatusCompleted:
		w.event(EventCompleted, "response", body)
	case StatusIncomplete:
		w.event(EventIncomplete, "response", body)
	case StatusFailed:
		w.event(EventFailed, "response", body)
	}
	return w.events, nil
}

func malformedAnswer(err error) *llm.ProviderError {
	return &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream answer", Err: err}
}

// nullable is s as a JSON string, or null for "".
func nullable(s string) []byte {
	if s == "" {
		return []byte("null")
	}
	return llm.AppendString(nil, s)
}

// eventWriter writes events with their sequence numbers.
type eventWriter struct {
	events []Event
	seq    int
}

// event appends an event of type typ whose other members are kv: key (a
// string), raw JSON value ([]byte or json.RawMessage), key, value, ...
func (w *eventWriter) event(typ string, kv ...any) {
	b := append([]byte(`{"type":`), llm.AppendString(nil, typ)...)
	b = append(b, `,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(w.seq), 10)
	for i := 0; i+1 < len(kv); i += 2 {
		b = append(b, ',')
		b = llm.AppendString(b, kv[i].(string))
		b = append(b, ':')
		switch v := kv[i+1].(type) {
		case []byte:
			b = append(b, v...)
		case json.RawMessage:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("openai-responses: event member %T", v)) // our own calls pass raw JSON only
		}
	}
	b = append(b, '}')
	w.events = append(w.events, Event{Name: typ, Data: b})
	w.seq++
}

var emptyString = []byte(`""`)

// orEmpty is raw, a part's text or refusal as written, or the empty
// string for a part that has none.
func orEmpty(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return emptyString
	}
	return raw
}

// item writes the events of output item i.
func (w *eventWriter) item(i int, raw json.RawMessage) error {
	it, err := readItem(raw)
	if err != nil {
		return err
	}
	ms, err := llm.Members(raw)
	if err != nil {
		return err
	}
	oi := strconv.AppendInt(nil, int64(i), 10)
	id := llm.AppendString(nil, it.ID)
	added := raw
	switch it.Type {
	case ItemMessage:
		added = llm.Splice(ms, len(raw), map[string][]byte{"status": []byte(`"` + StatusInProgress + `"`), "content": []byte("[]")})
	case ItemFunctionCall:
		added = llm.Splice(ms, len(raw), map[string][]byte{"status": []byte(`"` + StatusInProgress + `"`), "arguments": emptyString})
	case ItemReasoning:
		set := map[string][]byte{"summary": []byte("[]"), "encrypted_content": nil}
		if hasMember(ms, "content") {
			set["content"] = []byte("[]")
		}
		added = llm.Splice(ms, len(raw), set)
	}
	w.event(EventOutputItemAdded, "output_index", oi, "item", added)
	switch it.Type {
	case ItemMessage:
		parts, err := rawParts(ms, "content")
		if err != nil {
			return err
		}
		for j, part := range parts {
			if err := w.messagePart(oi, id, j, part); err != nil {
				return err
			}
		}
	case ItemFunctionCall:
		args := llm.AppendString(nil, it.Arguments)
		if it.Arguments != "" {
			w.event(EventFunctionCallArgumentsDelta, "item_id", id, "output_index", oi, "delta", args)
		}
		w.event(EventFunctionCallArgumentsDone, "item_id", id, "output_index", oi, "arguments", args)
	case ItemReasoning:
		for k, p := range it.Summary {
			si := strconv.AppendInt(nil, int64(k), 10)
			text := orEmpty(p.RawText)
			w.event(EventReasoningSummaryPartAdded, "item_id", id, "output_index", oi, "summary_index", si,
				"part", summaryPart(emptyString))
			if p.Text != "" {
				w.event(EventReasoningSummaryTextDelta, "item_id", id, "output_index", oi, "summary_index", si, "delta", text)
			}
			w.event(EventReasoningSummaryTextDone, "item_id", id, "output_index", oi, "summary_index", si, "text", text)
			w.event(EventReasoningSummaryPartDone, "item_id", id, "output_index", oi, "summary_index", si,
				"part", summaryPart(text))
		}
		for j, p := range it.Content {
			if p.Type != PartReasoningText {
				continue
			}
			ci := strconv.AppendInt(nil, int64(j), 10)
			text := orEmpty(p.RawText)
			if p.Text != "" {
				w.event(EventReasoningTextDelta, "item_id", id, "output_index", oi, "content_index", ci, "delta", text)
			}
			w.event(EventReasoningTextDone, "item_id", id, "output_index", oi, "content_index", ci, "text", text)
		}
	}
	w.event(EventOutputItemDone, "output_index", oi, "item", []byte(raw))
	return nil
}

// messagePart writes the events of part j of a message: output_text and
// refusal parts stream their text; a part of another kind is only added
// and done.
func (w *eventWriter) messagePart(oi, id []byte, j int, raw json.RawMessage) error {
	p, err := ReadPart(raw)
	if err != nil {
		return err
	}
	ms, err := llm.Members(raw)
	if err != nil {
		return err
	}
	ci := strconv.AppendInt(nil, int64(j), 10)
	at := []any{"item_id", id, "output_index", oi, "content_index", ci}
	with := func(kv ...any) []any { return append(at[:len(at):len(at)], kv...) }
	switch p.Type {
	case PartOutputText:
		text := orEmpty(p.RawText)
		w.event(EventContentPartAdded, with("part", llm.Splice(ms, len(raw), map[string][]byte{"text": emptyString, "annotations": []byte("[]")}))...)
		if p.Text != "" {
			w.event(EventOutputTextDelta, with("delta", text, "logprobs", []byte("[]"))...)
		}
		w.event(EventOutputTextDone, with("text", text, "logprobs", []byte("[]"))...)
	case PartRefusal:
		refusal := orEmpty(p.RawRefusal)
		w.event(EventContentPartAdded, with("part", llm.Splice(ms, len(raw), map[string][]byte{"refusal": emptyString}))...)
		if p.Refusal != "" {
			w.event(EventRefusalDelta, with("delta", refusal)...)
		}
		w.event(EventRefusalDone, with("refusal", refusal)...)
	default:
		w.event(EventContentPartAdded, with("part", []byte(raw))...)
	}
	w.event(EventContentPartDone, with("part", []byte(raw))...)
	return nil
}

// summaryPart is a summary_text part of text, a JSON string.
func summaryPart(text []byte) []byte {
	b := append([]byte(`{"type":"`+PartSummaryText+`","text":`), text...)
	return append(b, '}')
}

// rawParts is the list member key of an object, its elements as written.
func rawParts(ms []llm.Member, key string) ([]json.RawMessage, error) {
	for _, m := range ms {
		if m.Key == key {
			var list []json.RawMessage
			if err := json.Unmarshal(m.Value, &list); err != nil {
				return nil, errors.New("an item's " + key + " is not a list")
			}
			return list, nil
		}
	}
	return nil, nil
}

func hasMember(ms []llm.Member, key string) bool {
	for _, m := range ms {
		if m.Key == key {
			return true
		}
	}
	return false
}
