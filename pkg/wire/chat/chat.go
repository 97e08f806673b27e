// Package chat is OpenAI's Chat Completions wire shape: the chat.completion
// object with its choices, message, tool calls and usage, the streamed
// chat.completion.chunk, the error envelope, and the messages, parts,
// tools, response_format and tool_choice of a request that a translation
// into Chat Completions writes. Fields are in OpenAI's
// order, so that what a writer encodes reads like OpenAI's own bytes; a
// field the API leaves out when it has nothing to say is omitempty, and
// one a reader must tell absent from zero is a pointer or json.RawMessage.
// What an upstream sends is read in lenient shapes of its own
// (UpstreamChunk, UpstreamError), which keep raw the members whose type
// servers disagree on.
//
// The codecs, the adapters, the fake upstreams and the load mock all write
// and read these types; the package imports only the standard library and
// go-json-experiment/json's jsontext.
package chat

import "encoding/json"

// The object names.
const (
	ObjectCompletion = "chat.completion"
	ObjectChunk      = "chat.completion.chunk"
)

// The finish reasons.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
	FinishFunctionCall  = "function_call"
)

// RoleAssistant is an answer's role.
const RoleAssistant = "assistant"

// ToolTypeFunction is a tool call's type: every tool call is a function's.
const ToolTypeFunction = "function"

// Completion is a chat.completion. Usage is the usage object as it is
// (null when nil).
type Completion struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	Choices           []Choice        `json:"choices"`
	Usage             json.RawMessage `json:"usage"`
	ServiceTier       string          `json:"service_tier,omitempty"`
	SystemFingerprint string          `json:"system_fingerprint,omitempty"`
}

// Choice is one choice of a chat.completion. Logprobs is written as it is
// (null when nil).
type Choice struct {
	Index        int             `json:"index"`
	Message      Message         `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	// StopReason, with finish_reason "stop", is the stop sequence that
	// ended the answer, as vLLM reports it; left out when none did.
	StopReason *string `json:"stop_reason,omitempty"`
}

// Message is a choice's message.
type Message struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	// Refusal is a string or null as OpenAI writes it, and left out (nil)
	// as the compatible servers that have no refusals (vLLM) do.
	Refusal      json.RawMessage `json:"refusal,omitempty"`
	ToolCalls    []ToolCall      `json:"tool_calls,omitempty"`
	FunctionCall *Function       `json:"function_call,omitempty"`
	// ReasoningContent is the thinking a reasoning model streamed, under
	// the name vLLM and DeepSeek give it.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// RefusalText is the message's refusal, and whether it has one: a string
// (null, absent or anything else is none).
func (m *Message) RefusalText() (string, bool) {
	var s string
	if len(m.Refusal) == 0 || m.Refusal[0] != '"' || json.Unmarshal(m.Refusal, &s) != nil {
		return "", false
	}
	return s, true
}

// ToolCall is one tool call of a message.
type ToolCall struct {
	ID       string   `json:"id,omitempty"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is a tool call's function (or a message's legacy function_call).
type Function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage is the usage object of a chat.completion and of a stream's last
// chunk.
type Usage struct {
	PromptTokens            int64                    `json:"prompt_tokens"`
	CompletionTokens        int64                    `json:"completion_tokens"`
	TotalTokens             int64                    `json:"total_tokens"`
	PromptTokensDetails     *PromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
	// ServerToolUse counts the calls of the provider's server tools, by
	// "<tool>_requests" (Anthropic's usage.server_tool_use; left out when
	// none).
	ServerToolUse map[string]int64 `json:"server_tool_use,omitempty"`
}

// PromptTokensDetails is the prompt's breakdown: cached_tokens (the part
// read from the provider's cache, counted in prompt_tokens), and
// cache_write_tokens (the part written to it, OpenRouter's name, left out
// when none).
type PromptTokensDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// CacheWrite1hTokens is the part of CacheWriteTokens written to a
	// one-hour cache (left out when none).
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"`
}

// CompletionTokensDetails is the completion's breakdown: the reasoning
// tokens it counts.
type CompletionTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Error is the error envelope {"error":{...}}.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the envelope's error; code and param are null when nil.
// Code comes before param, in the order of the gateway's own errors
// (docs/api.md#errors); OpenAI writes param first, and readers take
// either.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    *string `json:"code"`
	Param   *string `json:"param"`
}

// UpstreamError is an error envelope as an upstream writes it, for
// reading: the error member raw, as some compatible servers write a string
// there.
type UpstreamError struct {
	Error json.RawMessage `json:"error"`
}

// UpstreamErrorBody is an UpstreamError's error object, with code and param
// as written (a string, a number or null). Anthropic's error object has
// the same type and message.
type UpstreamErrorBody struct {
	Type    string          `json:"type"`
	Message string          `json:"message"`
	Param   json.RawMessage `json:"param"`
	Code    json.RawMessage `json:"code"`
}
