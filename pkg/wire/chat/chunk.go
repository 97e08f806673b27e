package chat

import "encoding/json"

// Chunk is one chat.completion.chunk. Usage is written as it is, and left
// out when empty, as on every chunk but a stream's usage chunk. Error is
// left out but on the chunk that ends a stream a failure cut short (the
// OpenAI SDKs raise it).
type Chunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	ServiceTier       string          `json:"service_tier,omitempty"`
	SystemFingerprint string          `json:"system_fingerprint,omitempty"`
	Choices           []ChunkChoice   `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
	Error             *ErrorBody      `json:"error,omitempty"`
}

// ChunkChoice is one choice of a chunk; finish_reason is always written
// (null until the choice finishes).
type ChunkChoice struct {
	Index int   `json:"index"`
	Delta Delta `json:"delta"`
	// Logprobs is written as it is; left out when nil, as by the servers
	// that stream none.
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
	FinishReason *string         `json:"finish_reason"`
	// StopReason, with finish_reason "stop", is the stop sequence that
	// ended the answer, as vLLM reports it; left out when none did.
	StopReason *string `json:"stop_reason,omitempty"`
}

// Delta is what a chunk adds to its choice; an unset field is left out.
type Delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Refusal   *string         `json:"refusal,omitempty"`
	ToolCalls []DeltaToolCall `json:"tool_calls,omitempty"`
	// ReasoningContent is a reasoning model's thinking, as vLLM, DeepSeek
	// and Together stream it, and as the gateway's own translations do.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// DeltaToolCall is a piece of a tool call: its id, type and name in the
// first piece, its arguments in pieces after.
type DeltaToolCall struct {
	Index    int            `json:"index"`
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Function *DeltaFunction `json:"function,omitempty"`
}

// DeltaFunction is a tool call piece's function; an unset field is left
// out.
type DeltaFunction struct {
	Name      *string `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

// Logprobs is a choice's logprobs: its content and refusal entries as
// sent.
type Logprobs struct {
	Content []json.RawMessage `json:"content"`
	Refusal []json.RawMessage `json:"refusal"`
}

// UpstreamChunk is a chat.completion.chunk as an upstream sends it, for
// reading: besides what Chunk writes, the "error" member some servers send
// inside a stream, vLLM's stop_reason (a stop string or a token id),
// Groq's and OpenRouter's "reasoning", and the legacy function_call. Usage,
// Error, StopReason and the reasoning fields are kept raw, so that a value
// of an unexpected type is the reader's to judge rather than an error.
type UpstreamChunk struct {
	ID                string           `json:"id"`
	Model             string           `json:"model"`
	Created           int64            `json:"created"`
	SystemFingerprint string           `json:"system_fingerprint"`
	ServiceTier       string           `json:"service_tier"`
	Usage             json.RawMessage  `json:"usage"`
	Error             json.RawMessage  `json:"error"`
	Choices           []UpstreamChoice `json:"choices"`
}

// UpstreamChoice is one choice of an UpstreamChunk.
type UpstreamChoice struct {
	Index        int             `json:"index"`
	Delta        UpstreamDelta   `json:"delta"`
	Logprobs     *Logprobs       `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
}

// UpstreamDelta is what an UpstreamChunk adds to its choice: a Delta's
// role, content and refusal, with its tool calls, reasoning_content,
// Groq's and OpenRouter's reasoning and the legacy function_call read as
// they are sent (these fields, declared here, stand in for the Delta's of
// the same names).
type UpstreamDelta struct {
	Delta
	ToolCalls        []UpstreamToolCall `json:"tool_calls"`
	FunctionCall     *Function          `json:"function_call"`
	ReasoningContent json.RawMessage    `json:"reasoning_content"`
	Reasoning        json.RawMessage    `json:"reasoning"`
}

// UpstreamToolCall is a piece of a tool call as an UpstreamDelta carries
// it; a function's unset name or arguments read as "".
type UpstreamToolCall struct {
	Index    int      `json:"index"`
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}
