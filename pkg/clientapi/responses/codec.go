package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// responsesCodec encodes answers as the OpenAI Responses API: one Response
// object, or the Responses event sequence.
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
// (JoinBroken), which has no Response to end.
type responsesCodec struct {
	requestID string
	req       *llm.ChatRequest
	// model is the model id the client sent, echoed in the Response.
	model string
	// keyed: the answer is recorded. A Responses stream always carries its
	// usage (in its last event), so nothing depends on it yet.
	keyed bool
	// metadata, instructions and previousID are the request's, echoed.
	metadata     json.RawMessage
	instructions string
	// echoToolChoice and echoParallel are the request's tool_choice and
	// parallel_tool_calls that its Chat Completions body left out (no
	// tools): echoed as sent.
	echoToolChoice json.RawMessage
	echoParallel   *bool
	previousID     string
	createdAt      int64
	// turn, when not nil, is given the answer's output as Chat Completions
	// messages (one assistant message) once it is complete or incomplete,
	// after Price and before the last bytes, so that the turn can be kept
	// for previous_response_id. A failed answer is no turn.
	turn func(response json.RawMessage, output []json.RawMessage, usage llm.Usage)
	// store, when set, is the "store" of a response object: what the
	// request asked while the answer runs, whether the turn was kept once
	// it is final.
	store func(final bool) bool
	// items writes a stream's events (stream): part of the codec, which
	// is on the heap already, as the DeltaWriter it is given to needs.
	items itemWriter
}

var _ gateway.Codec = (*responsesCodec)(nil)

func (c *responsesCodec) hex() string { return strings.TrimPrefix(c.requestID, "req_") }

// responseID is the Response's id, resp_ and the request id's hex part.
func (c *responsesCodec) responseID() string { return "resp_" + c.hex() }

func (c *responsesCodec) messageID(index int) string {
	return "msg_" + c.hex() + "_" + strconv.Itoa(index)
}

func (c *responsesCodec) reasoningID(index int) string {
	return "rs_" + c.hex() + "_" + strconv.Itoa(index)
}

func (c *responsesCodec) functionCallID(index int) string {
	return "fc_" + c.hex() + "_" + strconv.Itoa(index)
}

// callID is the call_id of a tool call the upstream sent no id for.
func (c *responsesCodec) callID(index int) string {
	return "call_" + c.hex() + "_" + strconv.Itoa(index)
}

func (c *responsesCodec) Answer(ans *router.Answer, out gateway.Emitter) gateway.Result {
	c.model = ans.Model() // the provider's name for what answered (docs/api.md#answers)
	if ans.Proto == llm.ProtoResponses {
		if c.req.Stream {
			return c.passStream(ans, out)
		}
		return c.passResponse(ans, out)
	}
	if c.req.Stream {
		return c.stream(ans, out)
	}
	return c.response(ans, out)
}

// responsesUsage is the Responses usage object plus the gateway's cost.
type responsesUsage struct {
	responseswire.Usage
	Cost      llm.USD `json:"cost"`
	Estimated bool    `json:"estimated,omitempty"`
}

func toResponsesUsage(u llm.Usage) *responsesUsage {
	r := &responsesUsage{Cost: llm.USD(u.Cost), Estimated: u.Estimated}
	r.InputTokens, r.OutputTokens, r.TotalTokens = int64(u.PromptTokens), int64(u.CompletionTokens), int64(u.TotalTokens)
	if r.TotalTokens < r.InputTokens+r.OutputTokens {
		r.TotalTokens = r.InputTokens + r.OutputTokens
	}
	r.InputTokensDetails.CachedTokens = int64(u.Detail("prompt_tokens_details", "cached_tokens"))
	r.OutputTokensDetails.ReasoningTokens = int64(u.Detail("completion_tokens_details", "reasoning_tokens"))
	return r
}

func outputText(s string) *responseswire.OutputText {
	return &responseswire.OutputText{Type: responseswire.PartOutputText, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}, Text: s}
}

