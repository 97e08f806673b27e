package responses

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// The hub's answer as the OpenAI Responses API: one Response object, or
// the Responses event sequence.
//
// The Response's status, from the chat finish_reason of the answer's first
// choice:
//
//	stop, tool_calls, ""    -> completed
//	length                  -> incomplete, incomplete_details.reason max_output_tokens
//	content_filter          -> incomplete, incomplete_details.reason content_filter
//	(stream just stopped)   -> incomplete, incomplete_details.reason interrupted
//	(provider failed, mid-stream only) -> failed, error {code, message}
//
// "interrupted" is the gateway's own reason (OpenAI names only
// max_output_tokens and content_filter): the SDKs read the reason as a plain
// string. In an incomplete or failed Response the last output item, the one
// cut short, has status incomplete; the others are completed.
//
// Output: a reasoning model's thinking (chat reasoning_content or
// reasoning) makes a reasoning item whose summary is that text (one
// summary_text part); the answer's text and refusal make one message item (an
// output_text part, a refusal part), each tool call a function_call item
// whose call_id is the upstream's tool call id. output_text is not sent: the
// SDKs compute it from the output. usage is the Responses usage object plus
// the gateway's cost (and estimated when the gateway counted the tokens).
//
// A stream is response.created and response.in_progress (the Response with
// status in_progress and no output), then for the message
// response.output_item.added, response.content_part.added,
// response.output_text.delta (response.refusal.delta for a refusal),
// response.output_text.done (response.refusal.done), response.content_part.done
// and response.output_item.done; for reasoning response.output_item.added,
// response.reasoning_summary_part.added, response.reasoning_summary_text.delta,
// response.reasoning_summary_text.done, response.reasoning_summary_part.done
// and response.output_item.done; for each tool call
// response.output_item.added, response.function_call_arguments.delta,
// response.function_call_arguments.done and response.output_item.done; and
// it ends with response.completed or response.incomplete carrying the whole
// Response with usage. Every event's data has "type" (the event's name) and
// "sequence_number", from 0. A provider failure after output closes the open
// item and ends with response.failed, whose Response has status failed and
// error {code, message} with the gateway's code (stream_interrupted or
// request_timeout): response.failed is what OpenAI's API sends when a
// response fails, and the SDKs' stream helpers treat it as the final event,
// like response.completed. The "error" event (type, code, message, param,
// sequence_number) is left to a joined or replayed stream that cannot go on
// (ErrorEventData), which has no Response to end.

// Head is what a Response says of its request: the ids, the model that
// answered, and what it echoes of the request.
type Head struct {
	// RequestID is the gateway's request id, req_ and a hex part: the
	// Response's and its items' ids are made of that part.
	RequestID string
	// Model is the model that answered, as the Response names it.
	Model     string
	CreatedAt int64
	// Metadata, Instructions and PreviousID are the request's, echoed.
	Metadata     json.RawMessage
	Instructions string
	PreviousID   string
	// EchoToolChoice and EchoParallel are the request's tool_choice and
	// parallel_tool_calls that its Chat Completions body left out (no
	// tools): echoed as sent.
	EchoToolChoice json.RawMessage
	EchoParallel   *bool
}

func (h *Head) hex() string { return strings.TrimPrefix(h.RequestID, "req_") }

// ResponseID is the Response's id, resp_ and the request id's hex part.
func (h *Head) ResponseID() string { return "resp_" + h.hex() }

func (h *Head) messageID(index int) string {
	return "msg_" + h.hex() + "_" + strconv.Itoa(index)
}

func (h *Head) reasoningID(index int) string {
	return "rs_" + h.hex() + "_" + strconv.Itoa(index)
}

func (h *Head) functionCallID(index int) string {
	return "fc_" + h.hex() + "_" + strconv.Itoa(index)
}

