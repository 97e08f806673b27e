package responses

import (
	"encoding/json"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// The stream's event types, each event's "type" and its SSE event name.
const (
	EventCreated                         = "response.created"
	EventInProgress                      = "response.in_progress"
	EventQueued                          = "response.queued"
	EventOutputItemAdded                 = "response.output_item.added"
	EventOutputItemDone                  = "response.output_item.done"
	EventContentPartAdded                = "response.content_part.added"
	EventContentPartDone                 = "response.content_part.done"
	EventOutputTextDelta                 = "response.output_text.delta"
	EventOutputTextDone                  = "response.output_text.done"
	EventRefusalDelta                    = "response.refusal.delta"
	EventRefusalDone                     = "response.refusal.done"
	EventFunctionCallArgumentsDelta      = "response.function_call_arguments.delta"
	EventFunctionCallArgumentsDone       = "response.function_call_arguments.done"
	EventReasoningSummaryPartAdded       = "response.reasoning_summary_part.added"
	EventReasoningSummaryPartDone        = "response.reasoning_summary_part.done"
	EventReasoningSummaryTextDelta       = "response.reasoning_summary_text.delta"
	EventReasoningSummaryTextDone        = "response.reasoning_summary_text.done"
	EventReasoningTextDelta              = "response.reasoning_text.delta"
	EventReasoningTextDone               = "response.reasoning_text.done"
	EventCustomToolCallInputDelta        = "response.custom_tool_call_input.delta"
	EventImageGenerationCallPartialImage = "response.image_generation_call.partial_image"
	EventCompleted                       = "response.completed"
	EventIncomplete                      = "response.incomplete"
	EventFailed                          = "response.failed"
	EventError                           = "error"
)

// ObjectResponse is a response's "object".
const ObjectResponse = "response"

// The statuses of a response and of an output item.
const (
	StatusInProgress = "in_progress"
	StatusQueued     = "queued"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// The reasons of incomplete_details.
const (
	ReasonMaxOutputTokens = "max_output_tokens"
	ReasonContentFilter   = "content_filter"
)

// The output item types.
const (
	ItemMessage      = "message"
	ItemFunctionCall = "function_call"
	ItemReasoning    = "reasoning"
)

// The call items of the client's own tools and of MCP servers, which
// OpenAI bills by their tokens only; every other "<tool>_call" item is a
// call of one of the provider's built-in tools (web_search_call,
// file_search_call, image_generation_call, code_interpreter_call, ...).
const (
	ItemCustomToolCall = "custom_tool_call"
	ItemLocalShellCall = "local_shell_call"
	ItemShellCall      = "shell_call"
	ItemApplyPatchCall = "apply_patch_call"
	ItemComputerCall   = "computer_call"
	ItemMCPCall        = "mcp_call"
)

// ItemCodeInterpreterCall is a code interpreter's call, billed by the
// container it runs in (its container_id).
const ItemCodeInterpreterCall = "code_interpreter_call"

// The content part types: a message's output_text and refusal, a reasoning
// item's summary_text and reasoning_text.
const (
	PartOutputText    = "output_text"
	PartRefusal       = "refusal"
	PartSummaryText   = "summary_text"
	PartReasoningText = "reasoning_text"
)

// FinishReason is how a response ended as the hub's (Chat Completions')
// finish_reason: an incomplete response (status incomplete, or
// response.incomplete) is length, or content_filter when reason (its
// incomplete_details.reason) is; a complete one that called tools is
// tool_calls; any other is stop.
func FinishReason(incomplete bool, reason string, toolCalls bool) string {
	switch {
	case incomplete && reason == ReasonContentFilter:
		return chat.FinishContentFilter
	case incomplete:
		return chat.FinishLength
	case toolCalls:
		return chat.FinishToolCalls
	}
	return chat.FinishStop
}

// Ending is a Chat Completions finish_reason as a finished response's
// status and incomplete_details: length and content_filter are
// incomplete, for max_output_tokens and content_filter; any other is
// completed.
func Ending(finish string) (status string, details *IncompleteDetails) {
	switch finish {
	case chat.FinishLength:
		return StatusIncomplete, &IncompleteDetails{Reason: ReasonMaxOutputTokens}
	case chat.FinishContentFilter:
		return StatusIncomplete, &IncompleteDetails{Reason: ReasonContentFilter}
	}
	return StatusCompleted, nil
}

// The roles of a message item: the model's, and the user's.
const (
	RoleAssistant = "assistant"
	RoleUser      = "user"
)

// Response is a response object. The fields an API version or a writer
// leaves out when unset (background, instructions, max_output_tokens,
// previous_response_id, reasoning, store, temperature, top_p) are left out
// when nil; instructions, max_output_tokens and previous_response_id are
// raw, so that a writer can write them null.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         *bool              `json:"background,omitempty"`
	Error              *Error             `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       json.RawMessage    `json:"instructions,omitempty"`
	MaxOutputTokens    json.RawMessage    `json:"max_output_tokens,omitempty"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID json.RawMessage    `json:"previous_response_id,omitempty"`
	Reasoning          *Reasoning         `json:"reasoning,omitempty"`
	Store              *bool              `json:"store,omitempty"`
	Temperature        *float64           `json:"temperature,omitempty"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopP               *float64           `json:"top_p,omitempty"`
	// Usage is a *Usage, or a writer's usage object with fields of its own
	// after Usage's; null when nil (a response in progress).
	Usage    any             `json:"usage"`
	Metadata json.RawMessage `json:"metadata"`
}

// Error is a failed response's error.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Reasoning is the reasoning settings of a request and of its response:
// effort raw (the client's string as written), summary left out when
// empty.
type Reasoning struct {
	Effort  json.RawMessage `json:"effort"`
	Summary string          `json:"summary,omitempty"`
}

// Usage is a response's usage.
type Usage struct {
	InputTokens         int64               `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int64               `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int64               `json:"total_tokens"`
}

// InputTokensDetails is the input's breakdown: the part read from the
// provider's cache.
type InputTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// OutputTokensDetails is the output's breakdown: the reasoning tokens.
type OutputTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// MessageItem is a message output item; Content holds *OutputText and
// *RefusalPart (or the values).
type MessageItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Content []any  `json:"content"`
	Role    string `json:"role"`
}

// FunctionCallItem is a function_call output item.
type FunctionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

// ReasoningItem is a reasoning output item: its summary parts, its
// encrypted content (left out when empty) and its status (left out when
// empty, as OpenAI does).
type ReasoningItem struct {
	ID               string        `json:"id"`
	Type             string        `json:"type"`
	Summary          []SummaryText `json:"summary"`
	EncryptedContent string        `json:"encrypted_content,omitempty"`
	Status           string        `json:"status,omitempty"`
}

// OutputText is a message's output_text part.
type OutputText struct {
	Type        string            `json:"type"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
	Text        string            `json:"text"`
}

// RefusalPart is a message's refusal part.
type RefusalPart struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

// SummaryText is a reasoning item's summary_text part.
type SummaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// EventHead is the members every stream event but "error" starts with.
type EventHead struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

// ItemAt is the output item an event is about: its id and index.
type ItemAt struct {
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
}

// PartAt is the content part of an output item an event is about.
type PartAt struct {
	ItemAt
	ContentIndex int `json:"content_index"`
}

// SummaryAt is the summary part of a reasoning item an event is about.
type SummaryAt struct {
	ItemAt
	SummaryIndex int `json:"summary_index"`
}

// ResponseEvent is response.created, response.in_progress,
// response.completed, response.incomplete or response.failed.
type ResponseEvent struct {
	EventHead
	Response *Response `json:"response"`
}

// OutputItemEvent is response.output_item.added or .done.
type OutputItemEvent struct {
	EventHead
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"`
}

// ContentPartEvent is response.content_part.added or .done.
type ContentPartEvent struct {
	EventHead
	PartAt
	Part any `json:"part"`
}

// OutputTextDeltaEvent is response.output_text.delta.
type OutputTextDeltaEvent struct {
	EventHead
	PartAt
	Delta    string            `json:"delta"`
	Logprobs []json.RawMessage `json:"logprobs"`
}

// OutputTextDoneEvent is response.output_text.done.
type OutputTextDoneEvent struct {
	EventHead
	PartAt
	Text     string            `json:"text"`
	Logprobs []json.RawMessage `json:"logprobs"`
}

// RefusalDeltaEvent is response.refusal.delta.
type RefusalDeltaEvent struct {
	EventHead
	PartAt
	Delta string `json:"delta"`
}

// RefusalDoneEvent is response.refusal.done.
type RefusalDoneEvent struct {
	EventHead
	PartAt
	Refusal string `json:"refusal"`
}

// ArgumentsDeltaEvent is response.function_call_arguments.delta.
type ArgumentsDeltaEvent struct {
	EventHead
	ItemAt
	Delta string `json:"delta"`
}

// ArgumentsDoneEvent is response.function_call_arguments.done.
type ArgumentsDoneEvent struct {
	EventHead
	ItemAt
	Arguments string `json:"arguments"`
}

// SummaryPartEvent is response.reasoning_summary_part.added or .done.
type SummaryPartEvent struct {
	EventHead
	SummaryAt
	Part SummaryText `json:"part"`
}

// SummaryTextDeltaEvent is response.reasoning_summary_text.delta.
type SummaryTextDeltaEvent struct {
	EventHead
	SummaryAt
	Delta string `json:"delta"`
}

// SummaryTextDoneEvent is response.reasoning_summary_text.done.
type SummaryTextDoneEvent struct {
	EventHead
	SummaryAt
	Text string `json:"text"`
}

// ErrorEvent is the "error" event of a stream that cannot go on; code and
// param are null when nil.
type ErrorEvent struct {
	Type           string  `json:"type"`
	Code           *string `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
	SequenceNumber int     `json:"sequence_number"`
}