func summaryText(s string) responseswire.SummaryText {
	return responseswire.SummaryText{Type: responseswire.PartSummaryText, Text: s}
}

// jsonNull is a Response's instructions, max_output_tokens or
// previous_response_id when it has none. (Shared: nothing appends to it.)
var jsonNull = json.RawMessage("null")

// requestSettings are the request's sampling and tool settings, as the
// Response echoes them.
type requestSettings struct {
	tools       []json.RawMessage
	toolChoice  json.RawMessage
	temperature float64
	topP        float64
	parallel    bool
	maxOutput   *int64
}

// settings reads the echoed settings back from the chat request the
// Responses request was converted to: tools and tool_choice in the Responses
// shape, OpenAI's defaults for what the request left out.
func (c *responsesCodec) settings() requestSettings {
	s := requestSettings{tools: []json.RawMessage{}, toolChoice: json.RawMessage(`"auto"`), temperature: 1, topP: 1, parallel: true}
	body, err := c.req.UpstreamBody("")
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
		tool := responseswire.FunctionTool{Type: responseswire.ToolFunction, Name: fn.Name, Description: fn.Description, Parameters: fn.Parameters}
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
		if b, err := json.Marshal(responseswire.NamedTool{Type: responseswire.ToolFunction, Name: choice.Function.Name}); err == nil {
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
	if c.echoToolChoice != nil {
		var b bytes.Buffer
		if json.Compact(&b, c.echoToolChoice) == nil {
			s.toolChoice = b.Bytes()
		}
	}
	if c.echoParallel != nil {
		s.parallel = *c.echoParallel
	}
	s.maxOutput = f.MaxCompletionTokens
	if s.maxOutput == nil {
		s.maxOutput = f.MaxTokens
	}
	return s
}

// object is the Response with the given status and output; usage nil (an
// in-progress Response) is null.
func (c *responsesCodec) object(s *requestSettings, status string, output []any, usage *llm.Usage) *responseswire.Response {
	r := &responseswire.Response{
		ID: c.responseID(), Object: responseswire.ObjectResponse, CreatedAt: c.createdAt, Status: status,
		Instructions: jsonNull, MaxOutputTokens: jsonNull, Model: c.model, Output: output, ParallelToolCalls: s.parallel,
		PreviousResponseID: jsonNull, Temperature: &s.temperature, ToolChoice: s.toolChoice, Tools: s.tools, TopP: &s.topP,
		Metadata: c.metadata,
	}
	if r.Output == nil {
		r.Output = []any{}
	}
	if c.store != nil {
		v := c.store(status != responseswire.StatusInProgress)
		r.Store = &v
	}
	if len(r.Metadata) == 0 || string(r.Metadata) == "null" {
		r.Metadata = json.RawMessage(`{}`)
	}
	if c.instructions != "" {
		r.Instructions, _ = json.Marshal(c.instructions)
	}
	if s.maxOutput != nil {
		r.MaxOutputTokens = strconv.AppendInt(nil, *s.maxOutput, 10)
	}
	if c.previousID != "" {
		r.PreviousResponseID, _ = json.Marshal(c.previousID)
	}
	if usage != nil {
		r.Usage = toResponsesUsage(*usage)
	}
	return r
}

// ending is how a finished or cut answer reads: its status and
// incomplete_details.
func responsesEnding(end error, finish string) (string, *responseswire.IncompleteDetails) {
	if errors.Is(end, router.ErrIncomplete) {
		return responseswire.StatusIncomplete, &responseswire.IncompleteDetails{Reason: "interrupted"}
	}
	return responseswire.Ending(finish)
}

// turnMessage is the answer as a Chat Completions assistant message, the
// turn kept for previous_response_id.
type turnMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal,omitempty"`
	ToolCalls []llm.ToolCall `json:"tool_calls,omitempty"`
}