// callID is the call_id of a tool call the upstream sent no id for.
func (h *Head) callID(index int) string {
	return "call_" + h.hex() + "_" + strconv.Itoa(index)
}

// CostUsage is the Responses usage object plus the gateway's cost.
type CostUsage struct {
	Usage
	Cost      llm.USD `json:"cost"`
	Estimated bool    `json:"estimated,omitempty"`
}

// UsageOf is the hub's usage as a Response's.
func UsageOf(u llm.Usage) *CostUsage {
	r := &CostUsage{Cost: llm.USD(u.Cost), Estimated: u.Estimated}
	r.InputTokens, r.OutputTokens, r.TotalTokens = int64(u.PromptTokens), int64(u.CompletionTokens), int64(u.TotalTokens)
	if r.TotalTokens < r.InputTokens+r.OutputTokens {
		r.TotalTokens = r.InputTokens + r.OutputTokens
	}
	r.InputTokensDetails.CachedTokens = int64(u.CachedTokens)
	r.OutputTokensDetails.ReasoningTokens = int64(u.ReasoningTokens)
	return r
}

func outputText(s string) *OutputText {
	return &OutputText{Type: PartOutputText, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}, Text: s}
}

func summaryText(s string) SummaryText {
	return SummaryText{Type: PartSummaryText, Text: s}
}

// jsonNull is a Response's instructions, max_output_tokens or
// previous_response_id when it has none. (Shared: nothing appends to it.)
var jsonNull = json.RawMessage("null")

// Settings are the request's sampling and tool settings, as the Response
// echoes them.
type Settings struct {
	tools       []json.RawMessage
	toolChoice  json.RawMessage
	temperature float64
	topP        float64
	parallel    bool
	maxOutput   *int64
}

// Settings reads the echoed settings back from the chat request the
// Responses request was converted to: tools and tool_choice in the Responses
// shape, OpenAI's defaults for what the request left out.
func (h *Head) Settings(req *llm.ChatRequest) Settings {
	s := Settings{tools: []json.RawMessage{}, toolChoice: json.RawMessage(`"auto"`), temperature: 1, topP: 1, parallel: true}
	body, err := req.UpstreamBody("")
	if err != nil {
		return s
	}
	var f struct {
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description *string         `json:"description,omitempty"`
				Parameters  json.RawMessage `json:"parameters,omitempty"`
				Strict      *bool           `json:"strict,omitempty"`
			} `json:"function"`
		} `json:"tools"`
		ToolChoice          json.RawMessage `json:"tool_choice"`
		Temperature         *float64        `json:"temperature"`
		TopP                *float64        `json:"top_p"`
		ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
		MaxCompletionTokens *int64          `json:"max_completion_tokens"`
		MaxTokens           *int64          `json:"max_tokens"`
	}
	if json.Unmarshal(body, &f) != nil {
		return s
	}
	for _, t := range f.Tools {
		fn := t.Function
		tool := FunctionTool{Type: ToolFunction, Name: fn.Name, Description: fn.Description, Parameters: fn.Parameters}
		if fn.Strict != nil {
			tool.Strict = strconv.AppendBool(nil, *fn.Strict)
		}
		if b, err := json.Marshal(tool); err == nil {
			s.tools = append(s.tools, b)
		}
	}
	var choice struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	switch {
	case len(f.ToolChoice) > 0 && f.ToolChoice[0] == '"':
		s.toolChoice = f.ToolChoice
	case json.Unmarshal(f.ToolChoice, &choice) == nil && choice.Type == "function":
		if b, err := json.Marshal(NamedTool{Type: ToolFunction, Name: choice.Function.Name}); err == nil {
			s.toolChoice = b
		}
	}
	if f.Temperature != nil {
		s.temperature = *f.Temperature
	}
	if f.TopP != nil {
		s.topP = *f.TopP
	}
	if f.ParallelToolCalls != nil {
		s.parallel = *f.ParallelToolCalls
	}
	if h.EchoToolChoice != nil {
		var b bytes.Buffer
		if json.Compact(&b, h.EchoToolChoice) == nil {
			s.toolChoice = b.Bytes()
		}
	}
	if h.EchoParallel != nil {
		s.parallel = *h.EchoParallel
	}
	s.maxOutput = f.MaxCompletionTokens
	if s.maxOutput == nil {
		s.maxOutput = f.MaxTokens
	}
	return s
}

