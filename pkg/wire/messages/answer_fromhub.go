package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// The hub's answer as the Anthropic Messages API answers: one Message
// (NewMessage), or Anthropic's named event sequence (StreamWriter).
//
// Stop reasons, from the chat finish_reason of the answer's first choice
// (StopReason):
//
//	stop, "" (none given)  -> end_turn (tool_use when the answer has a tool call)
//	tool_calls             -> tool_use
//	length                 -> max_tokens
//	content_filter         -> refusal (also any answer carrying refusal text)
//	(stream just stopped)  -> null: the message did not reach a stop
//
//	stop, with the stop sequence the upstream says ended it (stop_reason,
//	as vLLM and the Decoder report it) -> stop_sequence, and
//	stop_sequence that string
//
// An upstream that does not say which stop sequence matched (OpenAI) has a
// stop on one read as end_turn, stop_sequence null.
//
// A reasoning model's thinking (chat reasoning_content or reasoning)
// becomes a thinking block before the text, with an empty signature: no
// upstream but Anthropic signs thinking, and a client sends such a block
// back only to a route that drops it.
//
// A stream is message_start, one ping, then for each run of text (or
// refusal text) a text block and for each tool call a tool_use block
// (content_block_start, content_block_delta with text_delta or
// input_json_delta, content_block_stop), and at the end message_delta (stop
// reason and usage with cost) and message_stop. A provider failure after
// output closes the open block and ends with an "error" event
// (ErrorEvent) and no message_delta nor message_stop, as Anthropic's own
// API does on a failure mid-stream: the Python, TypeScript and Go SDKs
// raise it. A provider stream that just stopped closes the open block and
// ends with message_delta whose stop_reason is null (usage included) and no
// message_stop, as the Chat Completions stream ends without [DONE]: the
// SDKs end the stream quietly and their accumulated message has
// stop_reason null, which no finished message has.

// MessageID is the id of the message answering the request requestID:
// msg_ and the request id's hex part.
func MessageID(requestID string) string {
	return "msg_" + strings.TrimPrefix(requestID, "req_")
}

// toolUseID is the id of a tool call the upstream sent none for.
func toolUseID(requestID string, block int) string {
	return "toolu_" + strings.TrimPrefix(requestID, "req_") + "_" + strconv.Itoa(block)
}

// counts is a Messages usage whose counts point into it, so that one
// allocation holds both.
type counts struct {
	Usage
	n [4]int64
}

// set sets the counts; a cache count of 0 is left out.
func (c *counts) set(input, cacheCreation, cacheRead, output int) {
	c.n = [4]int64{int64(input), int64(cacheCreation), int64(cacheRead), int64(output)}
	c.InputTokens, c.OutputTokens = &c.n[0], &c.n[3]
	if cacheCreation != 0 {
		c.CacheCreationInputTokens = &c.n[1]
	}
	if cacheRead != 0 {
		c.CacheReadInputTokens = &c.n[2]
	}
}

// GatewayUsage is the usage object of a Message and of message_delta, plus
// the gateway's cost. cache_creation_input_tokens is the prompt's part
// written to the provider's cache (prompt_tokens_details.cache_write_tokens,
// as the Decoder and OpenRouter report it);
// cache_read_input_tokens the part read from it, which Anthropic counts
// apart from input_tokens (Chat Completions counts it in prompt_tokens, with
// the part in prompt_tokens_details.cached_tokens). server_tool_use and
// cache_creation report the server tool calls and the one-hour cache
// writes the answer was billed for, as Anthropic reports them.
type GatewayUsage struct {
	counts
	Cost      llm.USD `json:"cost"`
	Estimated bool    `json:"estimated,omitempty"`
}

// UsageOf is the hub's usage as a Message's, with the gateway's cost.
func UsageOf(u llm.Usage) *GatewayUsage {
	uncached, cached, written := u.PromptParts()
	cu := &GatewayUsage{Cost: llm.USD(u.Cost), Estimated: u.Estimated}
	cu.set(uncached, written, cached, u.CompletionTokens)
	if calls := u.ServerToolCalls; len(calls) > 0 {
		cu.ServerToolUse = make(map[string]*int64, len(calls))
		for tool, n := range calls {
			v := int64(n)
			cu.ServerToolUse[tool+"_requests"] = &v
		}
	}
	if oneHour := u.CacheWrite1h(); oneHour > 0 {
		fiveMin, hour := int64(written-oneHour), int64(oneHour)
		cu.CacheCreation = &CacheCreation{Ephemeral5mInputTokens: &fiveMin, Ephemeral1hInputTokens: &hour}
	}
	return cu
}

func textBlock(s string) ContentBlock {
	return ContentBlock{Type: BlockText, Text: &s}
}

