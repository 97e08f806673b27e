package converse

import "strings"

// The event types of a ConverseStream answer, each an event of the AWS
// event-stream encoding whose :event-type header names it, its payload the
// event's JSON.
const (
	EventMessageStart      = "messageStart"
	EventContentBlockStart = "contentBlockStart"
	EventContentBlockDelta = "contentBlockDelta"
	EventContentBlockStop  = "contentBlockStop"
	EventMessageStop       = "messageStop"
	EventMetadata          = "metadata"
)

// EventChunk is the event type of an InvokeModelWithResponseStream answer:
// each a PayloadPart holding one event of the model's own protocol (for
// Claude, a Messages stream event).
const EventChunk = "chunk"

// ExceptionModelStreamError is the :exception-type of the exception that
// ends a stream which failed part way; its payload is an Error.
const ExceptionModelStreamError = "modelStreamErrorException"

// MessageStart is the messageStart event.
type MessageStart struct {
	Role string `json:"role"`
}

// ContentBlockStart is the contentBlockStart event, which opens a tool use
// block (a text block opens with its first delta).
type ContentBlockStart struct {
	ContentBlockIndex int        `json:"contentBlockIndex"`
	Start             BlockStart `json:"start"`
}

// BlockStart is what a contentBlockStart opens.
type BlockStart struct {
	ToolUse *ToolUseStart `json:"toolUse,omitempty"`
}

// ToolUseStart is the start of a tool use block: the call's id and the
// tool's name.
type ToolUseStart struct {
	ToolUseID string `json:"toolUseId"`
	Name      string `json:"name"`
}

// ContentBlockDelta is the contentBlockDelta event.
type ContentBlockDelta struct {
	ContentBlockIndex int        `json:"contentBlockIndex"`
	Delta             BlockDelta `json:"delta"`
}

// BlockDelta is a contentBlockDelta's delta: a piece of text, or a piece of
// a tool use's input (JSON text); the other is left out.
type BlockDelta struct {
	Text    *string       `json:"text,omitempty"`
	ToolUse *ToolUseDelta `json:"toolUse,omitempty"`
}

// ToolUseDelta is a piece of a tool use's input.
type ToolUseDelta struct {
	Input string `json:"input"`
}

// ContentBlockStop is the contentBlockStop event.
type ContentBlockStop struct {
	ContentBlockIndex int `json:"contentBlockIndex"`
}

// MessageStop is the messageStop event, with one of the stop reasons
// above.
type MessageStop struct {
	StopReason string `json:"stopReason"`
}

// Metadata is the metadata event that ends a stream: its usage and
// metrics.
type Metadata struct {
	Usage   Usage   `json:"usage"`
	Metrics Metrics `json:"metrics"`
}

// Usage is an answer's token usage.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	TotalTokens  int64 `json:"totalTokens"`
}

// Metrics is an answer's latency, in milliseconds.
type Metrics struct {
	LatencyMs int64 `json:"latencyMs"`
}

// PayloadPart is a chunk event's payload: the bytes of one event of the
// model's protocol, base64 in JSON.
type PayloadPart struct {
	Bytes []byte `json:"bytes"`
}

// Error is the body of a Bedrock Runtime error answer, whose
// x-amzn-errortype header names the error, and the payload of a stream's
// exception.
type Error struct {
	Message string `json:"message"`
}

// The error types of the Bedrock Runtime, as its x-amzn-errortype header
// (before any ":") and an exception's :exception-type name them (a
// stream's exception in lower camel case: "throttlingException").
const (
	ErrAccessDenied         = "AccessDeniedException"
	ErrExpiredToken         = "ExpiredTokenException"
	ErrInternalServer       = "InternalServerException"
	ErrInvalidSignature     = "InvalidSignatureException"
	ErrModelNotReady        = "ModelNotReadyException"
	ErrModelTimeout         = "ModelTimeoutException"
	ErrResourceNotFound     = "ResourceNotFoundException"
	ErrServiceQuotaExceeded = "ServiceQuotaExceededException"
	ErrServiceUnavailable   = "ServiceUnavailableException"
	ErrThrottling           = "ThrottlingException"
	ErrUnknownOperation     = "UnknownOperationException"
	ErrUnrecognizedClient   = "UnrecognizedClientException"
	ErrValidation           = "ValidationException"
)

// IsException reports whether a stream's member, named member, is an
// exception (its name ends in "Exception", in either case), whose payload
// is an Error, rather than an event.
func IsException(member string) bool {
	const suffix = "exception"
	return len(member) >= len(suffix) && strings.EqualFold(member[len(member)-len(suffix):], suffix)
}
