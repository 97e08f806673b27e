// Package chunkwire is a chat.completion.chunk as the gateway's adapters
// and its fake upstreams write one: the fields of OpenAI's streamed Chat
// Completions chunk that they set, in OpenAI's field order, so that what
// they write reads like a real upstream's chunk byte for byte. (pkg/llm
// reads chunks with its own scanner.)
package chunkwire

import "encoding/json"

// Chunk is one chat.completion.chunk. Usage is written as it is, and left
// out when empty.
type Chunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []Choice        `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

// Choice is one choice of a chunk; finish_reason is always written (null
// until the choice finishes).
type Choice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
	// StopReason, with finish_reason "stop", is the stop sequence that
	// ended the answer, as vLLM reports it; left out when none did.
	StopReason *string `json:"stop_reason,omitempty"`
}

// Delta is what a chunk adds to its choice; an unset field is left out.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Refusal   *string    `json:"refusal,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ReasoningContent is a reasoning model's thinking, as vLLM, DeepSeek
	// and Together stream it, and as the gateway's own translations do.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// ToolCall is a piece of a tool call: its id, type and name in the first
// piece, its arguments in pieces after.
type ToolCall struct {
	Index    int       `json:"index"`
	ID       string    `json:"id,omitempty"`
	Type     string    `json:"type,omitempty"`
	Function *Function `json:"function,omitempty"`
}

// Function is a tool call piece's function; an unset field is left out.
type Function struct {
	Name      *string `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}
