package codexcli

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/sse"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// CreatedAt is the created_at of every scripted response, fixed so that
// streams are deterministic.
const CreatedAt int64 = 1700000000

// Item is one output item of a scripted Responses API answer. Make one with
// Reasoning, FunctionCall or Message.
type Item struct {
	// Type is "reasoning", "function_call" or "message".
	Type string
	// ID is the item's id (rs_…, fc_…, msg_…).
	ID string
	// Summary holds a reasoning item's summary texts, one summary part each.
	Summary []string
	// EncryptedContent is a reasoning item's opaque encrypted_content, which
	// a client that sends "store": false returns with the next request.
	EncryptedContent string
	// CallID, Name and Arguments are a function call's call_id, function name
	// and JSON arguments (a string, as the API sends it).
	CallID, Name, Arguments string
	// Text is an assistant message's output text.
	Text string
}

// Reasoning is a reasoning item carrying encrypted_content, with optional
// summary texts.
func Reasoning(id, encryptedContent string, summary ...string) Item {
	return Item{Type: responses.ItemReasoning, ID: id, EncryptedContent: encryptedContent, Summary: summary}
}

// FunctionCall is a function_call item: the model asks the client to run
// the function name with the JSON arguments and to answer with a
// function_call_output carrying callID.
func FunctionCall(id, callID, name, arguments string) Item {
	return Item{Type: responses.ItemFunctionCall, ID: id, CallID: callID, Name: name, Arguments: arguments}
}

// Message is an assistant message with one output_text part.
func Message(id, text string) Item {
	return Item{Type: responses.ItemMessage, ID: id, Text: text}
}

// Usage is a response's token counts.
type Usage struct {
	InputTokens, CachedTokens, OutputTokens, ReasoningTokens int
}

// Response scripts one answer of a fake Responses API upstream.
type Response struct {
	// Status, when neither 0 nor 200, makes the answer an OpenAI error
	// envelope with that status instead of a stream.
	Status int
	// ID is the response id; empty means "resp_scripted".
	ID string
	// Model is reported as the response's model; empty means the request's.
	Model string
	// Items are the output items, streamed in order.
	Items []Item
	// Usage is reported by response.completed.
	Usage Usage
}

// Event is one Server-Sent Event of a Responses API stream.
type Event struct {
	// Name is the event field, equal to the data's "type".
	Name string
	// Data is the JSON data.
	Data []byte
}

// wire is it as output_item.added (done false) or output_item.done
// (done true) and response.completed carry it. A reasoning item's
// encrypted_content and summary come with output_item.done only.
func (it Item) wire(done bool) any {
	status := responses.StatusInProgress
	if done {
		status = responses.StatusCompleted
	}
	switch it.Type {
	case responses.ItemReasoning:
		r := responses.ReasoningItem{ID: it.ID, Type: responses.ItemReasoning, Summary: []responses.SummaryText{}}
		if done {
			r.EncryptedContent = it.EncryptedContent
			for _, s := range it.Summary {
				r.Summary = append(r.Summary, responses.SummaryText{Type: responses.PartSummaryText, Text: s})
			}
		}
		return r
	case responses.ItemFunctionCall:
		f := responses.FunctionCallItem{ID: it.ID, Type: responses.ItemFunctionCall, Status: status, CallID: it.CallID, Name: it.Name}
		if done {
			f.Arguments = it.Arguments
		}
		return f
	default:
		m := responses.MessageItem{ID: it.ID, Type: responses.ItemMessage, Status: status, Content: []any{}, Role: responses.RoleAssistant}
		if done {
			m.Content = append(m.Content, outputText(it.Text))
		}
		return m
	}
}

func outputText(s string) responses.OutputText {
	return responses.OutputText{Type: responses.PartOutputText, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}, Text: s}
}

