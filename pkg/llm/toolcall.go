package llm

import "github.com/buzzgate/buzzgate/pkg/wire/chat"

// ToolCall is a tool call in a Chat Completions assistant message, the form
// the gateway's canonical request carries a call in.
type ToolCall = chat.ToolCall
