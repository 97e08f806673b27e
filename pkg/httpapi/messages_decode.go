package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/pkg/canonjson"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// The Anthropic Messages request, as POST /api/v1/messages reads it.
//
// decodeMessages translates it into a Chat Completions body; the gateway
// then decodes that with llm.DecodeChatRequest like any chat request, so the
// router, the idempotency layer and billing run unchanged. The translation
// (Messages → Chat Completions; docs/translation.md is the whole table,
// which its tests read):
//
//	model                         → model (a non-empty string, required)
//	max_tokens                    → max_completion_tokens (an integer from 1, required, as Anthropic
//	                                requires it; an OpenAI-compatible route may take it as max_tokens)
//	system: string | text blocks  → a leading {"role":"system"} message, the blocks' texts joined
//	                                by a blank line (left out when empty)
//	messages[].role               → user | assistant; system (as Claude Code sends it) → a system
//	                                message at that point, its text blocks joined by a blank line
//	messages[].content: string    → the same string
//	  text block                  → {"type":"text","text"} part
//	  image, source base64        → {"type":"image_url","image_url":{"url":"data:<media_type>;base64,<data>"}} (user only)
//	  image, source url           → {"type":"image_url","image_url":{"url":<url>}} (user only)
//	  tool_use (assistant)        → tool_calls[] {id, type:function, function:{name, arguments: input as JSON text}}
//	  tool_result (user)          → a {"role":"tool","tool_call_id"} message, content a string or text parts;
//	                                the tool messages come first, then a user message with the turn's
//	                                other blocks, if any; is_error is checked and dropped (Chat has no such flag)
//	  thinking, redacted_thinking → dropped and named (assistant only): no other upstream can read
//	                                Anthropic's signed thinking
//	thinking {enabled, budget_tokens} → reasoning_effort: under 4096 low, under 16384 medium, else high
//	thinking {adaptive}           → reasoning_effort of output_config.effort, else medium
//	thinking {disabled}           → nothing
//	output_config.effort          → reasoning_effort (low, medium, high; xhigh and max → high)
//	output_config.format json_schema → response_format {"type":"json_schema","json_schema":{name:"output",schema}}
//	stop_sequences                → stop (an array of strings; left out when empty)
//	temperature, top_p            → the same, the client's number text unchanged (0 to 1)
//	top_k                         → top_k (an integer from 0), passed through
//	tools[] {name, description, input_schema, strict}
//	                              → [{"type":"function","function":{name, description, parameters, strict}}]
//	tools[] of a server type (web_search_…, bash_…, …) → dropped and named tools[<type less its date>]
//	tool_choice {type}            → auto → "auto", any → "required", none → "none",
//	                                tool → {"type":"function","function":{"name"}};
//	                                disable_parallel_tool_use true → parallel_tool_calls false
//	metadata.user_id              → user
//	stream true                   → stream true and stream_options.include_usage true (the usage of the
//	                                message_delta event comes from the usage chunk)
//	gateway, provider             → copied as they are (llm.DecodeChatRequest validates them)
//
// Dropped and named in x-gateway-dropped (hints, which do not change what
// the answer is): cache_control wherever it is, citations of text blocks,
// a tool's defer_loading, input_examples and eager_input_streaming, and at
// the top level (mdIgnoredFields) service_tier, container, mcp_servers,
// context_management. Any other field, at any level, is rejected as
// Anthropic's API rejects it ("Extra inputs are not permitted"). A null
// field is an absent one.
//
// Rejected as not supported by the gateway: content blocks of other types
// (document, search_result, server tool blocks, ...), image sources other
// than base64 and url, and images inside a tool_result.
//
// Also checked as Anthropic checks them: every message but a final assistant
// one has non-empty content; text blocks are not empty; tool names are
// unique; tool_use only in assistant turns and tool_result only in user
// turns; tool_choice any or tool only with tools, a tool choice naming one
// of them. Left to llm.DecodeChatRequest, which names the same params: the
// model's length and the gateway and provider objects.

// mdIgnoredFields are the top-level fields accepted and ignored: beta and
// account features the gateway does not offer, which the SDKs may send.
var mdIgnoredFields = []string{"service_tier", "container", "mcp_servers", "context_management"}

// hintSet collects the names of the hints a translation drops, each once,
// in the order met.
type hintSet struct{ names []string }

func (h *hintSet) add(name string) {
	for _, n := range h.names {
		if n == name {
			return
		}
	}
	h.names = append(h.names, name)
}