func (c *responsesCodec) keepTurn(resp json.RawMessage, text, refusal string, calls []llm.ToolCall, usage llm.Usage) {
	if c.turn == nil {
		return
	}
	m := turnMessage{Role: "assistant", ToolCalls: calls}
	if text != "" || refusal == "" && len(calls) == 0 {
		m.Content = &text
	}
	if refusal != "" {
		m.Refusal = &refusal
	}
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	c.turn(resp, []json.RawMessage{b}, usage)
}

// response assembles the provider's stream into one Response. The ending
// rules are chatCodec.completion's: a failure after output is an error and
// nothing is written; a stream that just stopped is an incomplete Response.
func (c *responsesCodec) response(ans *router.Answer, out gateway.Emitter) gateway.Result {
	ch, usage, res, ok, end := clientapi.AssembleChoice(ans)
	if !ok {
		return res
	}
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	status, details := responsesEnding(end, finish)
	var output []any
	if m := ch.Message; m.ReasoningContent != nil && *m.ReasoningContent != "" {
		output = append(output, &responseswire.ReasoningItem{ID: c.reasoningID(0), Type: responseswire.ItemReasoning,
			Summary: []responseswire.SummaryText{summaryText(*m.ReasoningContent)}, Status: responseswire.StatusCompleted})
	}
	text, refusal := "", ""
	if m := ch.Message; m.Content != nil {
		text = *m.Content
	}
	if r, ok := clientapi.Refusal(&ch.Message); ok {
		refusal = r
	}
	if text != "" || refusal != "" {
		msg := &responseswire.MessageItem{ID: c.messageID(len(output)), Type: responseswire.ItemMessage, Status: responseswire.StatusCompleted,
			Content: []any{}, Role: responseswire.RoleAssistant}
		if text != "" {
			msg.Content = append(msg.Content, outputText(text))
		}
		if refusal != "" {
			msg.Content = append(msg.Content, &responseswire.RefusalPart{Type: responseswire.PartRefusal, Refusal: refusal})
		}
		output = append(output, msg)
	}
	var calls []llm.ToolCall
	for _, tc := range ch.Message.ToolCalls {
		i := len(output)
		id := tc.ID
		if id == "" {
			id = c.callID(i)
		}
		output = append(output, &responseswire.FunctionCallItem{ID: c.functionCallID(i), Type: responseswire.ItemFunctionCall,
			Status: responseswire.StatusCompleted, Arguments: tc.Function.Arguments, CallID: id, Name: tc.Function.Name})
		calls = append(calls, llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall(tc.Function)})
	}
	if status != responseswire.StatusCompleted && len(output) > 0 {
		switch it := output[len(output)-1].(type) {
		case *responseswire.MessageItem:
			it.Status = responseswire.StatusIncomplete
		case *responseswire.FunctionCallItem:
			it.Status = responseswire.StatusIncomplete
		case *responseswire.ReasoningItem:
			it.Status = responseswire.StatusIncomplete
		}
	}
	settings := c.settings()
	r := c.object(&settings, status, output, &usage)
	r.IncompleteDetails = details
	body, err := json.Marshal(r)
	if err != nil {
		return gateway.Result{Usage: usage, Err: err}
	}
	return clientapi.WriteWhole(out, clientapi.AnswerHead(c.requestID, c.req, ans, "application/json"), usage, body, end, func() {
		c.keepTurn(body, text, refusal, calls, usage)
	})
}

// itemWriter turns chat deltas into the Responses item events.
type itemWriter struct {
	clientapi.EventSender
	c   *responsesCodec
	seq int

	output []any // the closed items

	open  string // the open item's type ("message", "function_call"), "" for none
	index int    // the open item's output_index
	msg   *responseswire.MessageItem
	part  string // the open part's type ("output_text", "refusal"), "" for none
	buf   strings.Builder
	fc    *responseswire.FunctionCallItem
	tool  int // the chat tool-call index of the open function_call
	args  strings.Builder
	rs    *responseswire.ReasoningItem
	rbuf  strings.Builder

	// The turn.
	turnText, turnRefusal strings.Builder
	calls                 []llm.ToolCall
}

