// Package messages is Anthropic's Messages wire shape: the request (its
// messages, content blocks, tools, tool_choice, thinking, metadata and
// output_config: request.go), the message object with its content blocks
// and usage, the stop reasons (and how they read
// as Chat Completions finish reasons, and back), every stream event (its
// type name as a constant, and its struct), the delta types, the error
// envelope, and the request headers a passed-through request carries on. Fields are in Anthropic's order ("type" first), so that
// what a writer encodes reads like Anthropic's own bytes; a field the API
// leaves out when it has nothing to say is omitempty, and one a reader must
// tell absent from zero is a pointer or json.RawMessage.
//
// It is also every translation of the protocol to and from the hub
// (pkg/llm), so that a new field or content block is added here alone:
//
//   - a client's request to the hub's Chat Completions form, checked as
//     Anthropic checks it (ToHub, request_tohub.go);
//   - the hub's request to a Messages request for an upstream (FromHub,
//     request_fromhub.go);
//   - an upstream's stream, or whole answer, to hub chunks (Decoder,
//     MessageEvents: decoder.go);
//   - the hub's answer to a Message or to its events, with the gateway's
//     usage and error events (NewMessage, StreamWriter, UsageOf,
//     ErrorEvent: answer_fromhub.go);
//   - a stream passed through: observed for what the gateway needs of it
//     (Observer, NativeEvents: observe.go), and assembled into its Message
//     (Assembler, assemble.go).
//
// The client API, the adapters, the fake upstreams and the simulated
// provider all write and read these types and call these translations;
// the package imports only the standard library, go-json-experiment/json
// (the request's types keep the members they do not model), pkg/llm, the
// JSON helpers beneath it and pkg/wire/chat.
package messages

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// The stream's event types, each event's "type" and its SSE event name.
const (
	EventMessageStart      = "message_start"
	EventContentBlockStart = "content_block_start"
	EventContentBlockDelta = "content_block_delta"
	EventContentBlockStop  = "content_block_stop"
	EventMessageDelta      = "message_delta"
	EventMessageStop       = "message_stop"
	EventPing              = "ping"
	EventError             = "error"
)

// The delta types of content_block_delta.
const (
	DeltaText      = "text_delta"
	DeltaInputJSON = "input_json_delta"
	DeltaThinking  = "thinking_delta"
	DeltaSignature = "signature_delta"
	DeltaCitations = "citations_delta"
)

// The content block types.
const (
	BlockText             = "text"
	BlockToolUse          = "tool_use"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
)

// The stop reasons.
const (
	StopEndTurn                    = "end_turn"
	StopMaxTokens                  = "max_tokens"
	StopStopSequence               = "stop_sequence"
	StopToolUse                    = "tool_use"
	StopPauseTurn                  = "pause_turn"
	StopRefusal                    = "refusal"
	StopModelContextWindowExceeded = "model_context_window_exceeded"
)

// TypeMessage is a message's "type"; TypeError an error envelope's.
const (
	TypeMessage = "message"
	TypeError   = "error"
)

// The request headers of the protocol, in their canonical form: the API
// version a request is written for, and the betas it opts into.
const (
	HeaderVersion = "Anthropic-Version"
	HeaderBeta    = "Anthropic-Beta"
)

// ForwardedHeaders are the request headers of a Messages client sent on
// with its request when it passes through to a Messages upstream.
var ForwardedHeaders = []string{HeaderVersion, HeaderBeta}

// RoleAssistant is an answer's role.
const RoleAssistant = "assistant"

// Message is a message object: a whole answer, or message_start's message
// (its content empty, its stop reason null). Usage is left out when nil, as
// by a compatible upstream that reports none.
type Message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []ContentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        *Usage         `json:"usage,omitempty"`
}

// ContentBlock is one content block: text (Text), thinking (Thinking and
// Signature), redacted_thinking (Data) or tool_use (ID, Name, Input). A
// field its type does not have is left out; a block of a type the readers
// do not know, with fields of its own, is read as json.RawMessage by those
// that keep it (the Assembler, NativeEvents).
type ContentBlock struct {
	Type      string          `json:"type"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      *string         `json:"data,omitempty"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// Usage is a message's usage, and message_delta's. The counts are
// pointers: message_delta may leave out all but output_tokens, and the
// cache counts are left out when nil.
type Usage struct {
	InputTokens              *int64 `json:"input_tokens,omitempty"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens,omitempty"`
	OutputTokens             *int64 `json:"output_tokens"`
	// CacheCreation splits the cache writes by the cache's lifetime.
	CacheCreation *CacheCreation `json:"cache_creation,omitempty"`
	// ServerToolUse counts the calls of server tools, by
	// "<tool>_requests" (web_search_requests, web_fetch_requests).
	ServerToolUse map[string]*int64 `json:"server_tool_use,omitempty"`
}

// CacheCreation is usage.cache_creation: the prompt tokens written to the
// five-minute and to the one-hour cache.
type CacheCreation struct {
	Ephemeral5mInputTokens *int64 `json:"ephemeral_5m_input_tokens,omitempty"`
	Ephemeral1hInputTokens *int64 `json:"ephemeral_1h_input_tokens,omitempty"`
}

// MessageStart is the message_start event.
type MessageStart struct {
	Type    string  `json:"type"`
	Message Message `json:"message"`
}

// ContentBlockStart is the content_block_start event.
type ContentBlockStart struct {
	Type         string       `json:"type"`
	Index        int          `json:"index"`
	ContentBlock ContentBlock `json:"content_block"`
}

// ContentBlockDelta is the content_block_delta event.
type ContentBlockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta Delta  `json:"delta"`
}

