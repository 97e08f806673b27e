package responses

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// ChatUsage reads a usage object as the hub's (Chat Completions') usage:
// prompt_tokens is input_tokens, completion_tokens output_tokens,
// total_tokens their sum, prompt_tokens_details.cached_tokens
// input_tokens_details.cached_tokens and
// completion_tokens_details.reasoning_tokens
// output_tokens_details.reasoning_tokens, each detail when the upstream
// sent it; serverToolUse, when not empty, is its server_tool_use (the
// Responses usage object does not count built-in tool calls). It is nil
// for a usage that is null, not an object, or has neither count. A count
// that is not a number reads as 0.
func ChatUsage(raw json.RawMessage, serverToolUse map[string]int64) json.RawMessage {
	if jsonobj.IsNull(raw) || raw[0] != '{' {
		return nil
	}
	var u struct {
		Input   json.RawMessage `json:"input_tokens"`
		Output  json.RawMessage `json:"output_tokens"`
		InputD  json.RawMessage `json:"input_tokens_details"`
		OutputD json.RawMessage `json:"output_tokens_details"`
	}
	if json.Unmarshal(raw, &u) != nil || (u.Input == nil && u.Output == nil) {
		return nil
	}
	in, out := count(u.Input), count(u.Output)
	w := chat.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}
	if n, ok := detail(u.InputD, "cached_tokens"); ok {
		w.PromptTokensDetails = &chat.PromptTokensDetails{CachedTokens: n}
	}
	if n, ok := detail(u.OutputD, "reasoning_tokens"); ok {
		w.CompletionTokensDetails = &chat.CompletionTokensDetails{ReasoningTokens: n}
	}
	if len(serverToolUse) > 0 {
		w.ServerToolUse = serverToolUse
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil
	}
	return b
}

// count reads a token count: a non-negative number, whole tokens, at most
// what an int32 holds; anything else is 0.
func count(raw json.RawMessage) int64 {
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || !(f >= 0) || f > math.MaxInt32 {
		return 0
	}
	return int64(f)
}

// detail reads one count of a details object, its key matched exactly;
// ok is false when there is no such object or count.
func detail(raw json.RawMessage, name string) (int64, bool) {
	if jsonobj.IsNull(raw) || raw[0] != '{' {
		return 0, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return 0, false
	}
	v, ok := m[name]
	if !ok || jsonobj.IsNull(v) {
		return 0, false
	}
	return count(v), true
}
