package providertest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// AnthropicPath is the messages path a server made by NewAnthropic serves;
// the other is CountTokensPath.
const AnthropicPath = messages.PathMessages

// statusOverloaded is the status of Anthropic's overloaded_error.
const statusOverloaded = 529

// anthropicMidStreamError is the event a CutError sends in Anthropic mode.
var anthropicMidStreamError = messages.Error{Type: messages.TypeError,
	Error: messages.ErrorBody{Type: messages.ErrorType(statusOverloaded), Message: "scripted mid-stream error"}}

// NewAnthropic starts a fake upstream that speaks the Anthropic Messages API
// instead: POST /v1/messages, answered with Messages' event sequence
// (message_start, ping, content_block_start, content_block_delta with
// text_delta or input_json_delta, content_block_stop, message_delta,
// message_stop) or, when the request does not ask for "stream": true, a
// Message object; errors in Anthropic's envelope
// {"type":"error","error":{"type":...,"message":...}}. It also answers POST
// /v1/messages/count_tokens (ScriptCountTokens). URL is the API root.
//
// The same Response scripts it, with these readings:
//
//   - the id of call n is "msg_<n>", a tool call's default id "toolu_<n>";
//   - FinishReason is the stop_reason (default "end_turn", "tool_use" for a
//     ToolCall, "refusal" for a Refusal);
//   - Refusal is sent as a text block followed by stop_reason "refusal", as
//     Claude's refusals are;
//   - Usage sets input_tokens (on message_start) and output_tokens (on
//     message_delta); NoUsage leaves both usage objects out;
//   - NoRoleChunk leaves out message_start and ping;
//   - NoDone leaves out message_stop;
//   - CutError sends an "error" event with an overloaded_error;
//   - a non-200 Status with no Body gets the envelope, whose type is
//     Anthropic's for the status (529: overloaded_error).
func NewAnthropic(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, messagesProtocol)
}

// anthropicAnswer is an answer in Messages' terms.
type anthropicAnswer struct {
	answer
	stopReason string
	toolID     string
}

func newAnthropicAnswer(a answer, resp Response) anthropicAnswer {
	aa := anthropicAnswer{answer: a, stopReason: resp.FinishReason}
	aa.id = "msg_" + strings.TrimPrefix(a.id, "chatcmpl-")
	switch {
	case a.toolCall != nil:
		aa.toolID = a.toolCall.ID
		if resp.ToolCall.ID == "" {
			aa.toolID = "toolu_" + strings.TrimPrefix(a.id, "chatcmpl-")
		}
		if aa.stopReason == "" {
			aa.stopReason = messages.StopToolUse
		}
	case resp.Refusal != "":
		if aa.stopReason == "" {
			aa.stopReason = messages.StopRefusal
		}
	}
	if aa.stopReason == "" {
		aa.stopReason = messages.StopEndTurn
	}
	return aa
}

func (s *Server) respondAnthropic(ctx context.Context, w http.ResponseWriter, a answer, resp Response) {
	aa := newAnthropicAnswer(a, resp)
	stream, _ := a.req.JSON["stream"].(bool)
	if s.bedrock {
		stream = strings.HasSuffix(a.req.Path, BedrockStreamSuffix)
	}
	if stream && !resp.NonStreaming {
		s.streamAnthropic(ctx, w, aa, resp)
	} else {
		s.completeAnthropic(ctx, w, aa, resp)
	}
}

// streamAnthropic sends a Messages event stream.
func (s *Server) streamAnthropic(ctx context.Context, w http.ResponseWriter, a anthropicAnswer, resp Response) {
	send, rc := startStream(w, resp)
	if s.bedrock {
		send, rc = startBedrockStream(w, resp)
	}
	if resp.NoRoleChunk {
		if rc.Flush() != nil {
			return
		}
	} else {
		msg := messages.Message{ID: a.id, Type: messages.TypeMessage, Role: messages.RoleAssistant, Model: a.model,
			Content: []messages.ContentBlock{}}
		if !resp.NoUsage {
			msg.Usage = tokens(a.usage.PromptTokens, 1)
		}
		if !send(messages.EventMessageStart, marshal(messages.MessageStart{Type: messages.EventMessageStart, Message: msg})) ||
			!send(messages.EventPing, marshal(messages.Ping{Type: messages.EventPing})) {
			return
		}
	}

	// The content deltas: text pieces, or a tool call's input in two halves.
	var deltas []messages.Delta
	empty := ""
	block := messages.ContentBlock{Type: messages.BlockText, Text: &empty}
	if a.toolCall != nil {
		block = messages.ContentBlock{Type: messages.BlockToolUse, ID: a.toolID, Name: a.toolCall.Name, Input: json.RawMessage("{}")}
	}
	for i := range a.pieces {
		d := messages.Delta{Type: messages.DeltaText, Text: &a.pieces[i]}
		if a.toolCall != nil {
			d = messages.Delta{Type: messages.DeltaInputJSON, PartialJSON: &a.pieces[i]}
		}
		deltas = append(deltas, d)
	}
	if !s.pace(ctx, w, resp, len(deltas), func(i int) bool {
		if i == 0 && !send(messages.EventContentBlockStart, marshal(messages.ContentBlockStart{
			Type: messages.EventContentBlockStart, ContentBlock: block})) {
			return false
		}
		return send(messages.EventContentBlockDelta, marshal(messages.ContentBlockDelta{
			Type: messages.EventContentBlockDelta, Delta: deltas[i]}))
	}, func() { send(messages.EventError, marshal(anthropicMidStreamError)) }) {
		return
	}
	if len(deltas) > 0 && !send(messages.EventContentBlockStop, marshal(messages.ContentBlockStop{Type: messages.EventContentBlockStop})) {
		return
	}
	md := messages.MessageDelta{Type: messages.EventMessageDelta, Delta: messages.StopDelta{StopReason: &a.stopReason}}
	if !resp.NoUsage {
		out := a.usage.CompletionTokens
		md.Usage = &messages.Usage{OutputTokens: &out}
	}
	if !send(messages.EventMessageDelta, marshal(md)) {
		return
	}
	if !resp.NoDone {
		send(messages.EventMessageStop, marshal(messages.MessageStop{Type: messages.EventMessageStop}))
	}
}

// tokens is a usage of input and output tokens.
func tokens(input, output int64) *messages.Usage {
	return &messages.Usage{InputTokens: &input, OutputTokens: &output}
}

// completeAnthropic sends a Message object.
func (s *Server) completeAnthropic(ctx context.Context, w http.ResponseWriter, a anthropicAnswer, resp Response) {
	if !s.generate(ctx, resp, len(a.pieces)) {
		return
	}
	var block messages.ContentBlock
	if a.toolCall != nil {
		input := json.RawMessage(a.toolCall.Arguments)
		if !json.Valid(input) {
			input = json.RawMessage("{}")
		}
		block = messages.ContentBlock{Type: messages.BlockToolUse, ID: a.toolID, Name: a.toolCall.Name, Input: input}
	} else {
		text := strings.Join(a.pieces, "")
		block = messages.ContentBlock{Type: messages.BlockText, Text: &text}
	}
	msg := messages.Message{ID: a.id, Type: messages.TypeMessage, Role: messages.RoleAssistant, Model: a.model,
		Content: []messages.ContentBlock{block}, StopReason: &a.stopReason}
	if !resp.NoUsage {
		msg.Usage = tokens(a.usage.PromptTokens, a.usage.CompletionTokens)
	}
	s.writeWhole(ctx, w, marshal(msg), resp)
}