// Delta is a content_block_delta's delta: text_delta (Text),
// thinking_delta (Thinking), input_json_delta (PartialJSON) or
// signature_delta (Signature).
type Delta struct {
	Type        string  `json:"type"`
	Thinking    *string `json:"thinking,omitempty"`
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
	Signature   *string `json:"signature,omitempty"`
}

// ContentBlockStop is the content_block_stop event.
type ContentBlockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// MessageDelta is the message_delta event: the stop reason and the usage
// (cumulative). Usage is left out when nil, as by a compatible upstream
// that reports none.
type MessageDelta struct {
	Type  string    `json:"type"`
	Delta StopDelta `json:"delta"`
	Usage *Usage    `json:"usage,omitempty"`
}

// StopDelta is message_delta's delta; both are null when nil.
type StopDelta struct {
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// MessageStop is the message_stop event.
type MessageStop struct {
	Type string `json:"type"`
}

// Ping is the ping event.
type Ping struct {
	Type string `json:"type"`
}

// Error is the error envelope, and the error event of a stream.
type Error struct {
	Type  string    `json:"type"`
	Error ErrorBody `json:"error"`
	// RequestID is left out when nil, as in the events of a stream.
	RequestID *string `json:"request_id,omitempty"`
}

// ErrorBody is the envelope's error. Code and Param are the gateway's
// additions (its error code, and the request field at fault), left out
// when nil as Anthropic's own errors have neither.
type ErrorBody struct {
	Type    string  `json:"type"`
	Message string  `json:"message"`
	Code    *string `json:"code,omitempty"`
	Param   *string `json:"param,omitempty"`
}

// Event is any stream event as a reader decodes it: the fields of every
// event type that readers use, each set only by the events that have it.
// Its parts are the readers' views, not the writers' structs: strings where
// absent and empty read alike (no pointer to allocate for every delta),
// and only the members readers use (a message's content is not read).
type Event struct {
	Type         string          `json:"type"`
	Message      *EventMessage   `json:"message"`
	Index        int             `json:"index"`
	ContentBlock *EventBlock     `json:"content_block"`
	Delta        *EventDelta     `json:"delta"`
	Usage        *Usage          `json:"usage"`
	Error        *EventErrorBody `json:"error"`
}

// EventErrorBody is what readers use of an error event's error.
type EventErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// EventMessage is what readers use of message_start's message.
type EventMessage struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Usage *Usage `json:"usage"`
}

// EventBlock is what readers use of content_block_start's block.
type EventBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Thinking string `json:"thinking"`
	ID       string `json:"id"`
	Name     string `json:"name"`
}

// EventDelta is the delta of content_block_delta or of message_delta;
// StopSequence is nil when absent or null.
type EventDelta struct {
	Type         string  `json:"type"`
	Text         string  `json:"text"`
	Thinking     string  `json:"thinking"`
	PartialJSON  string  `json:"partial_json"`
	Signature    string  `json:"signature"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// RawEvent is any stream event with its parts kept as they are, for the
// readers that keep the fields they do not know.
type RawEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	Message      json.RawMessage `json:"message"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        json.RawMessage `json:"delta"`
	Usage        json.RawMessage `json:"usage"`
}

// TokenCount is the answer of POST /v1/messages/count_tokens; a reader
// finds InputTokens nil when it is missing.
type TokenCount struct {
	InputTokens *int64 `json:"input_tokens"`
}

// FinishReason is a stop_reason as the hub's (Chat Completions')
// finish_reason: end_turn, stop_sequence, pause_turn and any reason added
// later are stop.
func FinishReason(stopReason string) string {
	switch stopReason {
	case StopMaxTokens, StopModelContextWindowExceeded:
		return chat.FinishLength
	case StopToolUse:
		return chat.FinishToolCalls
	case StopRefusal:
		return chat.FinishContentFilter
	}
	return chat.FinishStop
}

// StopReason is a Chat Completions finish_reason as a stop_reason. toolUse
// and refused say whether the answer holds a tool call or a refusal; seq is
// the stop sequence the upstream says ended the answer ("" for none).
func StopReason(finish string, toolUse, refused bool, seq string) string {
	switch {
	case seq != "" && (finish == chat.FinishStop || finish == ""):
		return StopStopSequence
	case finish == chat.FinishContentFilter || refused:
		return StopRefusal
	case finish == chat.FinishLength:
		return StopMaxTokens
	case finish == chat.FinishToolCalls || finish == chat.FinishFunctionCall || toolUse:
		return StopToolUse
	}
	return StopEndTurn
}

// ErrorType is Anthropic's error type for an HTTP status, as its API
// documents them: other 4xx are invalid_request_error, other 5xx api_error.
func ErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// ServerToolName is a server tool's type without its date, as a dropped
// list names it: web_search_20250305 is web_search; a type too long or not
// UTF-8 is "(unprintable)".
func ServerToolName(typ string) string {
	if i := strings.LastIndexByte(typ, '_'); i > 0 && len(typ)-i == 9 {
		if _, err := strconv.Atoi(typ[i+1:]); err == nil {
			typ = typ[:i]
		}
	}
	if len(typ) > 64 || !utf8.ValidString(typ) {
		return "(unprintable)"
	}
	return typ
}
