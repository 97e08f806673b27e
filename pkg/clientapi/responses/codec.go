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
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int     `json:"total_tokens"`
	Cost        float64 `json:"cost"`
	Estimated   bool    `json:"estimated,omitempty"`
}

func toResponsesUsage(u llm.Usage) *responsesUsage {
	r := &responsesUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		Cost: u.Cost, Estimated: u.Estimated}
	if r.TotalTokens < r.InputTokens+r.OutputTokens {
		r.TotalTokens = r.InputTokens + r.OutputTokens
	}
	r.InputTokensDetails.CachedTokens = clientapi.UsageDetail(u, "prompt_tokens_details", "cached_tokens")
	r.OutputTokensDetails.ReasoningTokens = clientapi.UsageDetail(u, "completion_tokens_details", "reasoning_tokens")
	return r
}

// Output items and their content parts.
type (
	messageItem struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Status  string `json:"status"`
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	functionCallItem struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
	}
	outputTextPart struct {
		Type        string            `json:"type"`
		Text        string            `json:"text"`
		Annotations []json.RawMessage `json:"annotations"`
	}
	refusalPart struct {
		Type    string `json:"type"`
		Refusal string `json:"refusal"`
	}
	reasoningItem struct {
		Type    string        `json:"type"`
		ID      string        `json:"id"`
		Summary []summaryPart `json:"summary"`
		Status  string        `json:"status"`
	}
	summaryPart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
)

func outputText(s string) outputTextPart {
	return outputTextPart{Type: "output_text", Text: s, Annotations: []json.RawMessage{}}
}

// responseError is a failed Response's error.
type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