// nested adds name when m has the field (not null).
func (h *hintSet) nested(m map[string]json.RawMessage, field, name string) {
	if _, ok := mdPresent(m, field); ok {
		h.add(name)
	}
}

// mdImageTypes are the media types Anthropic accepts for a base64 image.
var mdImageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// mdMaxTokens bounds max_tokens so it fits any upstream's integer.
const mdMaxTokens = math.MaxInt32

// decodeMessages validates an Anthropic Messages request body and returns the
// equivalent Chat Completions request body (JSON) that llm.DecodeChatRequest
// accepts, so the gateway's router, idempotency and billing run unchanged.
func decodeMessages(body []byte) (chat []byte, err error) {
	chat, _, err = decodeMessagesHints(body)
	return chat, err
}

// decodeMessagesHints is decodeMessages, also returning the nested hints
// the translation drops (the top-level ones are mdIgnoredFields).
func decodeMessagesHints(body []byte) (chat []byte, dropped []string, err error) {
	h := &hintSet{}
	chat, err = decodeMessagesInto(body, h)
	if err != nil {
		return nil, nil, err
	}
	return chat, h.names, nil
}

func decodeMessagesInto(body []byte, h *hintSet) (chat []byte, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		trimmed := bytes.TrimSpace(body)
		if err != nil && (len(trimmed) == 0 || trimmed[0] == '{') {
			return nil, mdInvalid("", "request body is not valid JSON: %s", mdJSONProblem(err))
		}
		return nil, mdInvalid("", "request body must be a JSON object")
	}
	known := []string{
		"model", "max_tokens", "system", "messages", "stop_sequences", "temperature", "top_p", "top_k",
		"tools", "tool_choice", "metadata", "stream", "gateway", "provider", "thinking", "output_config",
	}
	if err := mdKeys(fields, "", append(known, mdIgnoredFields...)...); err != nil {
		return nil, err
	}
	var out mdObject

	model, err := mdString(fields, "model", "model", true)
	if err != nil {
		return nil, err
	}
	out.add("model", mdJSON(model))

	maxTokens, err := mdInt(fields, "max_tokens", "max_tokens", 1, mdMaxTokens, true)
	if err != nil {
		return nil, err
	}
	out.add("max_completion_tokens", json.RawMessage(strconv.FormatInt(maxTokens, 10)))

	var msgs []mdChatMessage
	if raw, ok := mdPresent(fields, "system"); ok {
		content, err := mdSystem(raw, "system", h)
		if err != nil {
			return nil, err
		}
		if content != nil {
			msgs = append(msgs, mdChatMessage{Role: "system", Content: content})
		}
	}
	turns, err := mdTurns(fields, h)
	if err != nil {
		return nil, err
	}
	out.add("messages", mdJSON(append(msgs, turns...)))

	if raw, ok := mdPresent(fields, "stop_sequences"); ok {
		var stops []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &stops) != nil {
			return nil, mdInvalid("stop_sequences", "stop_sequences must be an array of strings")
		}
		list := make([]string, 0, len(stops))
		for i, s := range stops {
			v, err := mdStringValue(s, fmt.Sprintf("stop_sequences[%d]", i))
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if len(list) > 0 {
			out.add("stop", mdJSON(list))
		}
	}
	for _, name := range []string{"temperature", "top_p"} {
		raw, ok := mdPresent(fields, name)
		if !ok {
			continue
		}
		f, ok := mdNumber(raw)
		if !ok {
			return nil, mdInvalid(name, "%s must be a number", name)
		}
		if f < 0 || f > 1 {
			return nil, mdInvalid(name, "%s must be from 0 to 1", name)
		}
		out.add(name, raw)
	}
	if raw, ok := mdPresent(fields, "top_k"); ok {
		if _, err := mdInt(fields, "top_k", "top_k", 0, math.MaxInt32, false); err != nil {
			return nil, err
		}
		out.add("top_k", raw)
	}

	effort, format, err := mdReasoning(fields)
	if err != nil {
		return nil, err
	}
	if effort != "" {
		out.add("reasoning_effort", mdJSON(effort))
	}
	if format != nil {
		out.add("response_format", format)
	}

	tools, names, err := mdTools(fields, h)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		out.add("tools", mdJSON(tools))
	}
	if raw, ok := mdPresent(fields, "tool_choice"); ok {
		choice, parallel, err := mdToolChoice(raw, names)
		if err != nil {
			return nil, err
		}
		if len(tools) > 0 {
			out.add("tool_choice", choice)
			if parallel != nil {
				out.add("parallel_tool_calls", parallel)
			}
		}
	}

	if raw, ok := mdPresent(fields, "metadata"); ok {
		meta, err := mdObjectOf(raw, "metadata")
		if err != nil {
			return nil, err
		}
		if err := mdKeys(meta, "metadata", "user_id"); err != nil {
			return nil, err
		}
		user, err := mdString(meta, "user_id", "metadata.user_id", false)
		if err != nil {
			return nil, err
		}
		if user != "" {
			out.add("user", mdJSON(user))
		}
	}

	if raw, ok := mdPresent(fields, "stream"); ok {
		switch string(raw) {
		case "true":
			out.add("stream", json.RawMessage("true"))
			out.add("stream_options", json.RawMessage(`{"include_usage":true}`))
		case "false":
		default:
			return nil, mdInvalid("stream", "stream must be a boolean")
		}
	}
	for _, name := range []string{"gateway", "provider"} {
		if raw, ok := mdPresent(fields, name); ok {
			out.add(name, raw)
		}
	}
	return out.bytes(), nil
}

