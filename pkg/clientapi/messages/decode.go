package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/canonjson"
	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/llm"
	messageswire "github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// The Anthropic Messages request, as POST /api/v1/messages reads it.
//
// decodeMessagesHints translates it into a Chat Completions body; the gateway
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

// mdImageTypes are the media types Anthropic accepts for a base64 image.
var mdImageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// decodeMessagesHints validates an Anthropic Messages request body and
// returns the equivalent Chat Completions request body (JSON) that
// llm.DecodeChatRequest accepts, so the gateway's router, idempotency and
// billing run unchanged, and the nested hints the translation drops (the
// top-level ones are mdIgnoredFields).
func decodeMessagesHints(body []byte) (chat []byte, dropped []string, err error) {
	h := &clientapi.HintSet{}
	chat, err = decodeMessagesInto(body, h)
	if err != nil {
		return nil, nil, err
	}
	return chat, h.Names, nil
}

func decodeMessagesInto(body []byte, h *clientapi.HintSet) (chat []byte, err error) {
	fields, err := clientapi.ObjectBody(body)
	if err != nil {
		return nil, err
	}
	known := []string{
		"model", "max_tokens", "system", "messages", "stop_sequences", "temperature", "top_p", "top_k",
		"tools", "tool_choice", "metadata", "stream", "thinking", "output_config",
	}
	if err := clientapi.Keys(fields, "", slices.Concat(known, llm.GatewayFields, mdIgnoredFields)...); err != nil {
		return nil, err
	}
	var out clientapi.Object

	model, err := clientapi.StringField(fields, "model", "model", true)
	if err != nil {
		return nil, err
	}
	out.Add("model", clientapi.JSON(model))

	maxTokens, err := clientapi.IntField(fields, "max_tokens", "max_tokens", 1, clientapi.MaxTokens, true)
	if err != nil {
		return nil, err
	}
	out.Add("max_completion_tokens", json.RawMessage(strconv.FormatInt(maxTokens, 10)))

	var msgs []clientapi.ChatMessage
	if raw, ok := clientapi.Present(fields, "system"); ok {
		content, err := mdSystem(raw, "system", h)
		if err != nil {
			return nil, err
		}
		if content != nil {
			msgs = append(msgs, clientapi.ChatMessage{Role: "system", Content: content})
		}
	}
	turns, err := mdTurns(fields, h)
	if err != nil {
		return nil, err
	}
	out.Add("messages", clientapi.JSON(append(msgs, turns...)))

	if raw, ok := clientapi.Present(fields, "stop_sequences"); ok {
		var stops []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &stops) != nil {
			return nil, clientapi.Invalid("stop_sequences", "stop_sequences must be an array of strings")
		}
		list := make([]string, 0, len(stops))
		for i, s := range stops {
			v, err := clientapi.StringValue(s, fmt.Sprintf("stop_sequences[%d]", i))
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if len(list) > 0 {
			out.Add("stop", clientapi.JSON(list))
		}
	}
	for _, name := range []string{"temperature", "top_p"} {
		raw, ok := clientapi.Present(fields, name)
		if !ok {
			continue
		}
		f, ok := clientapi.Number(raw)
		if !ok {
			return nil, clientapi.Invalid(name, "%s must be a number", name)
		}
		if f < 0 || f > 1 {
			return nil, clientapi.Invalid(name, "%s must be from 0 to 1", name)
		}
		out.Add(name, raw)
	}
	if raw, ok := clientapi.Present(fields, "top_k"); ok {
		if _, err := clientapi.IntField(fields, "top_k", "top_k", 0, math.MaxInt32, false); err != nil {
			return nil, err
		}
		out.Add("top_k", raw)
	}

	effort, format, err := mdReasoning(fields)
	if err != nil {
		return nil, err
	}
	if effort != "" {
		out.Add("reasoning_effort", clientapi.JSON(effort))
	}
	if format != nil {
		out.Add("response_format", format)
	}

	tools, names, err := mdTools(fields, h)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		out.Add("tools", clientapi.JSON(tools))
	}
	if raw, ok := clientapi.Present(fields, "tool_choice"); ok {
		choice, parallel, err := mdToolChoice(raw, names)
		if err != nil {
			return nil, err
		}
		if len(tools) > 0 {
			out.Add("tool_choice", choice)
			if parallel != nil {
				out.Add("parallel_tool_calls", parallel)
			}
		}
	}

	if raw, ok := clientapi.Present(fields, "metadata"); ok {
		meta, err := clientapi.ObjectOf(raw, "metadata")
		if err != nil {
			return nil, err
		}
		if err := clientapi.Keys(meta, "metadata", "user_id"); err != nil {
			return nil, err
		}
		user, err := clientapi.StringField(meta, "user_id", "metadata.user_id", false)
		if err != nil {
			return nil, err
		}
		if user != "" {
			out.Add("user", clientapi.JSON(user))
		}
	}

	if raw, ok := clientapi.Present(fields, "stream"); ok {
		switch string(raw) {
		case "true":
			out.Add("stream", json.RawMessage("true"))
			out.Add("stream_options", json.RawMessage(`{"include_usage":true}`))
		case "false":
		default:
			return nil, clientapi.Invalid("stream", "stream must be a boolean")
		}
	}
	for _, name := range llm.GatewayFields {
		if raw, ok := clientapi.Present(fields, name); ok {
			out.Add(name, raw)
		}
	}
	return out.Bytes(), nil
}

