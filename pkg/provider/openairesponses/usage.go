package openairesponses

import (
	"encoding/json"

	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// chatUsage is responses.ChatUsage with the answer's built-in tool calls
// counted in server_tool_use (toolCalls).
func chatUsage(raw json.RawMessage, calls *toolCalls) json.RawMessage {
	return responses.ChatUsage(raw, calls.counts)
}