func thinkingBlock(s string) ContentBlock {
	sig := ""
	return ContentBlock{Type: BlockThinking, Thinking: &s, Signature: &sig}
}

// gatewayMessage is a Message whose usage is the gateway's (a
// *GatewayUsage, or message_start's *counts). (Its Usage hides the
// Message's, and as the last field it stays in the same place.)
type gatewayMessage struct {
	Message
	Usage any `json:"usage"`
}

// toolInput is a tool call's arguments as the tool_use block's input, which
// must be a JSON object: arguments that are empty, cut short or not an object
// read as {}.
func toolInput(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(args)) != nil {
		return json.RawMessage(`{}`)
	}
	return b.Bytes()
}

// NewMessage is the Message body of an answer assembled into one choice,
// ch, for the request requestID; model is the model that answered. An
// answer that did not finish (its stream just stopped) has stop_reason
// null.
func NewMessage(requestID, model string, ch *chat.Choice, usage llm.Usage, finished bool) ([]byte, error) {
	msg := gatewayMessage{Message: Message{ID: MessageID(requestID), Type: TypeMessage,
		Role: RoleAssistant, Model: model, Content: []ContentBlock{}}, Usage: UsageOf(usage)}
	if m := ch.Message; m.ReasoningContent != nil && *m.ReasoningContent != "" {
		msg.Content = append(msg.Content, thinkingBlock(*m.ReasoningContent))
	}
	if m := ch.Message; m.Content != nil && *m.Content != "" {
		msg.Content = append(msg.Content, textBlock(*m.Content))
	}
	refused := false
	if r, ok := ch.Message.RefusalText(); ok && r != "" {
		refused = true
		msg.Content = append(msg.Content, textBlock(r))
	}
	for _, tc := range ch.Message.ToolCalls {
		id := tc.ID
		if id == "" {
			id = toolUseID(requestID, len(msg.Content))
		}
		msg.Content = append(msg.Content, ContentBlock{Type: BlockToolUse, ID: id, Name: tc.Function.Name,
			Input: toolInput(tc.Function.Arguments)})
	}
	if finished {
		finish := ""
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
		seq := ""
		if ch.StopReason != nil {
			seq = *ch.StopReason
		}
		sr := StopReason(finish, len(ch.Message.ToolCalls) > 0, refused, seq)
		msg.StopReason = &sr
		if sr == StopStopSequence {
			msg.StopSequence = &seq
		}
	}
	return json.Marshal(msg)
}

// Sender sends one event of a stream: its name, and v encoded as its data.
type Sender interface {
	Send(name string, v any)
}

// StreamWriter turns the hub's deltas into a Message stream's events, sent
// through a Sender. Its zero value is not usable; use Init.
type StreamWriter struct {
	send      Sender
	requestID string
	next      int    // the next block's index
	open      string // the open block's type, "" for none
	tool      int    // the chat tool-call index of the open tool_use block
	tools     bool   // a tool_use block was sent
	// refused: the answer carries refusal text (sent as text).
	refused bool
	// stopSeq is the stop sequence the upstream says ended the answer.
	stopSeq string
}

// Init makes w the writer of the answer to requestID through send. It is
// a method, not a constructor, so that a caller keeps the writer with its
// sender in one allocation.
func (w *StreamWriter) Init(send Sender, requestID string) {
	*w = StreamWriter{send: send, requestID: requestID}
}

// messageStart is message_start with the gateway's message.
type messageStart struct {
	MessageStart
	Message gatewayMessage `json:"message"`
}

// Start sends message_start and one ping. Its usage is the prompt's
// counts when the upstream reported them with its first output (prompt is
// then not the gateway's estimate), else 0; output_tokens 0. The counts of
// the end are message_delta's (End).
func (w *StreamWriter) Start(model string, prompt llm.Usage) {
	var s counts
	if !prompt.Estimated {
		au := UsageOf(prompt)
		s.set(int(au.n[0]), int(au.n[1]), int(au.n[2]), 0)
	} else {
		s.set(0, 0, 0, 0)
	}
	start := messageStart{Message: gatewayMessage{Message: Message{ID: MessageID(w.requestID), Type: TypeMessage,
		Role: RoleAssistant, Model: model, Content: []ContentBlock{}}, Usage: &s}}
	start.Type = EventMessageStart
	w.send.Send(EventMessageStart, start)
	w.send.Send(EventPing, Ping{Type: EventPing})
}

// Refusal takes refusal text, sent as text.
func (w *StreamWriter) Refusal(s string) {
	if s == "" {
		return
	}
	w.refused = true
	w.Text(s)
}

// CloseBlock sends content_block_stop for the open block, if any.
func (w *StreamWriter) CloseBlock() {
	if w.open == "" {
		return
	}
	w.send.Send(EventContentBlockStop, ContentBlockStop{Type: EventContentBlockStop, Index: w.next - 1})
	w.open = ""
}