// Events is r's answer to a request for model as the Responses API streams
// it: response.created, response.in_progress, for each item
// response.output_item.added, its deltas (reasoning summary parts and text,
// function call arguments, or a message's content part and text) and
// response.output_item.done, then response.completed with every item and the
// usage. Every event carries its sequence_number, from 0.
func Events(r Response, model string) []Event {
	if r.Model != "" {
		model = r.Model
	}
	id := r.ID
	if id == "" {
		id = "resp_scripted"
	}
	no := false
	resp := responses.Response{
		ID: id, Object: responses.ObjectResponse, CreatedAt: CreatedAt, Status: responses.StatusInProgress,
		Model: model, Output: []any{}, ParallelToolCalls: true,
		Reasoning: &responses.Reasoning{Effort: json.RawMessage(`"medium"`), Summary: "detailed"}, Store: &no,
		ToolChoice: json.RawMessage(`"auto"`), Tools: []json.RawMessage{}, Metadata: json.RawMessage(`{}`),
	}
	var events []Event
	// eventHead is the head of the next event, of type typ.
	eventHead := func(typ string) responses.EventHead {
		return responses.EventHead{Type: typ, SequenceNumber: len(events)}
	}
	// add encodes an event at once: resp changes after.
	add := func(typ string, v any) {
		events = append(events, Event{Name: typ, Data: mustJSON(v)})
	}
	add(responses.EventCreated, responses.ResponseEvent{EventHead: eventHead(responses.EventCreated), Response: &resp})
	add(responses.EventInProgress, responses.ResponseEvent{EventHead: eventHead(responses.EventInProgress), Response: &resp})
	for i, it := range r.Items {
		add(responses.EventOutputItemAdded, responses.OutputItemEvent{EventHead: eventHead(responses.EventOutputItemAdded), OutputIndex: i, Item: it.wire(false)})
		switch it.Type {
		case responses.ItemReasoning:
			for j, s := range it.Summary {
				part := func(typ, text string) responses.SummaryPartEvent {
					return responses.SummaryPartEvent{EventHead: eventHead(typ), SummaryAt: responses.SummaryAt{ItemAt: responses.ItemAt{ItemID: it.ID, OutputIndex: i}, SummaryIndex: j}, Part: responses.SummaryText{Type: responses.PartSummaryText, Text: text}}
				}
				add(responses.EventReasoningSummaryPartAdded, part(responses.EventReasoningSummaryPartAdded, ""))
				add(responses.EventReasoningSummaryTextDelta, responses.SummaryTextDeltaEvent{EventHead: eventHead(responses.EventReasoningSummaryTextDelta), SummaryAt: responses.SummaryAt{ItemAt: responses.ItemAt{ItemID: it.ID, OutputIndex: i}, SummaryIndex: j}, Delta: s})
				add(responses.EventReasoningSummaryTextDone, responses.SummaryTextDoneEvent{EventHead: eventHead(responses.EventReasoningSummaryTextDone), SummaryAt: responses.SummaryAt{ItemAt: responses.ItemAt{ItemID: it.ID, OutputIndex: i}, SummaryIndex: j}, Text: s})
				add(responses.EventReasoningSummaryPartDone, part(responses.EventReasoningSummaryPartDone, s))
			}
		case responses.ItemFunctionCall:
			add(responses.EventFunctionCallArgumentsDelta, responses.ArgumentsDeltaEvent{EventHead: eventHead(responses.EventFunctionCallArgumentsDelta), ItemAt: responses.ItemAt{ItemID: it.ID, OutputIndex: i}, Delta: it.Arguments})
			add(responses.EventFunctionCallArgumentsDone, responses.ArgumentsDoneEvent{EventHead: eventHead(responses.EventFunctionCallArgumentsDone), ItemAt: responses.ItemAt{ItemID: it.ID, OutputIndex: i}, Arguments: it.Arguments})
		default:
			add(responses.EventContentPartAdded, responses.ContentPartEvent{EventHead: eventHead(responses.EventContentPartAdded), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: it.ID, OutputIndex: i}}, Part: outputText("")})
			add(responses.EventOutputTextDelta, responses.OutputTextDeltaEvent{EventHead: eventHead(responses.EventOutputTextDelta), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: it.ID, OutputIndex: i}}, Delta: it.Text, Logprobs: []json.RawMessage{}})
			add(responses.EventOutputTextDone, responses.OutputTextDoneEvent{EventHead: eventHead(responses.EventOutputTextDone), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: it.ID, OutputIndex: i}}, Text: it.Text, Logprobs: []json.RawMessage{}})
			add(responses.EventContentPartDone, responses.ContentPartEvent{EventHead: eventHead(responses.EventContentPartDone), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: it.ID, OutputIndex: i}}, Part: outputText(it.Text)})
		}
		add(responses.EventOutputItemDone, responses.OutputItemEvent{EventHead: eventHead(responses.EventOutputItemDone), OutputIndex: i, Item: it.wire(true)})
		resp.Output = append(resp.Output, it.wire(true))
	}
	resp.Status = responses.StatusCompleted
	resp.Usage = &responses.Usage{
		InputTokens:         int64(r.Usage.InputTokens),
		InputTokensDetails:  responses.InputTokensDetails{CachedTokens: int64(r.Usage.CachedTokens)},
		OutputTokens:        int64(r.Usage.OutputTokens),
		OutputTokensDetails: responses.OutputTokensDetails{ReasoningTokens: int64(r.Usage.ReasoningTokens)},
		TotalTokens:         int64(r.Usage.InputTokens + r.Usage.OutputTokens),
	}
	add(responses.EventCompleted, responses.ResponseEvent{EventHead: eventHead(responses.EventCompleted), Response: &resp})
	return events
}

// Stream answers an HTTP request with events as a Responses API stream
// (text/event-stream, each event "event: NAME\ndata: JSON\n\n"), flushing
// after each event.
func Stream(w http.ResponseWriter, events []Event) error {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, e := range events {
		if err := sse.WriteEvent(w, e.Name, e.Data); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// WriteError answers with status and an OpenAI error envelope.
func WriteError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	typ := chat.ErrorInvalidRequest
	if status >= 500 {
		typ = chat.ErrorServer
	}
	_, _ = w.Write(mustJSON(chat.Error{Error: chat.ErrorBody{Message: message, Type: typ}}))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("codexcli: marshal %T: %v", v, err))
	}
	return b
}