// Object is the Response with the given status and output; usage nil (an
// in-progress Response) is null.
func (h *Head) Object(s *Settings, status string, output []any, usage *llm.Usage) *Response {
	r := &Response{
		ID: h.ResponseID(), Object: ObjectResponse, CreatedAt: h.CreatedAt, Status: status,
		Instructions: jsonNull, MaxOutputTokens: jsonNull, Model: h.Model, Output: output, ParallelToolCalls: s.parallel,
		PreviousResponseID: jsonNull, Temperature: &s.temperature, ToolChoice: s.toolChoice, Tools: s.tools, TopP: &s.topP,
		Metadata: h.Metadata,
	}
	if r.Output == nil {
		r.Output = []any{}
	}
	if len(r.Metadata) == 0 || string(r.Metadata) == "null" {
		r.Metadata = json.RawMessage(`{}`)
	}
	if h.Instructions != "" {
		r.Instructions, _ = json.Marshal(h.Instructions)
	}
	if s.maxOutput != nil {
		r.MaxOutputTokens = strconv.AppendInt(nil, *s.maxOutput, 10)
	}
	if h.PreviousID != "" {
		r.PreviousResponseID, _ = json.Marshal(h.PreviousID)
	}
	if usage != nil {
		r.Usage = UsageOf(*usage)
	}
	return r
}

// Output is an assembled answer's first choice as a Response's output
// items, the last one incomplete unless status is completed, and as the
// turn it makes.
func (h *Head) Output(ch *chat.Choice, status string) ([]any, Turn) {
	var output []any
	if m := ch.Message; m.ReasoningContent != nil && *m.ReasoningContent != "" {
		output = append(output, &ReasoningItem{ID: h.reasoningID(0), Type: ItemReasoning,
			Summary: []SummaryText{summaryText(*m.ReasoningContent)}, Status: StatusCompleted})
	}
	var t Turn
	if m := ch.Message; m.Content != nil {
		t.Text = *m.Content
	}
	if r, ok := ch.Message.RefusalText(); ok {
		t.Refusal = r
	}
	if t.Text != "" || t.Refusal != "" {
		msg := &MessageItem{ID: h.messageID(len(output)), Type: ItemMessage, Status: StatusCompleted,
			Content: []any{}, Role: RoleAssistant}
		if t.Text != "" {
			msg.Content = append(msg.Content, outputText(t.Text))
		}
		if t.Refusal != "" {
			msg.Content = append(msg.Content, &RefusalPart{Type: PartRefusal, Refusal: t.Refusal})
		}
		output = append(output, msg)
	}
	for _, tc := range ch.Message.ToolCalls {
		i := len(output)
		id := tc.ID
		if id == "" {
			id = h.callID(i)
		}
		output = append(output, &FunctionCallItem{ID: h.functionCallID(i), Type: ItemFunctionCall,
			Status: StatusCompleted, Arguments: tc.Function.Arguments, CallID: id, Name: tc.Function.Name})
		t.Calls = append(t.Calls, chat.ToolCall{ID: id, Type: "function", Function: tc.Function})
	}
	if status != StatusCompleted && len(output) > 0 {
		switch it := output[len(output)-1].(type) {
		case *MessageItem:
			it.Status = StatusIncomplete
		case *FunctionCallItem:
			it.Status = StatusIncomplete
		case *ReasoningItem:
			it.Status = StatusIncomplete
		}
	}
	return output, t
}