func (w *StreamWriter) start(b ContentBlock) {
	w.CloseBlock()
	w.send.Send(EventContentBlockStart, ContentBlockStart{Type: EventContentBlockStart, Index: w.next, ContentBlock: b})
	w.open = b.Type
	w.next++
}

// Text takes content text: a text block, as text_delta events.
func (w *StreamWriter) Text(s string) {
	if s != "" {
		w.blockDelta(BlockText, Delta{Type: DeltaText, Text: &s})
	}
}

// Reasoning takes a reasoning model's thinking: a thinking block, as
// thinking_delta events.
func (w *StreamWriter) Reasoning(s string) {
	if s != "" {
		w.blockDelta(BlockThinking, Delta{Type: DeltaThinking, Thinking: &s})
	}
}

// blockDelta sends d in a block of type typ (BlockText or BlockThinking),
// starting an empty one unless such a block is open.
func (w *StreamWriter) blockDelta(typ string, d Delta) {
	if w.open != typ {
		b := textBlock("")
		if typ == BlockThinking {
			b = thinkingBlock("")
		}
		w.start(b)
	}
	w.delta(d)
}

// delta sends a content_block_delta of the open block.
func (w *StreamWriter) delta(d Delta) {
	w.send.Send(EventContentBlockDelta, ContentBlockDelta{Type: EventContentBlockDelta, Index: w.next - 1, Delta: d})
}

// StopSequence takes the stop sequence that ended the answer.
func (w *StreamWriter) StopSequence(s string) { w.stopSeq = s }

// ToolCall takes one tool-call delta: a new index opens a tool_use block
// (with the id and name of that delta), arguments go out as input_json_delta.
// Upstreams send a call's id and name whole in its first delta, and one call
// after another; a name fragment after the first delta is dropped, and a
// call resumed after another began opens a new block.
func (w *StreamWriter) ToolCall(index int, id, name, args string) {
	if w.open != BlockToolUse || w.tool != index {
		if id == "" {
			id = toolUseID(w.requestID, w.next)
		}
		w.start(ContentBlock{Type: BlockToolUse, ID: id, Name: name, Input: json.RawMessage(`{}`)})
		w.tool, w.tools = index, true
	}
	if args == "" {
		return
	}
	w.delta(Delta{Type: DeltaInputJSON, PartialJSON: &args})
}

// gatewayDelta is message_delta with the gateway's usage.
type gatewayDelta struct {
	MessageDelta
	Usage *GatewayUsage `json:"usage"`
}

// End sends message_delta with the usage and, when the answer finished
// (with finish, the hub's finish_reason), its stop reason and then
// message_stop; an answer that did not finish has stop_reason null and no
// message_stop.
func (w *StreamWriter) End(finish string, usage llm.Usage, finished bool) {
	var md gatewayDelta
	md.Type, md.Usage = EventMessageDelta, UsageOf(usage)
	if finished {
		sr := StopReason(finish, w.tools, w.refused, w.stopSeq)
		md.Delta.StopReason = &sr
		if sr == StopStopSequence {
			md.Delta.StopSequence = &w.stopSeq
		}
	}
	w.send.Send(EventMessageDelta, md)
	if finished {
		w.send.Send(EventMessageStop, MessageStop{Type: EventMessageStop})
	}
}

// StoppedDelta is the message_delta event's data that ends a stream
// passed through which stopped: no stop reason, the usage so far.
func StoppedDelta(u llm.Usage) []byte {
	var md gatewayDelta
	md.Type, md.Usage = EventMessageDelta, UsageOf(u)
	b, _ := json.Marshal(md)
	return b
}

// NewError is the error envelope of e with Anthropic's error type typ, the
// gateway's code in error.code and the request field at fault in
// error.param.
func NewError(e *llm.Error, typ string) Error {
	code := string(e.Code)
	o := ErrorBody{Type: typ, Message: e.Message, Code: &code}
	if e.Param != "" {
		p := e.Param
		o.Param = &p
	}
	return Error{Type: TypeError, Error: o}
}

// ErrorEvent is the data of the error event of a Messages stream that
// failed after output started: e, as the failure end reads to the client.
// A timeout is timeout_error, an upstream overloaded (529, or 503) is
// overloaded_error, any other api_error.
func ErrorEvent(e *llm.Error, end error) []byte {
	typ := "api_error"
	var pe *llm.ProviderError
	switch {
	case e.Code == llm.CodeRequestTimeout:
		typ = "timeout_error"
	case errors.As(end, &pe) && (pe.Status == 529 || pe.Status == http.StatusServiceUnavailable):
		typ = "overloaded_error"
	}
	b, _ := json.Marshal(NewError(e, typ))
	return b
}