func (w *itemWriter) text(s string) { w.content(responseswire.PartOutputText, s) }

func (w *itemWriter) refusal(s string) { w.content(responseswire.PartRefusal, s) }

// next is the next event's sequence_number.
func (w *itemWriter) next() int {
	w.seq++
	return w.seq - 1
}

// item sends response.output_item.added or .done.
func (w *itemWriter) item(name string, item any) {
	w.Send(name, responseswire.OutputItemEvent{Type: name, SequenceNumber: w.next(), OutputIndex: w.index, Item: item})
}

// contentPart sends response.content_part.added or .done.
func (w *itemWriter) contentPart(name string, ci int, part any) {
	w.Send(name, responseswire.ContentPartEvent{Type: name, SequenceNumber: w.next(), ItemID: w.msg.ID, OutputIndex: w.index,
		ContentIndex: ci, Part: part})
}

// summaryPart sends response.reasoning_summary_part.added or .done.
func (w *itemWriter) summaryPart(name, text string) {
	w.Send(name, responseswire.SummaryPartEvent{Type: name, SequenceNumber: w.next(), ItemID: w.rs.ID, OutputIndex: w.index,
		Part: summaryText(text)})
}

func (w *itemWriter) closePart() {
	if w.part == "" {
		return
	}
	ci := len(w.msg.Content)
	s := w.buf.String()
	var part any
	if w.part == responseswire.PartRefusal {
		w.Send(responseswire.EventRefusalDone, responseswire.RefusalDoneEvent{Type: responseswire.EventRefusalDone, SequenceNumber: w.next(),
			ItemID: w.msg.ID, OutputIndex: w.index, ContentIndex: ci, Refusal: s})
		part = &responseswire.RefusalPart{Type: responseswire.PartRefusal, Refusal: s}
	} else {
		w.Send(responseswire.EventOutputTextDone, responseswire.OutputTextDoneEvent{Type: responseswire.EventOutputTextDone, SequenceNumber: w.next(),
			ItemID: w.msg.ID, OutputIndex: w.index, ContentIndex: ci, Text: s, Logprobs: []json.RawMessage{}})
		part = outputText(s)
	}
	w.contentPart(responseswire.EventContentPartDone, ci, part)
	w.msg.Content = append(w.msg.Content, part)
	w.part = ""
	w.buf.Reset()
}

// reasoning takes a reasoning model's thinking: it opens a reasoning item
// with one summary part as needed.
func (w *itemWriter) reasoning(s string) {
	if s == "" {
		return
	}
	if w.open != responseswire.ItemReasoning {
		w.closeItem(responseswire.StatusCompleted)
		w.open, w.index = responseswire.ItemReasoning, len(w.output)
		w.rs = &responseswire.ReasoningItem{ID: w.c.reasoningID(w.index), Type: responseswire.ItemReasoning,
			Summary: []responseswire.SummaryText{}, Status: responseswire.StatusInProgress}
		w.item(responseswire.EventOutputItemAdded, *w.rs)
		w.summaryPart(responseswire.EventReasoningSummaryPartAdded, "")
	}
	w.rbuf.WriteString(s)
	w.Send(responseswire.EventReasoningSummaryTextDelta, responseswire.SummaryTextDeltaEvent{Type: responseswire.EventReasoningSummaryTextDelta,
		SequenceNumber: w.next(), ItemID: w.rs.ID, OutputIndex: w.index, Delta: s})
}