// Turn is an answer's output as a kept turn holds it.
type Turn struct {
	Text, Refusal string
	Calls         []chat.ToolCall
}

// turnMessage is the answer as a Chat Completions assistant message, the
// turn kept for previous_response_id.
type turnMessage struct {
	Role      string          `json:"role"`
	Content   *string         `json:"content"`
	Refusal   *string         `json:"refusal,omitempty"`
	ToolCalls []chat.ToolCall `json:"tool_calls,omitempty"`
}

// Message is the turn as a Chat Completions assistant message, as a
// later request that continues it sends it.
func (t *Turn) Message() (json.RawMessage, error) {
	m := turnMessage{Role: "assistant", ToolCalls: t.Calls}
	if t.Text != "" || t.Refusal == "" && len(t.Calls) == 0 {
		m.Content = &t.Text
	}
	if t.Refusal != "" {
		m.Refusal = &t.Refusal
	}
	return json.Marshal(m)
}

// Sender sends a stream's events, each value encoded as an event's data;
// Err is its first failure (the client is gone), after which it sends
// nothing.
type Sender interface {
	Send(name string, v any)
	Err() error
}

// NewItemWriter is the ItemWriter of a stream's events to s, its ids h's.
func NewItemWriter(s Sender, h *Head) ItemWriter { return ItemWriter{Sender: s, h: h} }

// ItemWriter turns chat deltas into the Responses item events (it is a
// clientapi.DeltaWriter); a stop sequence is not in a Responses event.
type ItemWriter struct {
	Sender
	h   *Head
	seq int

	output []any // the closed items

	open  string // the open item's type ("message", "function_call"), "" for none
	index int    // the open item's output_index
	msg   *MessageItem
	part  string // the open part's type ("output_text", "refusal"), "" for none
	buf   strings.Builder
	fc    *FunctionCallItem
	tool  int // the chat tool-call index of the open function_call
	args  strings.Builder
	rs    *ReasoningItem
	rbuf  strings.Builder

	// The turn.
	turnText, turnRefusal strings.Builder
	calls                 []chat.ToolCall
}

func (w *ItemWriter) Text(s string) { w.content(PartOutputText, s) }

func (w *ItemWriter) Refusal(s string) { w.content(PartRefusal, s) }

// next is the next event's sequence_number.
func (w *ItemWriter) next() int {
	w.seq++
	return w.seq - 1
}

// head is the head of the next event, name.
func (w *ItemWriter) head(name string) EventHead {
	return EventHead{Type: name, SequenceNumber: w.next()}
}

// at is where the open item, id, is.
func (w *ItemWriter) at(id string) ItemAt { return ItemAt{ItemID: id, OutputIndex: w.index} }

// item sends response.output_item.added or .done.
func (w *ItemWriter) item(name string, item any) {
	w.Send(name, OutputItemEvent{EventHead: w.head(name), OutputIndex: w.index, Item: item})
}

// contentPart sends response.content_part.added or .done.
func (w *ItemWriter) contentPart(name string, ci int, part any) {
	w.Send(name, ContentPartEvent{EventHead: w.head(name), PartAt: PartAt{w.at(w.msg.ID), ci}, Part: part})
}

// summaryPart sends response.reasoning_summary_part.added or .done.
func (w *ItemWriter) summaryPart(name, text string) {
	w.Send(name, SummaryPartEvent{EventHead: w.head(name), SummaryAt: SummaryAt{ItemAt: w.at(w.rs.ID)}, Part: summaryText(text)})
}