// responseObject is OpenAI's Response.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Temperature        float64            `json:"temperature"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopP               float64            `json:"top_p"`
	Usage              *responsesUsage    `json:"usage"`
	Metadata           json.RawMessage    `json:"metadata"`
	// Store is whether the turn is kept, when the codec is told (store).
	Store *bool `json:"store,omitempty"`
}

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
		b, err := json.Marshal(struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description *string         `json:"description,omitempty"`
			Parameters  json.RawMessage `json:"parameters,omitempty"`
			Strict      *bool           `json:"strict,omitempty"`
		}{"function", fn.Name, fn.Description, fn.Parameters, fn.Strict})
		if err == nil {
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
		if b, err := json.Marshal(struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}{"function", choice.Function.Name}); err == nil {
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
func (c *responsesCodec) object(s requestSettings, status string, output []any, usage *llm.Usage) responseObject {
	r := responseObject{
		ID: c.responseID(), Object: "response", CreatedAt: c.createdAt, Status: status,
		MaxOutputTokens: s.maxOutput, Model: c.model, Output: output, ParallelToolCalls: s.parallel,
		Temperature: s.temperature, ToolChoice: s.toolChoice, Tools: s.tools, TopP: s.topP,
		Metadata: c.metadata,
	}
	if r.Output == nil {
		r.Output = []any{}
	}
	if c.store != nil {
		v := c.store(status != "in_progress")
		r.Store = &v
	}
	if len(r.Metadata) == 0 || string(r.Metadata) == "null" {
		r.Metadata = json.RawMessage(`{}`)
	}
	if c.instructions != "" {
		r.Instructions = &c.instructions
	}
	if c.previousID != "" {
		r.PreviousResponseID = &c.previousID
	}
	if usage != nil {
		r.Usage = toResponsesUsage(*usage)
	}
	return r
}

// ending is how a finished or cut answer reads: its status and
// incomplete_details.
func responsesEnding(end error, finish string) (string, *incompleteDetails) {
	switch {
	case errors.Is(end, router.ErrIncomplete):
		return "incomplete", &incompleteDetails{Reason: "interrupted"}
	case finish == "length":
		return "incomplete", &incompleteDetails{Reason: "max_output_tokens"}
	case finish == "content_filter":
		return "incomplete", &incompleteDetails{Reason: "content_filter"}
	}
	return "completed", nil
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
	asm, usage, res, ok, end := clientapi.Assemble(ans)
	if !ok {
		return res
	}
	a, err := clientapi.ReadAssembled(asm, usage)
	if err != nil {
		return gateway.Result{Usage: usage, Err: err}
	}
	ch := a.Choices[0]
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	status, details := responsesEnding(end, finish)
	var output []any
	if m := ch.Message; m.ReasoningContent != nil && *m.ReasoningContent != "" {
		output = append(output, &reasoningItem{Type: "reasoning", ID: c.reasoningID(0),
			Summary: []summaryPart{{Type: "summary_text", Text: *m.ReasoningContent}}, Status: "completed"})
	}
	text, refusal := "", ""
	if m := ch.Message; m.Content != nil {
		text = *m.Content
	}
	if r, ok := clientapi.Refusal(&ch.Message); ok {
		refusal = r
	}
	if text != "" || refusal != "" {
		msg := messageItem{Type: "message", ID: c.messageID(len(output)), Status: "completed", Role: "assistant", Content: []any{}}
		if text != "" {
			msg.Content = append(msg.Content, outputText(text))
		}
		if refusal != "" {
			msg.Content = append(msg.Content, refusalPart{Type: "refusal", Refusal: refusal})
		}
		output = append(output, &msg)
	}
	var calls []llm.ToolCall
	for _, tc := range ch.Message.ToolCalls {
		i := len(output)
		id := tc.ID
		if id == "" {
			id = c.callID(i)
		}
		output = append(output, &functionCallItem{Type: "function_call", ID: c.functionCallID(i), CallID: id,
			Name: tc.Function.Name, Arguments: tc.Function.Arguments, Status: "completed"})
		calls = append(calls, llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall(tc.Function)})
	}
	if status != "completed" && len(output) > 0 {
		switch it := output[len(output)-1].(type) {
		case *messageItem:
			it.Status = "incomplete"
		case *functionCallItem:
			it.Status = "incomplete"
		case *reasoningItem:
			it.Status = "incomplete"
		}
	}
	r := c.object(c.settings(), status, output, &usage)
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
	c   *responsesCodec
	out gateway.Emitter
	seq int
	err error // the Emitter's error: the client is gone

	output []any // the closed items

	open  string // the open item's type ("message", "function_call"), "" for none
	index int    // the open item's output_index
	msg   *messageItem
	part  string // the open part's type ("output_text", "refusal"), "" for none
	buf   strings.Builder
	fc    *functionCallItem
	tool  int // the chat tool-call index of the open function_call
	args  strings.Builder
	rs    *reasoningItem
	rbuf  strings.Builder

	// The turn.
	turnText, turnRefusal strings.Builder
	calls                 []llm.ToolCall
}

func (w *itemWriter) failed() error { return w.err }

func (w *itemWriter) text(s string) { w.content("output_text", s) }

func (w *itemWriter) refusal(s string) { w.content("refusal", s) }

// send emits one event: its data is {"type":name,"sequence_number":n} and
// v's fields.
func (w *itemWriter) send(name string, v any) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	head, _ := json.Marshal(struct {
		Type           string `json:"type"`
		SequenceNumber int    `json:"sequence_number"`
	}{name, w.seq})
	w.seq++
	if len(b) > 2 {
		head = append(head[:len(head)-1], ',')
		head = append(head, b[1:]...)
	}
	w.err = w.out.Event(idempotency.Event{Name: name, Data: head}, true)
}

type itemEvent struct {
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"`
}

type partEvent struct {
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Part         any    `json:"part"`
}

type textDeltaEvent struct {
	ItemID       string            `json:"item_id"`
	OutputIndex  int               `json:"output_index"`
	ContentIndex int               `json:"content_index"`
	Delta        string            `json:"delta"`
	Logprobs     []json.RawMessage `json:"logprobs"`
}

