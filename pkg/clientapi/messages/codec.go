package messages

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
	messageswire "github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// messagesCodec encodes answers as the Anthropic Messages API: one Message
// body, or Anthropic's named event sequence.
//
// Stop reasons, from the chat finish_reason of the answer's first choice:
//
//	stop, "" (none given)  -> end_turn (tool_use when the answer has a tool call)
//	tool_calls             -> tool_use
//	length                 -> max_tokens
//	content_filter         -> refusal (also any answer carrying refusal text)
//	(stream just stopped)  -> null: the message did not reach a stop
//
//	stop, with the stop sequence the upstream says ended it (stop_reason,
//	as vLLM and the anthropic adapter report it) -> stop_sequence, and
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
// output closes the open block and ends with an "error" event and no
// message_delta nor message_stop, as Anthropic's own API does on a failure
// mid-stream: the Python, TypeScript and Go SDKs raise it. A provider stream
// that just stopped closes the open block and ends with message_delta whose
// stop_reason is null (usage included) and no message_stop, as the Chat
// Completions stream ends without [DONE]: the SDKs end the stream quietly and
// their accumulated message has stop_reason null, which no finished message
// has.
type messagesCodec struct {
	requestID string
	req       *llm.ChatRequest
	// model is the model id the client sent, echoed in the message.
	model string
	// keyed: the answer is recorded. A Messages stream always carries its
	// usage (in message_delta), so unlike Chat Completions nothing depends
	// on it yet.
	keyed bool
}

var _ gateway.Codec = (*messagesCodec)(nil)

// messageID is the message's id, msg_ and the request id's hex part.
func (c *messagesCodec) messageID() string {
	return "msg_" + strings.TrimPrefix(c.requestID, "req_")
}

// toolUseID is the id of a tool call the upstream sent none for.
func (c *messagesCodec) toolUseID(block int) string {
	return "toolu_" + strings.TrimPrefix(c.requestID, "req_") + "_" + strconv.Itoa(block)
}

func (c *messagesCodec) Answer(ans *router.Answer, out gateway.Emitter) gateway.Result {
	c.model = ans.Model() // the provider's name for what answered (docs/api.md#answers)
	if ans.Proto == llm.ProtoMessages {
		if c.req.Stream {
			return c.passStream(ans, out)
		}
		return c.passMessage(ans, out)
	}
	if c.req.Stream {
		return c.stream(ans, out)
	}
	return c.message(ans, out)
}