// closeItem ends the open item with status.
func (w *itemWriter) closeItem(status string) {
	switch w.open {
	case responseswire.ItemReasoning:
		text := w.rbuf.String()
		w.Send(responseswire.EventReasoningSummaryTextDone, responseswire.SummaryTextDoneEvent{Type: responseswire.EventReasoningSummaryTextDone,
			SequenceNumber: w.next(), ItemID: w.rs.ID, OutputIndex: w.index, Text: text})
		w.summaryPart(responseswire.EventReasoningSummaryPartDone, text)
		w.rs.Summary, w.rs.Status = []responseswire.SummaryText{summaryText(text)}, status
		w.item(responseswire.EventOutputItemDone, w.rs)
		w.output = append(w.output, w.rs)
		w.rs = nil
		w.rbuf.Reset()
	case responseswire.ItemMessage:
		w.closePart()
		w.msg.Status = status
		w.item(responseswire.EventOutputItemDone, w.msg)
		w.output = append(w.output, w.msg)
		w.msg = nil
	case responseswire.ItemFunctionCall:
		w.fc.Arguments, w.fc.Status = w.args.String(), status
		w.Send(responseswire.EventFunctionCallArgumentsDone, responseswire.ArgumentsDoneEvent{Type: responseswire.EventFunctionCallArgumentsDone,
			SequenceNumber: w.next(), ItemID: w.fc.ID, OutputIndex: w.index, Arguments: w.fc.Arguments})
		w.item(responseswire.EventOutputItemDone, w.fc)
		w.output = append(w.output, w.fc)
		w.calls = append(w.calls, llm.ToolCall{ID: w.fc.CallID, Type: "function",
			Function: llm.FunctionCall{Name: w.fc.Name, Arguments: w.fc.Arguments}})
		w.fc = nil
		w.args.Reset()
	default:
		return
	}
	w.open = ""
}

// content takes text (kind output_text) or refusal text: it opens the
// message item and the part of that kind as needed.
func (w *itemWriter) content(kind, s string) {
	if s == "" {
		return
	}
	if w.open != responseswire.ItemMessage {
		w.closeItem(responseswire.StatusCompleted)
		w.open, w.index = responseswire.ItemMessage, len(w.output)
		w.msg = &responseswire.MessageItem{ID: w.c.messageID(w.index), Type: responseswire.ItemMessage, Status: responseswire.StatusInProgress,
			Content: []any{}, Role: responseswire.RoleAssistant}
		w.item(responseswire.EventOutputItemAdded, responseswire.MessageItem{ID: w.msg.ID, Type: responseswire.ItemMessage,
			Status: responseswire.StatusInProgress, Content: []any{}, Role: responseswire.RoleAssistant})
	}
	if w.part != kind {
		w.closePart()
		w.part = kind
		var part any = outputText("")
		if kind == responseswire.PartRefusal {
			part = &responseswire.RefusalPart{Type: responseswire.PartRefusal}
		}
		w.contentPart(responseswire.EventContentPartAdded, len(w.msg.Content), part)
	}
	w.buf.WriteString(s)
	ci := len(w.msg.Content)
	if kind == responseswire.PartRefusal {
		w.turnRefusal.WriteString(s)
		w.Send(responseswire.EventRefusalDelta, responseswire.RefusalDeltaEvent{Type: responseswire.EventRefusalDelta, SequenceNumber: w.next(),
			ItemID: w.msg.ID, OutputIndex: w.index, ContentIndex: ci, Delta: s})
	} else {
		w.turnText.WriteString(s)
		w.Send(responseswire.EventOutputTextDelta, responseswire.OutputTextDeltaEvent{Type: responseswire.EventOutputTextDelta, SequenceNumber: w.next(),
			ItemID: w.msg.ID, OutputIndex: w.index, ContentIndex: ci, Delta: s, Logprobs: []json.RawMessage{}})
	}
}

