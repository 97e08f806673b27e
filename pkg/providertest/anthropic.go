package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// AnthropicPath is the messages path a server made by NewAnthropic serves;
// the other is CountTokensPath.
const AnthropicPath = "/v1/messages"

// anthropicMidStreamError is the event a CutError sends in Anthropic mode.
const anthropicMidStreamError = `{"type":"error","error":{"type":"overloaded_error","message":"scripted mid-stream error"}}`

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

// errorBody is the error envelope of the server's API.
func (s *Server) errorBody(msg string, status int) []byte {
	if !s.anthropic {
		return errorEnvelope(msg, errorType(status))
	}
	return marshal(anthropicError{Type: "error", Error: anthropicErrorBody{Type: anthropicErrorType(status), Message: msg}})
}

// requestError is the envelope for a request to a wrong path or method:
// OpenAI calls those invalid_request_error.
func (s *Server) requestError(msg string, status int) []byte {
	if !s.anthropic {
		return errorEnvelope(msg, "invalid_request_error")
	}
	return s.errorBody(msg, status)
}

// anthropicErrorType is Anthropic's error type for a status.
func anthropicErrorType(status int) string {
	switch status {
	case 529:
		return "overloaded_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// anthropicAnswer is an answer in Messages' terms.
type anthropicAnswer struct {
	answer
	stopReason string
	toolID     string
	texts      []string // the text pieces, one text_delta each
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
			aa.stopReason = "tool_use"
		}
	case resp.Refusal != "":
		aa.texts = []string{resp.Refusal}
		if aa.stopReason == "" {
			aa.stopReason = "refusal"
		}
	default:
		for _, d := range a.deltas {
			aa.texts = append(aa.texts, *d.Content)
		}
	}
	if aa.stopReason == "" {
		aa.stopReason = "end_turn"
	}
	return aa
}

func (s *Server) respondAnthropic(ctx context.Context, w http.ResponseWriter, a answer, resp Response) {
	aa := newAnthropicAnswer(a, resp)
	if stream, _ := a.req.JSON["stream"].(bool); stream && !resp.NonStreaming {
		s.streamAnthropic(ctx, w, aa, resp)
	} else {
		s.completeAnthropic(ctx, w, aa, resp)
	}
}

// streamAnthropic sends a Messages event stream.
func (s *Server) streamAnthropic(ctx context.Context, w http.ResponseWriter, a anthropicAnswer, resp Response) {
	send, rc := startStream(w, resp)
	sendEvent := func(v ordered) bool {
		return send(v[1].(string), marshal(v))
	}
	cutStream := func(how CutMode) {
		if how == CutError {
			send("error", []byte(anthropicMidStreamError))
			return
		}
		s.cutStream(ctx, w, how, func([]byte) bool { return true })
	}

	if resp.NoRoleChunk {
		if rc.Flush() != nil {
			return
		}
	} else {
		msg := obj(
			"id", a.id, "type", "message", "role", "assistant", "model", a.model,
			"content", []any{}, "stop_reason", nil, "stop_sequence", nil,
		)
		if !resp.NoUsage {
			msg = append(msg, "usage", obj("input_tokens", a.usage.PromptTokens, "output_tokens", 1))
		}
		if !sendEvent(obj("type", "message_start", "message", msg)) ||
			!sendEvent(obj("type", "ping")) {
			return
		}
	}

	// The content deltas: text pieces, or a tool call's input in two halves.
	var deltas []ordered
	block := obj("type", "text", "text", "")
	if a.toolCall != nil {
		block = obj("type", "tool_use", "id", a.toolID, "name", a.toolCall.Name, "input", obj())
		first, second := splitHalf(a.toolCall.Arguments)
		for _, part := range []string{first, second} {
			deltas = append(deltas, obj("type", "input_json_delta", "partial_json", part))
		}
	} else {
		for _, t := range a.texts {
			deltas = append(deltas, obj("type", "text_delta", "text", t))
		}
	}
	if !s.pace(ctx, resp, len(deltas), func(i int) bool {
		if i == 0 && !sendEvent(obj("type", "content_block_start", "index", 0, "content_block", block)) {
			return false
		}
		return sendEvent(obj("type", "content_block_delta", "index", 0, "delta", deltas[i]))
	}, cutStream) {
		return
	}
	if len(deltas) > 0 && !sendEvent(obj("type", "content_block_stop", "index", 0)) {
		return
	}
	md := obj("type", "message_delta", "delta", obj("stop_reason", a.stopReason, "stop_sequence", nil))
	if !resp.NoUsage {
		md = append(md, "usage", obj("output_tokens", a.usage.CompletionTokens))
	}
	if !sendEvent(md) {
		return
	}
	if !resp.NoDone {
		sendEvent(obj("type", "message_stop"))
	}
}

// completeAnthropic sends a Message object.
func (s *Server) completeAnthropic(ctx context.Context, w http.ResponseWriter, a anthropicAnswer, resp Response) {
	n := len(a.texts)
	if a.toolCall != nil {
		n = 2
	}
	wait := resp.FirstChunkDelay
	if n > 1 {
		wait += time.Duration(n-1) * resp.ChunkDelay
	}
	if !s.sleep(ctx, wait) {
		return
	}
	var content []any
	if a.toolCall != nil {
		input := json.RawMessage(a.toolCall.Arguments)
		if !json.Valid(input) {
			input = json.RawMessage("{}")
		}
		content = append(content, obj("type", "tool_use", "id", a.toolID, "name", a.toolCall.Name, "input", input))
	} else {
		content = append(content, obj("type", "text", "text", strings.Join(a.texts, "")))
	}
	msg := obj(
		"id", a.id, "type", "message", "role", "assistant", "model", a.model,
		"content", content, "stop_reason", a.stopReason, "stop_sequence", nil,
	)
	if !resp.NoUsage {
		msg = append(msg, "usage", obj("input_tokens", a.usage.PromptTokens, "output_tokens", a.usage.CompletionTokens))
	}
	s.writeWhole(ctx, w, marshal(msg), resp)
}

type anthropicError struct {
	Type  string             `json:"type"`
	Error anthropicErrorBody `json:"error"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ordered is a JSON object whose fields keep their order, as Anthropic's
// ("type" first): key, value, key, value, ...
type ordered []any

func obj(kv ...any) ordered { return ordered(kv) }

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(marshal(o[i].(string)))
		b.WriteByte(':')
		b.Write(marshal(o[i+1]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