// counts is a Messages usage whose counts point into it, so that one
// allocation holds both.
type counts struct {
	messageswire.Usage
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

// clientUsage is the usage object of a Message and of message_delta, plus
// the gateway's cost. cache_creation_input_tokens is the prompt's part
// written to the provider's cache (prompt_tokens_details.cache_write_tokens,
// as the anthropic adapter and OpenRouter report it);
// cache_read_input_tokens the part read from it, which Anthropic counts
// apart from input_tokens (Chat Completions counts it in prompt_tokens, with
// the part in prompt_tokens_details.cached_tokens). server_tool_use and
// cache_creation report the server tool calls and the one-hour cache
// writes the answer was billed for, as Anthropic reports them.
type clientUsage struct {
	counts
	Cost      llm.USD `json:"cost"`
	Estimated bool    `json:"estimated,omitempty"`
}

func toAnthropicUsage(u llm.Usage) *clientUsage {
	uncached, cached, written := u.PromptParts()
	cu := &clientUsage{Cost: llm.USD(u.Cost), Estimated: u.Estimated}
	cu.set(uncached, written, cached, u.CompletionTokens)
	if calls := u.ToolCalls(); len(calls) > 0 {
		cu.ServerToolUse = make(map[string]*int64, len(calls))
		for tool, n := range calls {
			v := int64(n)
			cu.ServerToolUse[tool+"_requests"] = &v
		}
	}
	if oneHour := u.CacheWrite1h(); oneHour > 0 {
		fiveMin, hour := int64(written-oneHour), int64(oneHour)
		cu.CacheCreation = &messageswire.CacheCreation{Ephemeral5mInputTokens: &fiveMin, Ephemeral1hInputTokens: &hour}
	}
	return cu
}

func textBlock(s string) messageswire.ContentBlock {
	return messageswire.ContentBlock{Type: messageswire.BlockText, Text: &s}
}

func thinkingBlock(s string) messageswire.ContentBlock {
	sig := ""
	return messageswire.ContentBlock{Type: messageswire.BlockThinking, Thinking: &s, Signature: &sig}
}

// clientMessage is a Message whose usage is the gateway's (a *clientUsage,
// or message_start's *counts). (Its Usage hides the Message's, and as the
// last field it stays in the same place.)
type clientMessage struct {
	messageswire.Message
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

// message assembles the provider's stream into one Message. The ending rules
// are chatCodec.completion's; an answer whose stream just stopped has
// stop_reason null.
func (c *messagesCodec) message(ans *router.Answer, out gateway.Emitter) gateway.Result {
	ch, usage, res, ok, end := clientapi.AssembleChoice(ans)
	if !ok {
		return res
	}
	msg := clientMessage{Message: messageswire.Message{ID: c.messageID(), Type: messageswire.TypeMessage,
		Role: messageswire.RoleAssistant, Model: c.model, Content: []messageswire.ContentBlock{}}, Usage: toAnthropicUsage(usage)}
	if m := ch.Message; m.ReasoningContent != nil && *m.ReasoningContent != "" {
		msg.Content = append(msg.Content, thinkingBlock(*m.ReasoningContent))
	}
	if m := ch.Message; m.Content != nil && *m.Content != "" {
		msg.Content = append(msg.Content, textBlock(*m.Content))
	}
	refused := false
	if r, ok := clientapi.Refusal(&ch.Message); ok && r != "" {
		refused = true
		msg.Content = append(msg.Content, textBlock(r))
	}
	for _, tc := range ch.Message.ToolCalls {
		id := tc.ID
		if id == "" {
			id = c.toolUseID(len(msg.Content))
		}
		msg.Content = append(msg.Content, messageswire.ContentBlock{Type: messageswire.BlockToolUse, ID: id, Name: tc.Function.Name,
			Input: toolInput(tc.Function.Arguments)})
	}
	if end == io.EOF {
		finish := ""
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
		seq := ""
		if ch.StopReason != nil {
			seq = *ch.StopReason
		}
		sr := messageswire.StopReason(finish, len(ch.Message.ToolCalls) > 0, refused, seq)
		msg.StopReason = &sr
		if sr == messageswire.StopStopSequence {
			msg.StopSequence = &seq
		}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return gateway.Result{Usage: usage, Err: err}
	}
	return clientapi.WriteWhole(out, clientapi.AnswerHead(c.requestID, c.req, ans, "application/json"), usage, body, end, nil)
}

// blockWriter turns chat deltas into content block events.
type blockWriter struct {
	clientapi.EventSender
	c     *messagesCodec
	next  int    // the next block's index
	open  string // the open block's type, "" for none
	tool  int    // the chat tool-call index of the open tool_use block
	tools bool   // a tool_use block was sent
	// refused: the answer carries refusal text (sent as text).
	refused bool
	// stopSeq is the stop sequence the upstream says ended the answer.
	stopSeq string
}

func (w *blockWriter) Refusal(s string) {
	if s == "" {
		return
	}
	w.refused = true
	w.Text(s)
}

func (w *blockWriter) close() {
	if w.open == "" {
		return
	}
	w.Send(messageswire.EventContentBlockStop, messageswire.ContentBlockStop{Type: messageswire.EventContentBlockStop, Index: w.next - 1})
	w.open = ""
}

func (w *blockWriter) start(b messageswire.ContentBlock) {
	w.close()
	w.Send(messageswire.EventContentBlockStart, messageswire.ContentBlockStart{Type: messageswire.EventContentBlockStart, Index: w.next, ContentBlock: b})
	w.open = b.Type
	w.next++
}

func (w *blockWriter) Text(s string) {
	if s == "" {
		return
	}
	if w.open != messageswire.BlockText {
		w.start(textBlock(""))
	}
	w.delta(messageswire.Delta{Type: messageswire.DeltaText, Text: &s})
}

// thinking takes a reasoning model's thinking: a thinking block, as
// thinking_delta events.
func (w *blockWriter) Reasoning(s string) {
	if s == "" {
		return
	}
	if w.open != messageswire.BlockThinking {
		w.start(thinkingBlock(""))
	}
	w.delta(messageswire.Delta{Type: messageswire.DeltaThinking, Thinking: &s})
}

// delta sends a content_block_delta of the open block.
func (w *blockWriter) delta(d messageswire.Delta) {
	w.Send(messageswire.EventContentBlockDelta, messageswire.ContentBlockDelta{Type: messageswire.EventContentBlockDelta, Index: w.next - 1, Delta: d})
}

func (w *blockWriter) StopSequence(s string) { w.stopSeq = s }

// toolCall takes one tool-call delta: a new index opens a tool_use block
// (with the id and name of that delta), arguments go out as input_json_delta.
// Upstreams send a call's id and name whole in its first delta, and one call
// after another; a name fragment after the first delta is dropped, and a
// call resumed after another began opens a new block.
func (w *blockWriter) ToolCall(index int, id, name, args string) {
	if w.open != messageswire.BlockToolUse || w.tool != index {
		if id == "" {
			id = w.c.toolUseID(w.next)
		}
		w.start(messageswire.ContentBlock{Type: messageswire.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(`{}`)})
		w.tool, w.tools = index, true
	}
	if args == "" {
		return
	}
	w.delta(messageswire.Delta{Type: messageswire.DeltaInputJSON, PartialJSON: &args})
}

// messageStart is message_start with the gateway's message.
type messageStart struct {
	messageswire.MessageStart
	Message clientMessage `json:"message"`
}

// startUsage is message_start's usage: the prompt's counts when the
// upstream reported them with its first output (the usage is then not the
// gateway's estimate), else 0; output_tokens 0. The counts of the end are
// message_delta's.
func startUsage(ans *router.Answer) *counts {
	var s counts
	if u := ans.Usage(); !u.Estimated {
		au := toAnthropicUsage(u)
		s.set(int(au.n[0]), int(au.n[1]), int(au.n[2]), 0)
	} else {
		s.set(0, 0, 0, 0)
	}
	return &s
}

// messageDelta is message_delta with the gateway's usage.
type messageDelta struct {
	messageswire.MessageDelta
	Usage *clientUsage `json:"usage"`
}

// stream relays the answer as Anthropic's event sequence (see messagesCodec).
func (c *messagesCodec) stream(ans *router.Answer, out gateway.Emitter) gateway.Result {
	out.Start(http.StatusOK, clientapi.AnswerHead(c.requestID, c.req, ans, "text/event-stream"), true)
	w := &blockWriter{c: c, EventSender: clientapi.EventSender{Out: out}}
	start := messageStart{Message: clientMessage{Message: messageswire.Message{ID: c.messageID(), Type: messageswire.TypeMessage,
		Role: messageswire.RoleAssistant, Model: c.model, Content: []messageswire.ContentBlock{}}, Usage: startUsage(ans)}}
	start.Type = messageswire.EventMessageStart
	w.Send(messageswire.EventMessageStart, start)
	w.Send(messageswire.EventPing, messageswire.Ping{Type: messageswire.EventPing})
	finish, usage, res, gone, end := clientapi.RelayDeltas(ans, w)
	if gone {
		return res
	}
	w.close()
	out.Price(usage)
	switch {
	case end == io.EOF, errors.Is(end, router.ErrIncomplete):
		var md messageDelta
		md.Type, md.Usage = messageswire.EventMessageDelta, toAnthropicUsage(usage)
		if end == io.EOF {
			sr := messageswire.StopReason(finish, w.tools, w.refused, w.stopSeq)
			md.Delta.StopReason = &sr
			if sr == messageswire.StopStopSequence {
				md.Delta.StopSequence = &w.stopSeq
			}
		}
		w.Send(messageswire.EventMessageDelta, md)
		if end == io.EOF {
			w.Send(messageswire.EventMessageStop, messageswire.MessageStop{Type: messageswire.EventMessageStop})
			return gateway.Result{Usage: usage, Answered: true}
		}
	default:
		ev := anthropicErrorEvent(clientapi.CutShort(ans.Provider, end), end)
		w.Send(ev.Name, json.RawMessage(ev.Data))
	}
	return gateway.Result{Usage: usage, Answered: true, Err: end}
}

// JoinBroken ends a joined stream that cannot go on with the same error
// event as a provider failure after the start.
func (c *messagesCodec) JoinBroken(reason string) idempotency.Event {
	b, _ := json.Marshal(clientapi.AnthropicEnvelope(&llm.Error{Code: llm.CodeReplayUnavailable, Message: reason}, "idempotency_error"))
	return idempotency.Event{Name: messageswire.EventError, Data: b}
}
