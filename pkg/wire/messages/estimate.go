package messages

import (
	"bytes"
	"encoding/json"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// EstimateInputTokens is the gateway's estimate of the input tokens of a
// Messages request body (a messages or count_tokens body): llm.EstimateTokens
// of the bytes of the text the model reads, counted as
//
//   - system: the string, or the text of each text block;
//   - each message's content: the string, or of each block: a text block's
//     text, a thinking block's thinking, a tool_use (or server_tool_use)
//     block's name and its input as compact JSON, a tool_result block's
//     content (the string, or its text blocks), a document block's data
//     when its source is of type "text";
//   - each tool: its name, its description, and its input_schema as
//     compact JSON.
//
// Nothing else counts: not the JSON syntax around the text, not the model,
// tool_choice or any other parameter, and not images, base64 or URL
// documents, or redacted thinking. A body that is not a JSON object counts
// 0; a part whose shape is unexpected is skipped.
//
// The body is read with encoding/json into shapes of its own rather than
// into Request: encoding/json goes on past a value of the wrong type, so
// one malformed part does not hide the rest, where Request's decoder
// refuses the whole body.
func EstimateInputTokens(body []byte) int {
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	// A body that is not JSON fills nothing.
	_ = json.Unmarshal(body, &req)
	n := contentBytes(req.System)
	for _, m := range req.Messages {
		n += contentBytes(m.Content)
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + compactLen(t.InputSchema)
	}
	return llm.EstimateTokens(n)
}

// contentBytes is the text of a content field: a string, or an array of
// blocks.
func contentBytes(raw json.RawMessage) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0
		}
		return len(s)
	}
	var blocks []json.RawMessage
	_ = json.Unmarshal(raw, &blocks)
	n := 0
	for _, b := range blocks {
		n += blockBytes(b)
	}
	return n
}

// blockBytes is the text of one content block (see EstimateInputTokens).
func blockBytes(raw json.RawMessage) int {
	var b struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
		Content  json.RawMessage `json:"content"`
		Source   struct {
			Type string `json:"type"`
			Data string `json:"data"`
		} `json:"source"`
	}
	_ = json.Unmarshal(raw, &b) // as in EstimateInputTokens
	switch b.Type {
	case BlockText:
		return len(b.Text)
	case BlockThinking:
		return len(b.Thinking)
	case BlockToolUse, BlockServerToolUse:
		return len(b.Name) + compactLen(b.Input)
	case BlockToolResult:
		return contentBytes(b.Content)
	case BlockDocument:
		if b.Source.Type == SourceText {
			return len(b.Source.Data)
		}
	}
	return 0
}

// compactLen is the length of raw as compact JSON; 0 when raw is empty or
// not JSON.
func compactLen(raw json.RawMessage) int {
	if len(raw) == 0 {
		return 0
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return 0
	}
	return buf.Len()
}