type mdImagePart struct {
	Type     string `json:"type"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// mdSystem translates the system prompt: a string or an array of text
// blocks. nil means there is none.
//
// A list of blocks is joined by a blank line into one string, as the
// blocks are paragraphs of one prompt (an upstream that reads text parts
// would run them together). param is where it is: "system", or a system
// message's content.
func mdSystem(raw json.RawMessage, param string, h *clientapi.HintSet) (json.RawMessage, error) {
	if raw[0] == '"' {
		s, err := clientapi.StringValue(raw, param)
		if err != nil || s == "" {
			return nil, err
		}
		return raw, nil
	}
	blocks, err := clientapi.Array(raw, param, param+" must be a string or an array of text blocks")
	if err != nil {
		return nil, err
	}
	if len(blocks) == 0 {
		return nil, nil
	}
	texts := make([]string, 0, len(blocks))
	err = clientapi.EachBlock(blocks, param, func(m map[string]json.RawMessage, at, typ string) error {
		if typ != "text" {
			return clientapi.Invalid(at+".type", "%s.type must be \"text\"", at)
		}
		text, err := mdText(m, at, h)
		if err != nil {
			return err
		}
		texts = append(texts, text)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return clientapi.JSON(strings.Join(texts, "\n\n")), nil
}

// mdTurns translates messages into Chat Completions messages.
func mdTurns(fields map[string]json.RawMessage, h *clientapi.HintSet) ([]clientapi.ChatMessage, error) {
	raw, ok := clientapi.Present(fields, "messages")
	if !ok {
		return nil, clientapi.Invalid("messages", "messages is required")
	}
	turns, err := clientapi.Array(raw, "messages", "messages must be an array of messages")
	if err != nil {
		return nil, err
	}
	if len(turns) == 0 {
		return nil, clientapi.Invalid("messages", "messages must not be empty")
	}
	var out []clientapi.ChatMessage
	for i, t := range turns {
		at := fmt.Sprintf("messages[%d]", i)
		m, err := clientapi.ObjectOf(t, at)
		if err != nil {
			return nil, err
		}
		if err := clientapi.Keys(m, at, "role", "content"); err != nil {
			return nil, err
		}
		role, err := clientapi.StringField(m, "role", at+".role", true)
		if err != nil {
			return nil, err
		}
		if role != "user" && role != "assistant" && role != "system" {
			return nil, clientapi.Invalid(at+".role", "%s.role must be \"user\", \"assistant\" or \"system\"", at)
		}
		content, ok := clientapi.Present(m, "content")
		if !ok {
			return nil, clientapi.Invalid(at+".content", "%s.content is required", at)
		}
		if role == "system" {
			// A system prompt given at this point of the conversation
			// (Claude Code sends one so): a system message here.
			text, err := mdSystem(content, at+".content", h)
			if err != nil {
				return nil, err
			}
			if text == nil {
				return nil, clientapi.Invalid(at+".content", "%s.content must not be empty", at)
			}
			out = append(out, clientapi.ChatMessage{Role: "system", Content: text})
			continue
		}
		final := i == len(turns)-1 && role == "assistant"
		if content[0] == '"' {
			s, err := clientapi.StringValue(content, at+".content")
			if err != nil {
				return nil, err
			}
			if s == "" && !final {
				return nil, clientapi.Invalid(at+".content", "%s.content must not be empty (only a final assistant message may be)", at)
			}
			out = append(out, clientapi.ChatMessage{Role: role, Content: content})
			continue
		}
		blocks, err := clientapi.Array(content, at+".content", at+".content must be a string or an array of content blocks")
		if err != nil {
			return nil, err
		}
		if len(blocks) == 0 && !final {
			return nil, clientapi.Invalid(at+".content", "%s.content must not be empty (only a final assistant message may be)", at)
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
func mdUserTurn(out []clientapi.ChatMessage, blocks []json.RawMessage, at string, h *clientapi.HintSet) ([]clientapi.ChatMessage, error) {
	var parts []any
	err := mdEachBlock(blocks, at, h, func(p clientapi.TextPart) { parts = append(parts, p) },
		func(m map[string]json.RawMessage, bat, typ string) error {
			switch typ {
			case "image":
				p, err := mdImage(m, bat, h)
				if err != nil {
					return err
				}
				parts = append(parts, p)
			case "tool_result":
				msg, err := mdToolResult(m, bat, h)
				if err != nil {
					return err
				}
				out = append(out, msg)
			case "tool_use", "thinking", "redacted_thinking":
				return clientapi.Invalid(bat+".type", "%s: %s blocks are only allowed in assistant messages", bat, typ)
			default:
				return mdUnsupportedBlock(bat, typ)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if len(parts) > 0 {
		out = append(out, clientapi.ChatMessage{Role: "user", Content: clientapi.JSON(parts)})
	}
	return out, nil
}

// mdAssistantTurn translates an assistant turn of blocks: text parts and
// tool calls.
func mdAssistantTurn(out []clientapi.ChatMessage, blocks []json.RawMessage, at string, h *clientapi.HintSet) ([]clientapi.ChatMessage, error) {
	var parts []clientapi.TextPart
	var calls []llm.ToolCall
	err := mdEachBlock(blocks, at, h, func(p clientapi.TextPart) { parts = append(parts, p) },
		func(m map[string]json.RawMessage, bat, typ string) error {
			switch typ {
			case "tool_use":
				c, err := mdToolUse(m, bat, h)
				if err != nil {
					return err
				}
				calls = append(calls, c)
			case "thinking", "redacted_thinking":
				// An earlier turn's thinking, signed by Anthropic for
				// Anthropic: no other upstream can read it.
				if err := clientapi.Keys(m, bat, "type", "thinking", "signature", "data", "cache_control"); err != nil {
					return err
				}
				h.Add("messages[].content[" + typ + "]")
			case "image", "tool_result":
				return clientapi.Invalid(bat+".type", "%s: %s blocks are only allowed in user messages", bat, typ)
			default:
				return mdUnsupportedBlock(bat, typ)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	msg := clientapi.ChatMessage{Role: "assistant", ToolCalls: calls}
	switch {
	case len(parts) > 0:
		msg.Content = clientapi.JSON(parts)
	case len(calls) > 0:
		msg.Content = json.RawMessage("null")
	default:
		msg.Content = json.RawMessage(`""`)
	}
	return append(out, msg), nil
}

// mdEachBlock reads a content's blocks in order: a text block's text (read
// by mdText) goes to text, any other block to other, with its path and
// type.
func mdEachBlock(blocks []json.RawMessage, at string, h *clientapi.HintSet, text func(clientapi.TextPart),
	other func(m map[string]json.RawMessage, bat, typ string) error) error {
	return clientapi.EachBlock(blocks, at+".content", func(m map[string]json.RawMessage, bat, typ string) error {
		if typ != "text" {
			return other(m, bat, typ)
		}
		t, err := mdText(m, bat, h)
		if err != nil {
			return err
		}
		text(clientapi.TextPart{Type: "text", Text: t})
		return nil
	})
}

func mdUnsupportedBlock(at, typ string) error {
	return clientapi.Invalid(at+".type", "%s: content block type %s is not supported by this gateway", at, clientapi.Quote(typ))
}

// mdText reads a text block's text, which must not be empty.
func mdText(m map[string]json.RawMessage, at string, h *clientapi.HintSet) (string, error) {
	if err := clientapi.Keys(m, at, "type", "text", "cache_control", "citations"); err != nil {
		return "", err
	}
	h.Nested(m, "cache_control", "cache_control")
	h.Nested(m, "citations", "citations")
	text, err := clientapi.StringField(m, "text", at+".text", false)
	if err != nil {
		return "", err
	}
	if text == "" {
		return "", clientapi.Invalid(at+".text", "%s.text must be a non-empty string", at)
	}
	return text, nil
}

// mdImage translates an image block into an image_url part.
func mdImage(m map[string]json.RawMessage, at string, h *clientapi.HintSet) (mdImagePart, error) {
	var p mdImagePart
	p.Type = "image_url"
	if err := clientapi.Keys(m, at, "type", "source", "cache_control"); err != nil {
		return p, err
	}
	h.Nested(m, "cache_control", "cache_control")
	raw, ok := clientapi.Present(m, "source")
	if !ok {
		return p, clientapi.Invalid(at+".source", "%s.source is required", at)
	}
	sat := at + ".source"
	src, err := clientapi.ObjectOf(raw, sat)
	if err != nil {
		return p, err
	}
	typ, err := clientapi.StringField(src, "type", sat+".type", true)
	if err != nil {
		return p, err
	}
	switch typ {
	case "base64":
		if err := clientapi.Keys(src, sat, "type", "media_type", "data"); err != nil {
			return p, err
		}
		mt, err := clientapi.StringField(src, "media_type", sat+".media_type", true)
		if err != nil {
			return p, err
		}
		ok := false
		for _, t := range mdImageTypes {
			ok = ok || mt == t
		}
		if !ok {
			return p, clientapi.Invalid(sat+".media_type", "%s.media_type must be one of %s", sat, strings.Join(mdImageTypes, ", "))
		}
		data, err := clientapi.StringField(src, "data", sat+".data", true)
		if err != nil {
			return p, err
		}
		p.ImageURL.URL = "data:" + mt + ";base64," + data
	case "url":
		if err := clientapi.Keys(src, sat, "type", "url"); err != nil {
			return p, err
		}
		u, err := clientapi.StringField(src, "url", sat+".url", true)
		if err != nil {
			return p, err
		}
		lower := strings.ToLower(u)
		if !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") {
			return p, clientapi.Invalid(sat+".url", "%s.url must be an http or https URL", sat)
		}
		p.ImageURL.URL = u
	default:
		return p, clientapi.Invalid(sat+".type", "%s.type must be \"base64\" or \"url\" (%s is not supported by this gateway)", sat, clientapi.Quote(typ))
	}
	return p, nil
}

// mdToolUse translates a tool_use block into a tool call.
func mdToolUse(m map[string]json.RawMessage, at string, h *clientapi.HintSet) (llm.ToolCall, error) {
	var c llm.ToolCall
	c.Type = "function"
	if err := clientapi.Keys(m, at, "type", "id", "name", "input", "cache_control"); err != nil {
		return c, err
	}
	h.Nested(m, "cache_control", "cache_control")
	var err error
	if c.ID, err = clientapi.StringField(m, "id", at+".id", true); err != nil {
		return c, err
	}
	if c.Function.Name, err = clientapi.StringField(m, "name", at+".name", true); err != nil {
		return c, err
	}
	raw, err := clientapi.ObjectField(m, "input", at, true, "an object")
	if err != nil {
		return c, err
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
		return c, clientapi.Invalid(at+".input", "%s.input must be an object", at)
	}
	c.Function.Arguments = b.String()
	return c, nil
}

// mdToolResult translates a tool_result block into a tool message.
func mdToolResult(m map[string]json.RawMessage, at string, h *clientapi.HintSet) (clientapi.ChatMessage, error) {
	msg := clientapi.ChatMessage{Role: "tool"}
	if err := clientapi.Keys(m, at, "type", "tool_use_id", "content", "is_error", "cache_control"); err != nil {
		return msg, err
	}
	h.Nested(m, "cache_control", "cache_control")
	var err error
	if msg.ToolCallID, err = clientapi.StringField(m, "tool_use_id", at+".tool_use_id", true); err != nil {
		return msg, err
	}
	// is_error has no Chat Completions counterpart: checked, then dropped;
	// the result's own text is what tells the model what went wrong.
	if raw, ok := clientapi.Present(m, "is_error"); ok && string(raw) != "true" && string(raw) != "false" {
		return msg, clientapi.Invalid(at+".is_error", "%s.is_error must be a boolean", at)
	}
	raw, ok := clientapi.Present(m, "content")
	switch {
	case !ok:
		msg.Content = json.RawMessage(`""`)
	case raw[0] == '"':
		if _, err := clientapi.StringValue(raw, at+".content"); err != nil {
			return msg, err
		}
		msg.Content = raw
	default:
		blocks, err := clientapi.Array(raw, at+".content", at+".content must be a string or an array of text blocks")
		if err != nil {
			return msg, err
		}
		parts := make([]clientapi.TextPart, 0, len(blocks))
		err = mdEachBlock(blocks, at, h, func(p clientapi.TextPart) { parts = append(parts, p) },
			func(_ map[string]json.RawMessage, bat, typ string) error {
				if typ == "image" {
					return clientapi.Invalid(bat+".type", "%s: images in a tool_result are not supported by this gateway; send the image in a user text turn's content instead", bat)
				}
				return mdUnsupportedBlock(bat, typ)
			})
		if err != nil {
			return msg, err
		}
		msg.Content = clientapi.TextContent(parts)
	}
	return msg, nil
}

// mdTools translates the tool definitions; names are the function tools'
// names. A tool of a server-defined type (web_search_20250305, bash_…),
// which only Anthropic runs, is dropped and named tools[<type>], its date
// left out.
func mdTools(fields map[string]json.RawMessage, h *clientapi.HintSet) ([]clientapi.ChatTool, map[string]bool, error) {
	return clientapi.ReadTools(fields, func(tools []clientapi.ChatTool, t json.RawMessage, at string, names map[string]bool) ([]clientapi.ChatTool, error) {
		m, err := clientapi.ObjectOf(t, at)
		if err != nil {
			return nil, err
		}
		typ, err := clientapi.StringField(m, "type", at+".type", false)
		if err != nil {
			return nil, err
		}
		if typ != "" && typ != "custom" {
			if _, err := clientapi.StringField(m, "name", at+".name", true); err != nil {
				return nil, err
			}
			h.Add("tools[" + messageswire.ServerToolName(typ) + "]")
			return tools, nil
		}
		if err := clientapi.Keys(m, at, "type", "name", "description", "input_schema", "cache_control", "strict",
			"defer_loading", "input_examples", "eager_input_streaming"); err != nil {
			return nil, err
		}
		h.Nested(m, "cache_control", "cache_control")
		for _, hint := range []string{"defer_loading", "input_examples", "eager_input_streaming"} {
			h.Nested(m, hint, "tools[]."+hint)
		}
		out, err := clientapi.FunctionTool(m, at, names, nil, "input_schema", true)
		if err != nil {
			return nil, err
		}
		return append(tools, out), nil
	})
}

// mdReasoning translates thinking and output_config into Chat's
// reasoning_effort ("" for none) and response_format (nil for none).
func mdReasoning(fields map[string]json.RawMessage) (effort string, format json.RawMessage, err error) {
	var configured string
	if raw, ok := clientapi.Present(fields, "output_config"); ok {
		m, err := clientapi.ObjectOf(raw, "output_config")
		if err != nil {
			return "", nil, err
		}
		if err := clientapi.Keys(m, "output_config", "effort", "format"); err != nil {
			return "", nil, err
		}
		e, err := clientapi.StringField(m, "effort", "output_config.effort", false)
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
			return "", nil, clientapi.Invalid("output_config.effort", "output_config.effort must be \"low\", \"medium\", \"high\", \"xhigh\" or \"max\"")
		}
		if raw, ok := clientapi.Present(m, "format"); ok {
			if format, err = mdOutputFormat(raw); err != nil {
				return "", nil, err
			}
		}
	}
	effort = configured
	raw, ok := clientapi.Present(fields, "thinking")
	if !ok {
		return effort, format, nil
	}
	m, typ, err := clientapi.Block(raw, "thinking")
	if err != nil {
		return "", nil, err
	}
	switch typ {
	case "enabled":
		if err := clientapi.Keys(m, "thinking", "type", "budget_tokens", "display"); err != nil {
			return "", nil, err
		}
		budget, err := clientapi.IntField(m, "budget_tokens", "thinking.budget_tokens", 1024, clientapi.MaxTokens, true)
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
		if err := clientapi.Keys(m, "thinking", "type", "display"); err != nil {
			return "", nil, err
		}
		if effort == "" {
			effort = "medium"
		}
	case "disabled":
		if err := clientapi.Keys(m, "thinking", "type"); err != nil {
			return "", nil, err
		}
	default:
		return "", nil, clientapi.Invalid("thinking.type", "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\"")
	}
	if _, err := clientapi.StringField(m, "display", "thinking.display", false); err != nil {
		return "", nil, err
	}
	return effort, format, nil
}

// mdOutputFormat translates output_config.format, Anthropic's structured
// output: {type: json_schema, schema} becomes a json_schema
// response_format named "output".
func mdOutputFormat(raw json.RawMessage) (json.RawMessage, error) {
	const at = "output_config.format"
	m, typ, err := clientapi.Block(raw, at)
	if err != nil {
		return nil, err
	}
	if typ != "json_schema" {
		return nil, clientapi.Invalid(at+".type", "%s.type must be \"json_schema\"", at)
	}
	if err := clientapi.Keys(m, at, "type", "schema"); err != nil {
		return nil, err
	}
	schema, ok := clientapi.Present(m, "schema")
	if !ok || schema[0] != '{' {
		return nil, clientapi.Invalid(at+".schema", "%s.schema must be a JSON schema object", at)
	}
	return clientapi.JSON(struct {
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
	m, err := clientapi.ObjectOf(raw, "tool_choice")
	if err != nil {
		return nil, nil, err
	}
	if err := clientapi.Keys(m, "tool_choice", "type", "name", "disable_parallel_tool_use"); err != nil {
		return nil, nil, err
	}
	typ, err := clientapi.StringField(m, "type", "tool_choice.type", true)
	if err != nil {
		return nil, nil, err
	}
	name, err := clientapi.StringField(m, "name", "tool_choice.name", false)
	if err != nil {
		return nil, nil, err
	}
	if raw, ok := clientapi.Present(m, "disable_parallel_tool_use"); ok {
		switch string(raw) {
		case "true":
			parallel = json.RawMessage("false")
		case "false":
		default:
			return nil, nil, clientapi.Invalid("tool_choice.disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use must be a boolean")
		}
	}
	if typ != "tool" {
		if _, ok := clientapi.Present(m, "name"); ok {
			return nil, nil, clientapi.Invalid("tool_choice.name", "tool_choice.name is only allowed when tool_choice.type is \"tool\"")
		}
	}
	switch typ {
	case "auto":
		choice = json.RawMessage(`"auto"`)
	case "none":
		choice, parallel = json.RawMessage(`"none"`), nil
	case "any":
		if len(tools) == 0 {
			return nil, nil, clientapi.Invalid("tool_choice.type", "tool_choice.type \"any\" requires tools")
		}
		choice = json.RawMessage(`"required"`)
	case "tool":
		if name == "" {
			return nil, nil, clientapi.Invalid("tool_choice.name", "tool_choice.name is required when tool_choice.type is \"tool\"")
		}
		if !tools[name] {
			return nil, nil, clientapi.Invalid("tool_choice.name", "tool_choice.name %s is not one of the tools", clientapi.Quote(name))
		}
		var c struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		c.Type, c.Function.Name = "function", name
		choice = clientapi.JSON(c)
	default:
		return nil, nil, clientapi.Invalid("tool_choice.type", "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\"")
	}
	return choice, parallel, nil
}