// toolCall takes one tool-call delta: a new index opens a function_call item
// (with the id and name of that delta), arguments go out as
// function_call_arguments.delta. As in blockWriter.toolCall, a name fragment
// after the first delta is dropped, and a call resumed after another began
// opens a new item.
func (w *itemWriter) toolCall(index int, id, name, args string) {
	if w.open != responseswire.ItemFunctionCall || w.tool != index {
		w.closeItem(responseswire.StatusCompleted)
		w.open, w.index, w.tool = responseswire.ItemFunctionCall, len(w.output), index
		if id == "" {
			id = w.c.callID(w.index)
		}
		w.fc = &responseswire.FunctionCallItem{ID: w.c.functionCallID(w.index), Type: responseswire.ItemFunctionCall,
			Status: responseswire.StatusInProgress, CallID: id, Name: name}
		w.item(responseswire.EventOutputItemAdded, *w.fc)
	}
	if args == "" {
		return
	}
	w.args.WriteString(args)
	w.Send(responseswire.EventFunctionCallArgumentsDelta, responseswire.ArgumentsDeltaEvent{Type: responseswire.EventFunctionCallArgumentsDelta,
		SequenceNumber: w.next(), ItemID: w.fc.ID, OutputIndex: w.index, Delta: args})
}

// responseEvent sends a response.* event carrying r.
func (w *itemWriter) responseEvent(name string, r *responseswire.Response) {
	w.Send(name, responseswire.ResponseEvent{Type: name, SequenceNumber: w.next(), Response: r})
}

// stream relays the answer as the Responses event sequence (see
// responsesCodec).
func (c *responsesCodec) stream(ans *router.Answer, out gateway.Emitter) gateway.Result {
	out.Start(http.StatusOK, clientapi.AnswerHead(c.requestID, c.req, ans, "text/event-stream"), true)
	s := c.settings()
	c.items = itemWriter{c: c, EventSender: clientapi.EventSender{Out: out}}
	w := &c.items
	w.responseEvent(responseswire.EventCreated, c.object(&s, responseswire.StatusInProgress, nil, nil))
	w.responseEvent(responseswire.EventInProgress, c.object(&s, responseswire.StatusInProgress, nil, nil))
	finish, usage, res, gone, end := clientapi.RelayDeltas(ans, deltaWriter{w})
	if gone {
		return res
	}
	switch {
	case end == io.EOF, errors.Is(end, router.ErrIncomplete):
		status, details := responsesEnding(end, finish)
		w.closeItem(status)
		out.Price(usage)
		r := c.object(&s, status, w.output, &usage)
		r.IncompleteDetails = details
		if c.turn != nil {
			if resp, err := json.Marshal(r); err == nil {
				c.keepTurn(resp, w.turnText.String(), w.turnRefusal.String(), w.calls, usage)
			}
		}
		if c.store != nil {
			v := c.store(true) // known now that keepTurn ran
			r.Store = &v
		}
		name := responseswire.EventCompleted
		if status == responseswire.StatusIncomplete {
			name = responseswire.EventIncomplete
		}
		w.responseEvent(name, r)
		if end == io.EOF {
			return gateway.Result{Usage: usage, Answered: true}
		}
	default:
		w.closeItem(responseswire.StatusIncomplete)
		out.Price(usage)
		e := clientapi.CutShort(ans.Provider, end)
		r := c.object(&s, responseswire.StatusFailed, w.output, &usage)
		r.Error = &responseswire.Error{Code: string(e.Code), Message: e.Message}
		w.responseEvent(responseswire.EventFailed, r)
	}
	return gateway.Result{Usage: usage, Answered: true, Err: end}
}

// JoinBroken ends a joined or replayed stream that cannot go on with
// Responses' "error" event (there is no Response to fail; its
// sequence_number is 0, as the codec does not know the stream's count).
func (c *responsesCodec) JoinBroken(reason string) idempotency.Event {
	return errorEvent(llm.CodeReplayUnavailable, reason)
}

// errorEvent is Responses' "error" event: a stream that cannot go on
// (its sequence_number is 0: the gateway does not count the events of a
// stream it did not write).
func errorEvent(code llm.Code, message string) idempotency.Event {
	c := string(code)
	b, _ := json.Marshal(responseswire.ErrorEvent{Type: responseswire.EventError, Code: &c, Message: message})
	return idempotency.Event{Name: responseswire.EventError, Data: b}
}