func (w *ItemWriter) closePart() {
	if w.part == "" {
		return
	}
	ci := len(w.msg.Content)
	s := w.buf.String()
	var part any
	if w.part == PartRefusal {
		w.Send(EventRefusalDone, RefusalDoneEvent{EventHead: w.head(EventRefusalDone), PartAt: PartAt{w.at(w.msg.ID), ci}, Refusal: s})
		part = &RefusalPart{Type: PartRefusal, Refusal: s}
	} else {
		w.Send(EventOutputTextDone, OutputTextDoneEvent{EventHead: w.head(EventOutputTextDone), PartAt: PartAt{w.at(w.msg.ID), ci}, Text: s, Logprobs: []json.RawMessage{}})
		part = outputText(s)
	}
	w.contentPart(EventContentPartDone, ci, part)
	w.msg.Content = append(w.msg.Content, part)
	w.part = ""
	w.buf.Reset()
}

// Reasoning takes a reasoning model's thinking: it opens a reasoning item
// with one summary part as needed.
func (w *ItemWriter) Reasoning(s string) {
	if s == "" {
		return
	}
	if w.open != ItemReasoning {
		w.CloseItem(StatusCompleted)
		w.open, w.index = ItemReasoning, len(w.output)
		w.rs = &ReasoningItem{ID: w.h.reasoningID(w.index), Type: ItemReasoning,
			Summary: []SummaryText{}, Status: StatusInProgress}
		w.item(EventOutputItemAdded, *w.rs)
		w.summaryPart(EventReasoningSummaryPartAdded, "")
	}
	w.rbuf.WriteString(s)
	w.Send(EventReasoningSummaryTextDelta, SummaryTextDeltaEvent{EventHead: w.head(EventReasoningSummaryTextDelta), SummaryAt: SummaryAt{ItemAt: w.at(w.rs.ID)}, Delta: s})
}

// CloseItem ends the open item with status.
func (w *ItemWriter) CloseItem(status string) {
	switch w.open {
	case ItemReasoning:
		text := w.rbuf.String()
		w.Send(EventReasoningSummaryTextDone, SummaryTextDoneEvent{EventHead: w.head(EventReasoningSummaryTextDone), SummaryAt: SummaryAt{ItemAt: w.at(w.rs.ID)}, Text: text})
		w.summaryPart(EventReasoningSummaryPartDone, text)
		w.rs.Summary, w.rs.Status = []SummaryText{summaryText(text)}, status
		w.item(EventOutputItemDone, w.rs)
		w.output = append(w.output, w.rs)
		w.rs = nil
		w.rbuf.Reset()
	case ItemMessage:
		w.closePart()
		w.msg.Status = status
		w.item(EventOutputItemDone, w.msg)
		w.output = append(w.output, w.msg)
		w.msg = nil
	case ItemFunctionCall:
		w.fc.Arguments, w.fc.Status = w.args.String(), status
		w.Send(EventFunctionCallArgumentsDone, ArgumentsDoneEvent{EventHead: w.head(EventFunctionCallArgumentsDone), ItemAt: w.at(w.fc.ID), Arguments: w.fc.Arguments})
		w.item(EventOutputItemDone, w.fc)
		w.output = append(w.output, w.fc)
		w.calls = append(w.calls, chat.ToolCall{ID: w.fc.CallID, Type: "function",
			Function: chat.Function{Name: w.fc.Name, Arguments: w.fc.Arguments}})
		w.fc = nil
		w.args.Reset()
	default:
		return
	}
	w.open = ""
}