// mdChatMessage is one Chat Completions message of the translation.
type mdChatMessage struct {
	Role string `json:"role"`
	// Content is a string, an array of parts, or null (an assistant turn of
	// tool calls only).
	Content    json.RawMessage `json:"content"`
	ToolCalls  []llm.ToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type mdTextPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type mdImagePart struct {
	Type     string `json:"type"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type mdTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      json.RawMessage `json:"strict,omitempty"`
	} `json:"function"`
}

// mdSystem translates the system prompt: a string or an array of text
// blocks. nil means there is none.
//
// A list of blocks is joined by a blank line into one string, as the
// blocks are paragraphs of one prompt (an upstream that reads text parts
// would run them together). param is where it is: "system", or a system
// message's content.
func mdSystem(raw json.RawMessage, param string, h *hintSet) (json.RawMessage, error) {
	if raw[0] == '"' {
		s, err := mdStringValue(raw, param)
		if err != nil || s == "" {
			return nil, err
		}
		return raw, nil
	}
	blocks, err := mdArray(raw, param, param+" must be a string or an array of text blocks")
	if err != nil {
		return nil, err
	}
	if len(blocks) == 0 {
		return nil, nil
	}
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		at := fmt.Sprintf("%s[%d]", param, i)
		m, typ, err := mdBlock(b, at)
		if err != nil {
			return nil, err
		}
		if typ != "text" {
			return nil, mdInvalid(at+".type", "%s.type must be \"text\"", at)
		}
		text, err := mdText(m, at, h)
		if err != nil {
			return nil, err
		}
		texts = append(texts, text)
	}
	return mdJSON(strings.Join(texts, "\n\n")), nil
}

// mdTurns translates messages into Chat Completions messages.
func mdTurns(fields map[string]json.RawMessage, h *hintSet) ([]mdChatMessage, error) {
	raw, ok := mdPresent(fields, "messages")
	if !ok {
		return nil, mdInvalid("messages", "messages is required")
	}
	turns, err := mdArray(raw, "messages", "messages must be an array of messages")
	if err != nil {
		return nil, err
	}
	if len(turns) == 0 {
		return nil, mdInvalid("messages", "messages must not be empty")
	}
	var out []mdChatMessage
	for i, t := range turns {
		at := fmt.Sprintf("messages[%d]", i)
		m, err := mdObjectOf(t, at)
		if err != nil {
			return nil, err
		}
		if err := mdKeys(m, at, "role", "content"); err != nil {
			return nil, err
		}
		role, err := mdString(m, "role", at+".role", true)
		if err != nil {
			return nil, err
		}
		if role != "user" && role != "assistant" && role != "system" {
			return nil, mdInvalid(at+".role", "%s.role must be \"user\", \"assistant\" or \"system\"", at)
		}
		content, ok := mdPresent(m, "content")
		if !ok {
			return nil, mdInvalid(at+".content", "%s.content is required", at)
		}
		if role == "system" {
			// A system prompt given at this point of the conversation
			// (Claude Code sends one so): a system message here.
			text, err := mdSystem(content, at+".content", h)
			if err != nil {
				return nil, err
			}
			if text == nil {
				return nil, mdInvalid(at+".content", "%s.content must not be empty", at)
			}
			out = append(out, mdChatMessage{Role: "system", Content: text})
			continue
		}
		final := i == len(turns)-1 && role == "assistant"
		if content[0] == '"' {
			s, err := mdStringValue(content, at+".content")
			if err != nil {
				return nil, err
			}
			if s == "" && !final {
				return nil, mdInvalid(at+".content", "%s.content must not be empty (only a final assistant message may be)", at)
			}
			out = append(out, mdChatMessage{Role: role, Content: content})
			continue
		}
		blocks, err := mdArray(content, at+".content", at+".content must be a string or an array of content blocks")
		if err != nil {
			return nil, err
		}
		if len(blocks) == 0 && !final {
			return nil, mdInvalid(at+".content", "%s.content must not be empty (only a final assistant message may be)", at)
		}
		if role == "user" {
			out, err = mdUserTurn(out, blocks, at, h)
		} else {
			out, err = mdAssistantTurn(out, blocks, at, h)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mdUserTurn translates a user turn of blocks: its tool results as tool
// messages, then the rest as one user message.
func mdUserTurn(out []mdChatMessage, blocks []json.RawMessage, at string, h *hintSet) ([]mdChatMessage, error) {
	var parts []any
	for j, b := range blocks {
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		m, typ, err := mdBlock(b, bat)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			text, err := mdText(m, bat, h)
			if err != nil {
				return nil, err
			}
			parts = append(parts, mdTextPart{Type: "text", Text: text})
		case "image":
			p, err := mdImage(m, bat, h)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case "tool_result":
			msg, err := mdToolResult(m, bat, h)
			if err != nil {
				return nil, err
			}
			out = append(out, msg)
		case "tool_use", "thinking", "redacted_thinking":
			return nil, mdInvalid(bat+".type", "%s: %s blocks are only allowed in assistant messages", bat, typ)
		default:
			return nil, mdUnsupportedBlock(bat, typ)
		}
	}
	if len(parts) > 0 {
		out = append(out, mdChatMessage{Role: "user", Content: mdJSON(parts)})
	}
	return out, nil
}

// mdAssistantTurn translates an assistant turn of blocks: text parts and
// tool calls.
func mdAssistantTurn(out []mdChatMessage, blocks []json.RawMessage, at string, h *hintSet) ([]mdChatMessage, error) {
	var parts []mdTextPart
	var calls []llm.ToolCall
	for j, b := range blocks {
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		m, typ, err := mdBlock(b, bat)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			text, err := mdText(m, bat, h)
			if err != nil {
				return nil, err
			}
			parts = append(parts, mdTextPart{Type: "text", Text: text})
		case "tool_use":
			c, err := mdToolUse(m, bat, h)
			if err != nil {
				return nil, err
			}
			calls = append(calls, c)
		case "thinking", "redacted_thinking":
			// An earlier turn's thinking, signed by Anthropic for
			// Anthropic: no other upstream can read it.
			if err := mdKeys(m, bat, "type", "thinking", "signature", "data", "cache_control"); err != nil {
				return nil, err
			}
			h.add("messages[].content[" + typ + "]")
		case "image", "tool_result":
			return nil, mdInvalid(bat+".type", "%s: %s blocks are only allowed in user messages", bat, typ)
		default:
			return nil, mdUnsupportedBlock(bat, typ)
		}
	}
	msg := mdChatMessage{Role: "assistant", ToolCalls: calls}
	switch {
	case len(parts) > 0:
		msg.Content = mdJSON(parts)
	case len(calls) > 0:
		msg.Content = json.RawMessage("null")
	default:
		msg.Content = json.RawMessage(`""`)
	}
	return append(out, msg), nil
}

func mdUnsupportedBlock(at, typ string) error {
	return mdInvalid(at+".type", "%s: content block type %s is not supported by this gateway", at, mdQuote(typ))
}

// mdBlock reads a content block: an object with a string type.
func mdBlock(raw json.RawMessage, at string) (map[string]json.RawMessage, string, error) {
	m, err := mdObjectOf(raw, at)
	if err != nil {
		return nil, "", err
	}
	typ, err := mdString(m, "type", at+".type", true)
	if err != nil {
		return nil, "", err
	}
	return m, typ, nil
}

// mdText reads a text block's text, which must not be empty.
func mdText(m map[string]json.RawMessage, at string, h *hintSet) (string, error) {
	if err := mdKeys(m, at, "type", "text", "cache_control", "citations"); err != nil {
		return "", err
	}
	h.nested(m, "cache_control", "cache_control")
	h.nested(m, "citations", "citations")
	text, err := mdString(m, "text", at+".text", false)
	if err != nil {
		return "", err
	}
	if text == "" {
		return "", mdInvalid(at+".text", "%s.text must be a non-empty string", at)
	}
	return text, nil
}

// mdImage translates an image block into an image_url part.
func mdImage(m map[string]json.RawMessage, at string, h *hintSet) (mdImagePart, error) {
	var p mdImagePart
	p.Type = "image_url"
	if err := mdKeys(m, at, "type", "source", "cache_control"); err != nil {
		return p, err
	}
	h.nested(m, "cache_control", "cache_control")
	raw, ok := mdPresent(m, "source")
	if !ok {
		return p, mdInvalid(at+".source", "%s.source is required", at)
	}
	sat := at + ".source"
	src, err := mdObjectOf(raw, sat)
	if err != nil {
		return p, err
	}
	typ, err := mdString(src, "type", sat+".type", true)
	if err != nil {
		return p, err
	}
	switch typ {
	case "base64":
		if err := mdKeys(src, sat, "type", "media_type", "data"); err != nil {
			return p, err
		}
		mt, err := mdString(src, "media_type", sat+".media_type", true)
		if err != nil {
			return p, err
		}
		ok := false
		for _, t := range mdImageTypes {
			ok = ok || mt == t
		}
		if !ok {
			return p, mdInvalid(sat+".media_type", "%s.media_type must be one of %s", sat, strings.Join(mdImageTypes, ", "))
		}
		data, err := mdString(src, "data", sat+".data", true)
		if err != nil {
			return p, err
		}
		p.ImageURL.URL = "data:" + mt + ";base64," + data
	case "url":
		if err := mdKeys(src, sat, "type", "url"); err != nil {
			return p, err
		}
		u, err := mdString(src, "url", sat+".url", true)
		if err != nil {
			return p, err
		}
		lower := strings.ToLower(u)
		if !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") {
			return p, mdInvalid(sat+".url", "%s.url must be an http or https URL", sat)
		}
		p.ImageURL.URL = u
	default:
		return p, mdInvalid(sat+".type", "%s.type must be \"base64\" or \"url\" (%s is not supported by this gateway)", sat, mdQuote(typ))
	}
	return p, nil
}

// mdToolUse translates a tool_use block into a tool call.
func mdToolUse(m map[string]json.RawMessage, at string, h *hintSet) (llm.ToolCall, error) {
	var c llm.ToolCall
	c.Type = "function"
	if err := mdKeys(m, at, "type", "id", "name", "input", "cache_control"); err != nil {
		return c, err
	}
	h.nested(m, "cache_control", "cache_control")
	var err error
	if c.ID, err = mdString(m, "id", at+".id", true); err != nil {
		return c, err
	}
	if c.Function.Name, err = mdString(m, "name", at+".name", true); err != nil {
		return c, err
	}
	raw, ok := mdPresent(m, "input")
	if !ok {
		return c, mdInvalid(at+".input", "%s.input is required", at)
	}
	if raw[0] != '{' {
		return c, mdInvalid(at+".input", "%s.input must be an object", at)
	}
	// The arguments are text the model reads as it is written: they are
	// the input's canonical form (the Idempotency-Key fingerprint's), so
	// that two bodies with one fingerprint show the model the same text
	// (1e2 or 100, a key order, an escape). An input without one (a
	// duplicate key, a number out of range: a keyed request with it is
	// refused before this) is compacted as written.
	if canon, err := canonjson.Canonicalize(raw); err == nil {
		c.Function.Arguments = string(canon)
		return c, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return c, mdInvalid(at+".input", "%s.input must be an object", at)
	}
	c.Function.Arguments = b.String()
	return c, nil
}

// mdToolResult translates a tool_result block into a tool message.
func mdToolResult(m map[string]json.RawMessage, at string, h *hintSet) (mdChatMessage, error) {
	msg := mdChatMessage{Role: "tool"}
	if err := mdKeys(m, at, "type", "tool_use_id", "content", "is_error", "cache_control"); err != nil {
		return msg, err
	}
	h.nested(m, "cache_control", "cache_control")
	var err error
	if msg.ToolCallID, err = mdString(m, "tool_use_id", at+".tool_use_id", true); err != nil {
		return msg, err
	}
	// is_error has no Chat Completions counterpart: checked, then dropped;
	// the result's own text is what tells the model what went wrong.
	if raw, ok := mdPresent(m, "is_error"); ok && string(raw) != "true" && string(raw) != "false" {
		return msg, mdInvalid(at+".is_error", "%s.is_error must be a boolean", at)
	}
	raw, ok := mdPresent(m, "content")
	switch {
	case !ok:
		msg.Content = json.RawMessage(`""`)
	case raw[0] == '"':
		if _, err := mdStringValue(raw, at+".content"); err != nil {
			return msg, err
		}
		msg.Content = raw
	default:
		blocks, err := mdArray(raw, at+".content", at+".content must be a string or an array of text blocks")
		if err != nil {
			return msg, err
		}
		parts := make([]mdTextPart, 0, len(blocks))
		for k, b := range blocks {
			bat := fmt.Sprintf("%s.content[%d]", at, k)
			bm, typ, err := mdBlock(b, bat)
			if err != nil {
				return msg, err
			}
			switch typ {
			case "text":
				text, err := mdText(bm, bat, h)
				if err != nil {
					return msg, err
				}
				parts = append(parts, mdTextPart{Type: "text", Text: text})
			case "image":
				return msg, mdInvalid(bat+".type", "%s: images in a tool_result are not supported by this gateway; send the image in a user text turn's content instead", bat)
			default:
				return msg, mdUnsupportedBlock(bat, typ)
			}
		}
		if len(parts) == 0 {
			msg.Content = json.RawMessage(`""`)
		} else {
			msg.Content = mdJSON(parts)
		}
	}
	return msg, nil
}

// mdTools translates the tool definitions; names are the function tools'
// names. A tool of a server-defined type (web_search_20250305, bash_…),
// which only Anthropic runs, is dropped and named tools[<type>], its date
// left out.
func mdTools(fields map[string]json.RawMessage, h *hintSet) ([]mdTool, map[string]bool, error) {
	raw, ok := mdPresent(fields, "tools")
	if !ok {
		return nil, nil, nil
	}
	list, err := mdArray(raw, "tools", "tools must be an array of tools")
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]bool, len(list))
	tools := make([]mdTool, 0, len(list))
	for i, t := range list {
		at := fmt.Sprintf("tools[%d]", i)
		m, err := mdObjectOf(t, at)
		if err != nil {
			return nil, nil, err
		}
		typ, err := mdString(m, "type", at+".type", false)
		if err != nil {
			return nil, nil, err
		}
		if typ != "" && typ != "custom" {
			if _, err := mdString(m, "name", at+".name", true); err != nil {
				return nil, nil, err
			}
			h.add("tools[" + mdServerTool(typ) + "]")
			continue
		}
		if err := mdKeys(m, at, "type", "name", "description", "input_schema", "cache_control", "strict",
			"defer_loading", "input_examples", "eager_input_streaming"); err != nil {
			return nil, nil, err
		}
		h.nested(m, "cache_control", "cache_control")
		for _, hint := range []string{"defer_loading", "input_examples", "eager_input_streaming"} {
			h.nested(m, hint, "tools[]."+hint)
		}
		var out mdTool
		out.Type = "function"
		if out.Function.Name, err = mdString(m, "name", at+".name", true); err != nil {
			return nil, nil, err
		}
		if names[out.Function.Name] {
			return nil, nil, mdInvalid(at+".name", "%s.name: tool names must be unique", at)
		}
		names[out.Function.Name] = true
		if out.Function.Description, err = mdString(m, "description", at+".description", false); err != nil {
			return nil, nil, err
		}
		schema, ok := mdPresent(m, "input_schema")
		if !ok {
			return nil, nil, mdInvalid(at+".input_schema", "%s.input_schema is required", at)
		}
		if schema[0] != '{' {
			return nil, nil, mdInvalid(at+".input_schema", "%s.input_schema must be a JSON schema object", at)
		}
		out.Function.Parameters = schema
		if strict, err := rsBool(m, "strict", at+".strict"); err != nil {
			return nil, nil, err
		} else if strict != nil {
			out.Function.Strict = json.RawMessage(strconv.FormatBool(*strict))
		}
		tools = append(tools, out)
	}
	return tools, names, nil
}

// mdServerTool is a server tool's type without its date:
// web_search_20250305 is web_search.
func mdServerTool(typ string) string {
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

// mdReasoning translates thinking and output_config into Chat's
// reasoning_effort ("" for none) and response_format (nil for none).
func mdReasoning(fields map[string]json.RawMessage) (effort string, format json.RawMessage, err error) {
	var configured string
	if raw, ok := mdPresent(fields, "output_config"); ok {
		m, err := mdObjectOf(raw, "output_config")
		if err != nil {
			return "", nil, err
		}
		if err := mdKeys(m, "output_config", "effort", "format"); err != nil {
			return "", nil, err
		}
		e, err := mdString(m, "effort", "output_config.effort", false)
		if err != nil {
			return "", nil, err
		}
		switch e {
		case "":
		case "low", "medium", "high":
			configured = e
		case "xhigh", "max":
			configured = "high"
		default:
			return "", nil, mdInvalid("output_config.effort", "output_config.effort must be \"low\", \"medium\", \"high\", \"xhigh\" or \"max\"")
		}
		if raw, ok := mdPresent(m, "format"); ok {
			if format, err = mdOutputFormat(raw); err != nil {
				return "", nil, err
			}
		}
	}
	effort = configured
	raw, ok := mdPresent(fields, "thinking")
	if !ok {
		return effort, format, nil
	}
	m, typ, err := mdBlock(raw, "thinking")
	if err != nil {
		return "", nil, err
	}
	switch typ {
	case "enabled":
		if err := mdKeys(m, "thinking", "type", "budget_tokens", "display"); err != nil {
			return "", nil, err
		}
		budget, err := mdInt(m, "budget_tokens", "thinking.budget_tokens", 1024, mdMaxTokens, true)
		if err != nil {
			return "", nil, err
		}
		if effort == "" {
			switch {
			case budget < 4096:
				effort = "low"
			case budget < 16384:
				effort = "medium"
			default:
				effort = "high"
			}
		}
	case "adaptive":
		if err := mdKeys(m, "thinking", "type", "display"); err != nil {
			return "", nil, err
		}
		if effort == "" {
			effort = "medium"
		}
	case "disabled":
		if err := mdKeys(m, "thinking", "type"); err != nil {
			return "", nil, err
		}
	default:
		return "", nil, mdInvalid("thinking.type", "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\"")
	}
	if _, err := mdString(m, "display", "thinking.display", false); err != nil {
		return "", nil, err
	}
	return effort, format, nil
}

// mdOutputFormat translates output_config.format, Anthropic's structured
// output: {type: json_schema, schema} becomes a json_schema
// response_format named "output".
func mdOutputFormat(raw json.RawMessage) (json.RawMessage, error) {
	const at = "output_config.format"
	m, typ, err := mdBlock(raw, at)
	if err != nil {
		return nil, err
	}
	if typ != "json_schema" {
		return nil, mdInvalid(at+".type", "%s.type must be \"json_schema\"", at)
	}
	if err := mdKeys(m, at, "type", "schema"); err != nil {
		return nil, err
	}
	schema, ok := mdPresent(m, "schema")
	if !ok || schema[0] != '{' {
		return nil, mdInvalid(at+".schema", "%s.schema must be a JSON schema object", at)
	}
	return mdJSON(struct {
		Type       string `json:"type"`
		JSONSchema any    `json:"json_schema"`
	}{"json_schema", struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}{"output", schema}}), nil
}

// mdToolChoice translates tool_choice; parallel is nil unless parallel tool
// use is turned off.
func mdToolChoice(raw json.RawMessage, tools map[string]bool) (choice, parallel json.RawMessage, err error) {
	m, err := mdObjectOf(raw, "tool_choice")
	if err != nil {
		return nil, nil, err
	}
	if err := mdKeys(m, "tool_choice", "type", "name", "disable_parallel_tool_use"); err != nil {
		return nil, nil, err
	}
	typ, err := mdString(m, "type", "tool_choice.type", true)
	if err != nil {
		return nil, nil, err
	}
	name, err := mdString(m, "name", "tool_choice.name", false)
	if err != nil {
		return nil, nil, err
	}
	if raw, ok := mdPresent(m, "disable_parallel_tool_use"); ok {
		switch string(raw) {
		case "true":
			parallel = json.RawMessage("false")
		case "false":
		default:
			return nil, nil, mdInvalid("tool_choice.disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use must be a boolean")
		}
	}
	if typ != "tool" {
		if _, ok := mdPresent(m, "name"); ok {
			return nil, nil, mdInvalid("tool_choice.name", "tool_choice.name is only allowed when tool_choice.type is \"tool\"")
		}
	}
	switch typ {
	case "auto":
		choice = json.RawMessage(`"auto"`)
	case "none":
		choice, parallel = json.RawMessage(`"none"`), nil
	case "any":
		if len(tools) == 0 {
			return nil, nil, mdInvalid("tool_choice.type", "tool_choice.type \"any\" requires tools")
		}
		choice = json.RawMessage(`"required"`)
	case "tool":
		if name == "" {
			return nil, nil, mdInvalid("tool_choice.name", "tool_choice.name is required when tool_choice.type is \"tool\"")
		}
		if !tools[name] {
			return nil, nil, mdInvalid("tool_choice.name", "tool_choice.name %s is not one of the tools", mdQuote(name))
		}
		var c struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		c.Type, c.Function.Name = "function", name
		choice = mdJSON(c)
	default:
		return nil, nil, mdInvalid("tool_choice.type", "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\"")
	}
	return choice, parallel, nil
}

// mdObject builds a JSON object with its keys in the order added.
type mdObject struct{ b []byte }

func (o *mdObject) add(key string, value json.RawMessage) {
	if len(o.b) == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, mdJSON(key)...)
	o.b = append(o.b, ':')
	o.b = append(o.b, value...)
}

func (o *mdObject) bytes() []byte {
	if len(o.b) == 0 {
		return []byte("{}")
	}
	return append(o.b, '}')
}

// mdJSON encodes a value of our own types, compactly and without HTML
// escaping. The only raw values inside are the client's, already parsed.
func mdJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Unreachable: every value is a string, a struct of strings or a
		// json.RawMessage that the decoder accepted.
		return json.RawMessage("null")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func mdInvalid(param, format string, args ...any) *llm.Error {
	return llm.Errorf(llm.CodeInvalidRequest, param, format, args...)
}

func mdJSONProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	return "unexpected end of input"
}

// mdQuote quotes a client's string for a message, cut short and made
// printable.
func mdQuote(s string) string {
	if len(s) > 64 || !utf8.ValidString(s) {
		return "(unprintable)"
	}
	return strconv.Quote(s)
}

// mdPresent returns a field that is there and not null.
func mdPresent(m map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := m[name]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// mdKeys rejects a field not in known, the first in sorted order so the
// error does not depend on map order.
func mdKeys(m map[string]json.RawMessage, param string, known ...string) error {
	name, ok := llm.UnknownField(m, known...)
	if !ok {
		return nil
	}
	if name == "" {
		name = `""` // an empty key, named so that the error names a param
	}
	if param != "" {
		name = param + "." + name
	}
	return mdInvalid(name, "unknown field %s", name)
}

func mdObjectOf(raw json.RawMessage, param string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, mdInvalid(param, "%s must be an object", param)
	}
	return m, nil
}

func mdArray(raw json.RawMessage, param, msg string) ([]json.RawMessage, error) {
	var a []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &a) != nil {
		return nil, mdInvalid(param, "%s", msg)
	}
	return a, nil
}

// mdString reads a string field; a required one must be there and not
// empty.
func mdString(m map[string]json.RawMessage, name, param string, required bool) (string, error) {
	raw, ok := mdPresent(m, name)
	if !ok {
		if required {
			return "", mdInvalid(param, "%s is required", param)
		}
		return "", nil
	}
	s, err := mdStringValue(raw, param)
	if err != nil {
		return "", err
	}
	if required && s == "" {
		return "", mdInvalid(param, "%s must not be empty", param)
	}
	return s, nil
}

func mdStringValue(raw json.RawMessage, param string) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", mdInvalid(param, "%s must be a string", param)
	}
	return s, nil
}

// mdNumber reads a JSON number.
func mdNumber(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// mdInt reads an integer in [lo, hi] (1024 and 1024.0 alike).
func mdInt(m map[string]json.RawMessage, name, param string, lo, hi int64, required bool) (int64, error) {
	raw, ok := mdPresent(m, name)
	if !ok {
		if required {
			return 0, mdInvalid(param, "%s is required", param)
		}
		return 0, nil
	}
	f, ok := mdNumber(raw)
	if !ok || f != math.Trunc(f) {
		return 0, mdInvalid(param, "%s must be an integer", param)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, mdInvalid(param, "%s must be an integer from %d to %d", param, lo, hi)
	}
	return int64(f), nil
}