type textDoneEvent struct {
	ItemID       string            `json:"item_id"`
	OutputIndex  int               `json:"output_index"`
	ContentIndex int               `json:"content_index"`
	Text         string            `json:"text"`
	Logprobs     []json.RawMessage `json:"logprobs"`
}

type refusalDeltaEvent struct {
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
}

type refusalDoneEvent struct {
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Refusal      string `json:"refusal"`
}

type argumentsDeltaEvent struct {
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

type argumentsDoneEvent struct {
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Arguments   string `json:"arguments"`
}

type responseEvent struct {
	Response responseObject `json:"response"`
}

func (w *itemWriter) closePart() {
	if w.part == "" {
		return
	}
	ci := len(w.msg.Content)
	s := w.buf.String()
	var part any
	if w.part == "refusal" {
		w.send("response.refusal.done", refusalDoneEvent{w.msg.ID, w.index, ci, s})
		part = refusalPart{Type: "refusal", Refusal: s}
	} else {
		w.send("response.output_text.done", textDoneEvent{w.msg.ID, w.index, ci, s, []json.RawMessage{}})
		part = outputText(s)
	}
	w.send("response.content_part.done", partEvent{w.msg.ID, w.index, ci, part})
	w.msg.Content = append(w.msg.Content, part)
	w.part = ""
	w.buf.Reset()
}

type summaryPartEvent struct {
	ItemID       string      `json:"item_id"`
	OutputIndex  int         `json:"output_index"`
	SummaryIndex int         `json:"summary_index"`
	Part         summaryPart `json:"part"`
}

type summaryDeltaEvent struct {
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	SummaryIndex int    `json:"summary_index"`
	Delta        string `json:"delta"`
}

type summaryDoneEvent struct {
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	SummaryIndex int    `json:"summary_index"`
	Text         string `json:"text"`
}

// reasoning takes a reasoning model's thinking: it opens a reasoning item
// with one summary part as needed.
func (w *itemWriter) reasoning(s string) {
	if s == "" {
		return
	}
	if w.open != "reasoning" {
		w.closeItem("completed")
		w.open, w.index = "reasoning", len(w.output)
		w.rs = &reasoningItem{Type: "reasoning", ID: w.c.reasoningID(w.index), Summary: []summaryPart{}, Status: "in_progress"}
		w.send("response.output_item.added", itemEvent{w.index, *w.rs})
		w.send("response.reasoning_summary_part.added", summaryPartEvent{w.rs.ID, w.index, 0, summaryPart{Type: "summary_text"}})
	}
	w.rbuf.WriteString(s)
	w.send("response.reasoning_summary_text.delta", summaryDeltaEvent{w.rs.ID, w.index, 0, s})
}

// closeItem ends the open item with status.
func (w *itemWriter) closeItem(status string) {
	switch w.open {
	case "reasoning":
		text := w.rbuf.String()
		w.send("response.reasoning_summary_text.done", summaryDoneEvent{w.rs.ID, w.index, 0, text})
		part := summaryPart{Type: "summary_text", Text: text}
		w.send("response.reasoning_summary_part.done", summaryPartEvent{w.rs.ID, w.index, 0, part})
		w.rs.Summary, w.rs.Status = []summaryPart{part}, status
		w.send("response.output_item.done", itemEvent{w.index, w.rs})
		w.output = append(w.output, w.rs)
		w.rs = nil
		w.rbuf.Reset()
	case "message":
		w.closePart()
		w.msg.Status = status
		w.send("response.output_item.done", itemEvent{w.index, w.msg})
		w.output = append(w.output, w.msg)
		w.msg = nil
	case "function_call":
		w.fc.Arguments, w.fc.Status = w.args.String(), status
		w.send("response.function_call_arguments.done", argumentsDoneEvent{w.fc.ID, w.index, w.fc.Arguments})
		w.send("response.output_item.done", itemEvent{w.index, w.fc})
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
	if w.open != "message" {
		w.closeItem("completed")
		w.open, w.index = "message", len(w.output)
		w.msg = &messageItem{Type: "message", ID: w.c.messageID(w.index), Status: "in_progress", Role: "assistant", Content: []any{}}
		w.send("response.output_item.added", itemEvent{w.index, messageItem{Type: "message", ID: w.msg.ID,
			Status: "in_progress", Role: "assistant", Content: []any{}}})
	}
	if w.part != kind {
		w.closePart()
		w.part = kind
		var part any = outputText("")
		if kind == "refusal" {
			part = refusalPart{Type: "refusal"}
		}
		w.send("response.content_part.added", partEvent{w.msg.ID, w.index, len(w.msg.Content), part})
	}
	w.buf.WriteString(s)
	ci := len(w.msg.Content)
	if kind == "refusal" {
		w.turnRefusal.WriteString(s)
		w.send("response.refusal.delta", refusalDeltaEvent{w.msg.ID, w.index, ci, s})
	} else {
		w.turnText.WriteString(s)
		w.send("response.output_text.delta", textDeltaEvent{w.msg.ID, w.index, ci, s, []json.RawMessage{}})
	}
}

// toolCall takes one tool-call delta: a new index opens a function_call item
// (with the id and name of that delta), arguments go out as
// function_call_arguments.delta. As in blockWriter.toolCall, a name fragment
// after the first delta is dropped, and a call resumed after another began
// opens a new item.
func (w *itemWriter) toolCall(index int, id, name, args string) {
	if w.open != "function_call" || w.tool != index {
		w.closeItem("completed")
		w.open, w.index, w.tool = "function_call", len(w.output), index
		if id == "" {
			id = w.c.callID(w.index)
		}
		w.fc = &functionCallItem{Type: "function_call", ID: w.c.functionCallID(w.index), CallID: id, Name: name, Status: "in_progress"}
		w.send("response.output_item.added", itemEvent{w.index, *w.fc})
	}
	if args == "" {
		return
	}
	w.args.WriteString(args)
	w.send("response.function_call_arguments.delta", argumentsDeltaEvent{w.fc.ID, w.index, args})
}

// stream relays the answer as the Responses event sequence (see
// responsesCodec).
func (c *responsesCodec) stream(ans *router.Answer, out gateway.Emitter) gateway.Result {
	out.Start(http.StatusOK, clientapi.AnswerHead(c.requestID, c.req, ans, "text/event-stream"), true)
	s := c.settings()
	w := &itemWriter{c: c, out: out}
	w.send("response.created", responseEvent{c.object(s, "in_progress", nil, nil)})
	w.send("response.in_progress", responseEvent{c.object(s, "in_progress", nil, nil)})
	finish, usage, res, gone, end := clientapi.RelayDeltas(ans, clientapi.DeltaSink{Text: w.text, Refusal: w.refusal, Reasoning: w.reasoning, ToolCall: w.toolCall, Failed: w.failed})
	if gone {
		return res
	}
	switch {
	case end == io.EOF, errors.Is(end, router.ErrIncomplete):
		status, details := responsesEnding(end, finish)
		w.closeItem(status)
		out.Price(usage)
		r := c.object(s, status, w.output, &usage)
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
		w.send("response."+status, responseEvent{r})
		if end == io.EOF {
			return gateway.Result{Usage: usage, Answered: true}
		}
	default:
		w.closeItem("incomplete")
		out.Price(usage)
		e := clientapi.CutShort(ans.Provider, end)
		r := c.object(s, "failed", w.output, &usage)
		r.Error = &responseError{Code: string(e.Code), Message: e.Message}
		w.send("response.failed", responseEvent{r})
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
	b, _ := json.Marshal(struct {
		Type           string  `json:"type"`
		Code           string  `json:"code"`
		Message        string  `json:"message"`
		Param          *string `json:"param"`
		SequenceNumber int     `json:"sequence_number"`
	}{"error", string(code), message, nil, 0})
	return idempotency.Event{Name: "error", Data: b}
}