// content takes text (kind output_text) or refusal text: it opens the
// message item and the part of that kind as needed.
func (w *ItemWriter) content(kind, s string) {
	if s == "" {
		return
	}
	if w.open != ItemMessage {
		w.CloseItem(StatusCompleted)
		w.open, w.index = ItemMessage, len(w.output)
		w.msg = &MessageItem{ID: w.h.messageID(w.index), Type: ItemMessage, Status: StatusInProgress,
			Content: []any{}, Role: RoleAssistant}
		w.item(EventOutputItemAdded, MessageItem{ID: w.msg.ID, Type: ItemMessage,
			Status: StatusInProgress, Content: []any{}, Role: RoleAssistant})
	}
	if w.part != kind {
		w.closePart()
		w.part = kind
		var part any = outputText("")
		if kind == PartRefusal {
			part = &RefusalPart{Type: PartRefusal}
		}
		w.contentPart(EventContentPartAdded, len(w.msg.Content), part)
	}
	w.buf.WriteString(s)
	ci := len(w.msg.Content)
	if kind == PartRefusal {
		w.turnRefusal.WriteString(s)
		w.Send(EventRefusalDelta, RefusalDeltaEvent{EventHead: w.head(EventRefusalDelta), PartAt: PartAt{w.at(w.msg.ID), ci}, Delta: s})
	} else {
		w.turnText.WriteString(s)
		w.Send(EventOutputTextDelta, OutputTextDeltaEvent{EventHead: w.head(EventOutputTextDelta), PartAt: PartAt{w.at(w.msg.ID), ci}, Delta: s, Logprobs: []json.RawMessage{}})
	}
}

// ToolCall takes one tool-call delta: a new index opens a function_call item
// (with the id and name of that delta), arguments go out as
// function_call_arguments.delta. As in blockWriter.toolCall, a name fragment
// after the first delta is dropped, and a call resumed after another began
// opens a new item.
func (w *ItemWriter) ToolCall(index int, id, name, args string) {
	if w.open != ItemFunctionCall || w.tool != index {
		w.CloseItem(StatusCompleted)
		w.open, w.index, w.tool = ItemFunctionCall, len(w.output), index
		if id == "" {
			id = w.h.callID(w.index)
		}
		w.fc = &FunctionCallItem{ID: w.h.functionCallID(w.index), Type: ItemFunctionCall,
			Status: StatusInProgress, CallID: id, Name: name}
		w.item(EventOutputItemAdded, *w.fc)
	}
	if args == "" {
		return
	}
	w.args.WriteString(args)
	w.Send(EventFunctionCallArgumentsDelta, ArgumentsDeltaEvent{EventHead: w.head(EventFunctionCallArgumentsDelta), ItemAt: w.at(w.fc.ID), Delta: args})
}

// ResponseEvent sends a response.* event carrying r.
func (w *ItemWriter) ResponseEvent(name string, r *Response) {
	w.Send(name, ResponseEvent{EventHead: w.head(name), Response: r})
}

// StopSequence drops the stop sequence: a Response does not say it.
func (*ItemWriter) StopSequence(string) {}

// Output is the closed items.
func (w *ItemWriter) Output() []any { return w.output }

// Turn is what the stream wrote as the turn it makes.
func (w *ItemWriter) Turn() Turn {
	return Turn{Text: w.turnText.String(), Refusal: w.turnRefusal.String(), Calls: w.calls}
}

// ErrorEventData is Responses' "error" event's data: a stream that cannot
// go on (its sequence_number is 0: the gateway does not count the events
// of a stream it did not write).
func ErrorEventData(code llm.Code, message string) []byte {
	c := string(code)
	b, _ := json.Marshal(ErrorEvent{Type: EventError, Code: &c, Message: message})
	return b
}

// Terminal reports whether a Responses event ends the response (and
// carries its usage).
func Terminal(ch *llm.Chunk) bool {
	switch ch.Event {
	case EventCompleted, EventIncomplete, EventFailed:
		return true
	}
	return ch.Usage != nil && ch.Finished != 0
}

// UsagePath is where a passed-through stream's terminal event has the
// final usage: its response's "usage".
var UsagePath = []string{"response", "usage"}

// WithStore is the response object obj (and what follows it: a newline)
// with "store" set.
func WithStore(obj []byte, kept bool) []byte {
	v := []byte("false")
	if kept {
		v = []byte("true")
	}
	body := bytes.TrimRight(obj, "\n")
	out, err := llm.SetTopLevel(body, map[string][]byte{"store": v})
	if err != nil {
		return obj
	}
	return append(out, obj[len(body):]...)
}
