package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// The OpenAI Responses request, as POST /api/v1/responses reads it: the
// body, and each item, part and tool, is read as its members as written
// (chat.Object: each name exactly, the last of two counting, values raw),
// so that each member is checked in the order below and named in its
// error; a member an object may not have is refused by name.
//
// Decoding is two steps, because a request continuing an earlier response
// needs that response's stored turn, and only the request says which:
//
//	r, err := parseRequest(body)   // validate; r.PreviousResponseID, r.Input, ...
//	prior := load(r.PreviousResponseID) // when set: the stored conversation
//	err = r.build(prior)              // r.Chat
//
// ToHub(body, prior) does both; with a previous_response_id and a
// nil prior it stops after the first and leaves Chat nil.
//
// The Chat Completions body is then read as any chat request is decoded
// (llm.Hub.Request, from the members written, or llm.DecodeChatRequest),
// so the router, the idempotency layer and billing run unchanged. Its messages are: a system message of instructions (if any),
// then prior, then this turn's input (r.Input). Instructions are not part of
// r.Input: as OpenAI documents, a previous response's instructions are not
// carried over to the next one. The caller keeps prior + r.Input + the
// turn's output as the conversation a later request continues from.
//
// The translation (Responses → Chat Completions):
//
//	model                         → model (a non-empty string, required)
//	input: string                 → one {"role":"user"} message of that string
//	input: items (non-empty)      → messages, in order:
//	  message (type "message", or no type and a role)
//	    role                      → user | assistant | system; developer → system (every
//	                                upstream knows system, and OpenAI treats the two alike)
//	    content: string           → the same string
//	    input_text (not assistant)→ {"type":"text","text"} part
//	    input_image (user)        → {"type":"image_url","image_url":{"url","detail"}}: image_url an
//	                                http(s) URL or a data:image/…;base64 URL; file_id is rejected
//	    output_text (assistant)   → {"type":"text","text"} part (annotations, logprobs dropped)
//	    refusal (assistant)       → {"type":"refusal","refusal"} part
//	    id, status                → dropped
//	  function_call               → an assistant message's tool_calls[] {id: call_id, type: function,
//	                                function:{name, arguments}}; consecutive calls, and calls right
//	                                after an assistant message, join that one assistant message
//	  function_call_output        → {"role":"tool","tool_call_id": call_id, content}: output a string,
//	                                or input_text parts as text parts; its call_id must be a
//	                                function_call's of this input or of prior (OpenAI's "No tool call
//	                                found for function call output")
//	  reasoning                   → dropped and named input[reasoning]: an earlier answer's
//	                                reasoning, encrypted for the upstream that wrote it
//	instructions                  → a leading {"role":"system"} message (left out when empty)
//	max_output_tokens             → max_completion_tokens (an integer from 1; an OpenAI-compatible
//	                                route may take it as max_tokens)
//	reasoning.effort              → reasoning_effort (none, minimal, low, medium, high, xhigh)
//	temperature (0–2), top_p (0–1)→ the same, the client's number text unchanged
//	tools[] {type:function, name, description, parameters, strict}
//	                              → [{"type":"function","function":{name, description, parameters, strict}}]
//	                                (strict only when sent: Chat's default, false, is what every
//	                                non-OpenAI upstream does anyway)
//	tools[] {type:namespace, name, tools} → its function tools, flattened (names must stay unique);
//	                                the grouping is dropped and named tools[namespace]
//	tools[] of a built-in type (web_search, file_search, code_interpreter, mcp, …)
//	                              → dropped and named tools[<type>]: no Chat route runs them
//	tool_choice                   → "auto" | "none" | "required" the same; {type:function, name} →
//	                                {"type":"function","function":{"name"}}; auto and none are left out
//	                                without tools, as Chat rejects tool_choice without tools
//	parallel_tool_calls           → the same (only with tools, for the same reason)
//	text.format                   → text: nothing; json_object: response_format {"type":"json_object"};
//	                                json_schema {name, schema, description, strict}:
//	                                response_format {"type":"json_schema","json_schema":{…}}
//	text.verbosity                → verbosity
//	safety_identifier, else user  → user
//	stream true                   → stream true and stream_options.include_usage true
//	gateway, provider             → copied as they are (llm.DecodeChatRequest validates them)
//
// Read for the gateway, not forwarded: store (a boolean, default true),
// previous_response_id (a non-empty string), metadata (at most 16 string
// values, keys up to 64 and values up to 512 characters, as OpenAI limits
// them; echoed in the response object).
//
// Accepted, checked for shape, dropped and named in x-gateway-dropped, as
// they do not change what the answer is (IgnoredFields): truncation (the
// gateway never truncates; a conversation too long for the model fails as
// the provider rejects it, which is "disabled", OpenAI's default), include
// (what it can add — encrypted reasoning, tool-call sources, logprobs — the
// gateway never produces), service_tier, prompt_cache_key and
// prompt_cache_retention (OpenAI account features, not routing ones),
// max_tool_calls (it bounds built-in tools only, which are not offered),
// stream_options (only include_obfuscation, which the gateway's stream
// never needs), client_metadata (Codex's), and reasoning.summary (reasoning
// comes back, as a summary, whenever the upstream gives it). background
// false is accepted; top_logprobs 0 is too.
//
// Rejected as not supported by the gateway, with a 400 naming the field:
// background true, top_logprobs above 0, conversation, prompt (templates),
// tools other than function tools (web_search, file_search, mcp, …) and
// tool_choice naming one, input items other than the above (item_reference,
// built-in tool calls, …), custom tools, content parts input_file and input_audio, and
// images given by file_id. Any other field, at any level, is rejected as
// OpenAI rejects an unknown parameter. A null field is an absent one.
//
// Left to llm.DecodeChatRequest, which names the same params: the model's
// length and the gateway and provider objects.

// HubRequest is a decoded Responses request: the Chat Completions body
// to run, and what the gateway needs besides.
type HubRequest struct {
	Chat []byte // Chat Completions body (messages = prior + this turn's input)
	// Hub is Chat with the members it was written from, which
	// llm.Hub.Request reads rather than decoding Chat again.
	Hub                llm.Hub
	PreviousResponseID string            // "" when none
	Store              bool              // default true, as OpenAI's
	Input              []json.RawMessage // this turn's input as Chat Completions messages (to keep with the turn)
	Metadata           json.RawMessage   // echoed back in the response object (nil when absent)
	Instructions       string
	// EchoToolChoice and EchoParallel are the request's tool_choice and
	// parallel_tool_calls when it has no tools, which leaves them out of the
	// Chat Completions body: the response object echoes them all the same.
	EchoToolChoice json.RawMessage
	EchoParallel   *bool
	// Dropped are the nested hints the translation leaves out (the
	// top-level ones are IgnoredFields).
	Dropped []string

	// What build needs besides: the model, the Chat Completions fields
	// after messages (in order), and the function_call_output items whose
	// call_id must be one of prior's tool calls.
	model   json.RawMessage
	fields  []chatField
	pending []pendingOutput
}

type chatField struct {
	key   string
	value json.RawMessage
}

// pendingOutput is a function_call_output of this input answering no
// function_call of this input: prior must have its call.
type pendingOutput struct {
	param  string
	callID string
}

// IgnoredFields are the top-level fields accepted and ignored (see above).
var IgnoredFields = []string{
	"truncation", "include", "service_tier", "prompt_cache_key", "prompt_cache_retention",
	"max_tool_calls", "stream_options", "client_metadata",
}

// Limits OpenAI sets on metadata.
const (
	maxMetadata      = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
	maxFunctionName  = 64
)

// ToHub validates a Responses request and builds its Chat
// Completions body (parseRequest, then build). prior is the conversation
// of the previous response's turn (Chat Completions messages, oldest first),
// which the caller loads when PreviousResponseID is set: with a
// previous_response_id and a nil prior, ToHub only parses and
// leaves Chat nil; call build with the loaded prior then. Without a
// previous_response_id, prior should be nil.
func ToHub(body []byte, prior []json.RawMessage) (*HubRequest, error) {
	r, err := parseRequest(body)
	if err != nil {
		return nil, err
	}
	if r.PreviousResponseID != "" && prior == nil {
		return r, nil
	}
	if err := r.build(prior); err != nil {
		return nil, err
	}
	return r, nil
}

// preview is the Chat Completions body of a request that continues a kept
// turn (previous_response_id) before that turn is read: one empty user
// message stands in for the conversation, and the function call outputs
// are not matched to their calls yet. It serves what comes before the
// idempotency lookup (the request's settings: its model, routing, data
// demand, stream); it is never sent upstream, since build with the
// turn's messages (ToHub with its prior) replaces it.
func (r *HubRequest) Preview() (llm.Hub, error) {
	stand := *r
	stand.pending = nil
	if err := stand.build([]json.RawMessage{json.RawMessage(`{"role":"user","content":""}`)}); err != nil {
		return llm.Hub{}, err
	}
	return stand.Hub, nil
}

// parseRequest validates a Responses request body and translates all of
// it but the messages before this turn's; Chat is left nil until build.
func parseRequest(body []byte) (*HubRequest, error) {
	o, ok := chat.ParseObject(body)
	if !ok || firstByte(body) != '{' {
		return nil, llm.BodyError(body)
	}
	v := members(o)
	if err := checkKeys("", v, bodyMembers...); err != nil {
		return nil, err
	}
	r := &HubRequest{Store: true}
	add := func(key string, value json.RawMessage) {
		r.fields = append(r.fields, chatField{key, value})
	}

	// Features the gateway does not offer: a clear 400 rather than a
	// silently different answer.
	if present(v.get("conversation")) {
		return nil, llm.Invalid("conversation", "conversation is not supported by this gateway; continue a conversation with previous_response_id")
	}
	if present(v.get("prompt")) {
		return nil, llm.Invalid("prompt", "prompt templates are not supported by this gateway; send the prompt as instructions and input")
	}
	background, err := readBool(v.get("background"), "background")
	if err != nil {
		return nil, err
	}
	if background != nil && *background {
		return nil, llm.Invalid("background", "background mode is not supported by this gateway; send the request with background false (or without it), streaming if it is long")
	}
	if logprobs, err := readInt(v.get("top_logprobs"), "top_logprobs", 0, 20); err != nil {
		return nil, err
	} else if logprobs > 0 {
		return nil, llm.Invalid("top_logprobs", "top_logprobs is not supported by this gateway")
	}
	h := &llm.HintSet{}
	effort, err := checkIgnored(v, h)
	if err != nil {
		return nil, err
	}

	model, err := readString(v.get("model"), "model", true)
	if err != nil {
		return nil, err
	}
	r.model = jsonobj.Marshal(model)

	if r.PreviousResponseID, err = readString(v.get("previous_response_id"), "previous_response_id", false); err != nil {
		return nil, err
	}
	if present(v.get("previous_response_id")) && r.PreviousResponseID == "" {
		return nil, llm.Invalid("previous_response_id", "previous_response_id must not be empty")
	}
	if store, err := readBool(v.get("store"), "store"); err != nil {
		return nil, err
	} else if store != nil {
		r.Store = *store
	}
	if r.Instructions, err = readString(v.get("instructions"), "instructions", false); err != nil {
		return nil, err
	}
	if err := r.input(v.get("input"), h); err != nil {
		return nil, err
	}

	if present(v.get("max_output_tokens")) {
		n, err := readInt(v.get("max_output_tokens"), "max_output_tokens", 1, llm.MaxTokensBound)
		if err != nil {
			return nil, err
		}
		add("max_completion_tokens", json.RawMessage(strconv.FormatInt(n, 10)))
	}
	if effort != "" {
		add("reasoning_effort", jsonobj.Marshal(effort))
	}
	for _, p := range []struct {
		name string
		raw  jsontext.Value
		max  float64
	}{{"temperature", v.get("temperature"), 2}, {"top_p", v.get("top_p"), 1}} {
		if !present(p.raw) {
			continue
		}
		f, ok := jsonobj.Number(json.RawMessage(p.raw))
		if !ok {
			return nil, llm.Invalid(p.name, "%s must be a number", p.name)
		}
		if f < 0 || f > p.max {
			return nil, llm.Invalid(p.name, "%s must be from 0 to %g", p.name, p.max)
		}
		add(p.name, json.RawMessage(p.raw))
	}

	tools, names, err := readTools(v.get("tools"), h)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		add("tools", jsonobj.Marshal(tools))
	}
	if present(v.get("tool_choice")) {
		choice, err := readToolChoice(v.get("tool_choice"), names)
		if err != nil {
			return nil, err
		}
		if len(tools) > 0 {
			add("tool_choice", choice)
		} else {
			r.EchoToolChoice = json.RawMessage(v.get("tool_choice"))
		}
	}
	if parallel, err := readBool(v.get("parallel_tool_calls"), "parallel_tool_calls"); err != nil {
		return nil, err
	} else if parallel != nil && len(tools) > 0 {
		add("parallel_tool_calls", json.RawMessage(strconv.FormatBool(*parallel)))
	} else {
		r.EchoParallel = parallel
	}

	if present(v.get("text")) {
		format, verbosity, err := readText(v.get("text"))
		if err != nil {
			return nil, err
		}
		if format != nil {
			add("response_format", format)
		}
		if verbosity != "" {
			add("verbosity", jsonobj.Marshal(verbosity))
		}
	}

	if present(v.get("metadata")) {
		if r.Metadata, err = readMetadata(json.RawMessage(v.get("metadata"))); err != nil {
			return nil, err
		}
	}
	user, err := readString(v.get("user"), "user", false)
	if err != nil {
		return nil, err
	}
	safety, err := readString(v.get("safety_identifier"), "safety_identifier", false)
	if err != nil {
		return nil, err
	}
	if safety != "" {
		user = safety
	}
	if user != "" {
		add("user", jsonobj.Marshal(user))
	}

	if stream, err := readBool(v.get("stream"), "stream"); err != nil {
		return nil, err
	} else if stream != nil && *stream {
		add("stream", json.RawMessage("true"))
		add("stream_options", json.RawMessage(`{"include_usage":true}`))
	}
	for _, name := range llm.GatewayFields {
		if raw := v.get(name); present(raw) {
			add(name, json.RawMessage(raw))
		}
	}

	r.Dropped = h.Names
	// Without a previous response, everything build checks is known now.
	if r.PreviousResponseID == "" {
		if len(r.pending) > 0 {
			p := r.pending[0]
			return nil, llm.Invalid(p.param, "no tool call found for function call output with call_id %s", llm.Quote(p.callID))
		}
		if len(r.Input) == 0 && r.Instructions == "" {
			return nil, llm.Invalid("input", "input has no message for the model")
		}
	}
	return r, nil
}

// build sets Chat: the instructions' system message, prior (the loaded
// conversation of PreviousResponseID, oldest first), this turn's input. An
// unusable prior is an internal error, not the client's.
func (r *HubRequest) build(prior []json.RawMessage) error {
	msgs := make([]json.RawMessage, 0, 1+len(prior)+len(r.Input))
	if r.Instructions != "" {
		msgs = append(msgs, jsonobj.Marshal(chat.RequestMessage{Role: "system", Content: jsonobj.Marshal(r.Instructions)}))
	}
	calls := make(map[string]bool)
	for i, m := range prior {
		m = bytes.TrimSpace(m)
		var pm struct {
			Role      string `json:"role"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		if len(m) == 0 || m[0] != '{' || json.Unmarshal(m, &pm) != nil || pm.Role == "" {
			return &llm.Error{Code: llm.CodeInternal, Message: "internal error",
				Cause: fmt.Errorf("responses: message %d of the stored turn of %s is not a chat message", i, r.PreviousResponseID)}
		}
		for _, c := range pm.ToolCalls {
			calls[c.ID] = true
		}
		msgs = append(msgs, m)
	}
	for _, p := range r.pending {
		if !calls[p.callID] {
			return llm.Invalid(p.param, "no tool call found for function call output with call_id %s", llm.Quote(p.callID))
		}
	}
	msgs = append(msgs, r.Input...)
	if len(msgs) == 0 {
		return llm.Invalid("input", "input has no message for the model")
	}

	n := len(r.model) + 32
	for _, m := range msgs {
		n += len(m) + 1
	}
	for _, f := range r.fields {
		n += len(f.key) + len(f.value) + 4
	}
	out := llm.NewObjectWriter(n)
	out.Add("model", r.model)
	list := make([]byte, 0, n)
	list = append(list, '[')
	for i, m := range msgs {
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, m...)
	}
	if prior == nil {
		// The translation's own messages, each with its role.
		out.AddMessages(len(msgs), append(list, ']'))
	} else {
		out.Add("messages", append(list, ']'))
	}
	for _, f := range r.fields {
		out.Add(f.key, f.value)
	}
	r.Hub = out.Hub()
	r.Chat = r.Hub.Bytes()
	return nil
}

// input translates input (a string or an array of items, as written)
// into r.Input.
func (r *HubRequest) input(input []byte, h *llm.HintSet) error {
	raw := jsontext.Value(input)
	if !present(raw) {
		return llm.Invalid("input", "input is required")
	}
	if raw[0] == '"' {
		if _, err := stringValue(raw, "input"); err != nil {
			return err
		}
		r.Input = []json.RawMessage{jsonobj.Marshal(chat.RequestMessage{Role: "user", Content: json.RawMessage(raw)})}
		return nil
	}
	items, err := readArray(raw, "input", "input must be a string or an array of input items")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return llm.Invalid("input", "input must not be empty")
	}
	var out []chat.RequestMessage
	open := -1 // the assistant message in out a function_call joins, or -1
	declared := make(map[string]bool)
	for i, item := range items {
		at := fmt.Sprintf("input[%d]", i)
		m, err := readObject(item, at)
		if err != nil {
			return err
		}
		typ, err := readString(m.get("type"), at+".type", false)
		if err != nil {
			return err
		}
		if typ == "" {
			if !present(m.get("role")) {
				return llm.Invalid(at+".type", "%s.type is required (or a role, for a message)", at)
			}
			typ = ItemMessage
		}
		switch typ {
		case ItemMessage:
			msg, err := readMessage(m, at)
			if err != nil {
				return err
			}
			out = append(out, msg)
			open = -1
			if msg.Role == "assistant" {
				open = len(out) - 1
			}
		case ItemFunctionCall:
			c, err := readFunctionCall(m, at)
			if err != nil {
				return err
			}
			declared[c.ID] = true
			if open < 0 {
				out = append(out, chat.RequestMessage{Role: "assistant", Content: json.RawMessage("null")})
				open = len(out) - 1
			} else if string(out[open].Content) == `""` {
				out[open].Content = json.RawMessage("null")
			}
			out[open].ToolCalls = append(out[open].ToolCalls, c)
		case ItemFunctionCallOutput:
			msg, err := readFunctionOutput(m, at)
			if err != nil {
				return err
			}
			if !declared[msg.ToolCallID] {
				r.pending = append(r.pending, pendingOutput{param: at + ".call_id", callID: msg.ToolCallID})
			}
			out = append(out, msg)
			open = -1
		case ItemReasoning:
			// An earlier output's reasoning, sent back: encrypted for the
			// upstream that wrote it, which no other can read.
			if err := checkKeys(at, m, "type", "id", "summary", "content", "encrypted_content", "status"); err != nil {
				return err
			}
			h.Add("input[reasoning]")
		case ItemReference:
			return llm.Invalid(at+".type", "%s: item_reference is not supported by this gateway; continue from a stored response with previous_response_id, or send the item itself", at)
		default:
			return llm.Invalid(at+".type", "%s.type %s is not supported by this gateway (only message, function_call, function_call_output and reasoning items are)", at, llm.Quote(typ))
		}
	}
	r.Input = make([]json.RawMessage, len(out))
	for i, msg := range out {
		r.Input[i] = jsonobj.Marshal(msg)
	}
	return nil
}

// readMessage translates a message item.
func readMessage(m members, at string) (chat.RequestMessage, error) {
	var msg chat.RequestMessage
	if err := checkKeys(at, m, "type", "role", "content", "id", "status", "phase"); err != nil {
		return msg, err
	}
	// phase marks an assistant message as commentary or the final answer,
	// for the SDKs to send back as they got it: checked, then left out, as
	// id and status are (Chat Completions has no such field).
	switch phase, err := readString(m.get("phase"), at+".phase", false); {
	case err != nil:
		return msg, err
	case phase != "" && phase != "commentary" && phase != "final_answer":
		return msg, llm.Invalid(at+".phase", "%s.phase must be \"commentary\" or \"final_answer\"", at)
	}
	clientRole, err := readString(m.get("role"), at+".role", true)
	if err != nil {
		return msg, err
	}
	role := clientRole
	switch role {
	case "user", "assistant", "system":
	case "developer":
		role = "system"
	default:
		return msg, llm.Invalid(at+".role", "%s.role must be \"user\", \"assistant\", \"system\" or \"developer\"", at)
	}
	if _, err := readString(m.get("status"), at+".status", false); err != nil {
		return msg, err
	}
	msg.Role = role
	content, parts, err := stringOrParts(m.get("content"), "content", at, "content parts")
	if err != nil {
		return msg, err
	}
	if content != nil {
		msg.Content = content
		return msg, nil
	}
	if len(parts) == 0 {
		return msg, llm.Invalid(at+".content", "%s.content must not be empty", at)
	}
	out := make([]any, 0, len(parts))
	assistant := role == "assistant"
	for i, raw := range parts {
		pat := fmt.Sprintf("%s.content[%d]", at, i)
		pm, typ, err := readTyped(raw, pat)
		if err != nil {
			return msg, err
		}
		switch {
		case typ == PartInputText && !assistant:
			text, err := partText(pm, pm.get("text"), pat, "text")
			if err != nil {
				return msg, err
			}
			out = append(out, chat.TextPart{Type: chat.PartText, Text: text})
		case typ == PartInputImage && role == RoleUser:
			img, err := readImage(pm, pat)
			if err != nil {
				return msg, err
			}
			out = append(out, img)
		case typ == PartOutputText && assistant:
			if err := checkKeys(pat, pm, "type", "text", "annotations", "logprobs"); err != nil {
				return msg, err
			}
			text, err := readString(pm.get("text"), pat+".text", false)
			if err != nil {
				return msg, err
			}
			if !present(pm.get("text")) {
				return msg, llm.Invalid(pat+".text", "%s.text is required", pat)
			}
			out = append(out, chat.TextPart{Type: chat.PartText, Text: text})
		case typ == PartRefusal && assistant:
			text, err := partText(pm, pm.get("refusal"), pat, "refusal")
			if err != nil {
				return msg, err
			}
			out = append(out, chat.RefusalPart{Type: chat.PartRefusal, Refusal: text})
		case typ == PartInputText || typ == PartInputImage || typ == PartOutputText || typ == PartRefusal:
			return msg, llm.Invalid(pat+".type", "%s: %s parts are not allowed in a %s message (%s)", pat, typ, clientRole, allowedParts(role))
		case typ == PartInputFile || typ == PartInputAudio:
			return msg, llm.Invalid(pat+".type", "%s: %s parts are not supported by this gateway", pat, typ)
		default:
			return msg, llm.Invalid(pat+".type", "%s.type %s is not a content part type (%s)", pat, llm.Quote(typ), allowedParts(role))
		}
	}
	msg.Content = jsonobj.Marshal(out)
	return msg, nil
}

func allowedParts(role string) string {
	switch role {
	case "assistant":
		return "an assistant message holds output_text and refusal parts"
	case "user":
		return "a user message holds input_text and input_image parts"
	}
	return "a system or developer message holds input_text parts"
}

// partText reads a part of {type, <name>: string} (value is its
// member name); the string may be empty but must be there.
func partText(p members, value jsontext.Value, at, name string) (string, error) {
	if err := checkKeys(at, p, "type", name); err != nil {
		return "", err
	}
	if !present(value) {
		return "", llm.Invalid(at+"."+name, "%s.%s is required", at, name)
	}
	return readString(value, at+"."+name, false)
}

// readImage translates an input_image part.
func readImage(m members, at string) (chat.ImagePart, error) {
	p := chat.ImagePart{Type: chat.PartImageURL}
	if err := checkKeys(at, m, "type", "image_url", "file_id", "detail"); err != nil {
		return p, err
	}
	if present(m.get("file_id")) {
		return p, llm.Invalid(at+".file_id", "%s.file_id is not supported by this gateway (it keeps no files); send the image as image_url, an https or data: URL", at)
	}
	u, err := readString(m.get("image_url"), at+".image_url", true)
	if err != nil {
		return p, err
	}
	lower := strings.ToLower(u)
	switch {
	case strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "http://"):
	case strings.HasPrefix(lower, "data:image/"):
		meta, _, ok := strings.Cut(u, ",")
		if !ok || !strings.HasSuffix(strings.ToLower(meta), ";base64") {
			return p, llm.Invalid(at+".image_url", "%s.image_url: a data URL must be base64 (data:image/png;base64,...)", at)
		}
	default:
		return p, llm.Invalid(at+".image_url", "%s.image_url must be an http or https URL or a data:image/...;base64 URL", at)
	}
	p.ImageURL.URL = u
	detail, err := readString(m.get("detail"), at+".detail", false)
	if err != nil {
		return p, err
	}
	switch detail {
	case "", "auto", "low", "high":
		p.ImageURL.Detail = detail
	case "original":
		// The Responses API's full resolution, which Chat Completions
		// has no word for: its nearest is "high".
		p.ImageURL.Detail = "high"
	default:
		return p, llm.Invalid(at+".detail", "%s.detail must be \"auto\", \"low\", \"high\" or \"original\"", at)
	}
	return p, nil
}

// readFunctionCall translates a function_call item into a tool call.
func readFunctionCall(m members, at string) (chat.ToolCall, error) {
	var c chat.ToolCall
	c.Type = "function"
	if err := checkKeys(at, m, "type", "id", "call_id", "name", "arguments", "status"); err != nil {
		return c, err
	}
	var err error
	if c.ID, err = readCallID(m, at); err != nil {
		return c, err
	}
	if c.Function.Name, err = readString(m.get("name"), at+".name", true); err != nil {
		return c, err
	}
	if !present(m.get("arguments")) {
		return c, llm.Invalid(at+".arguments", "%s.arguments is required", at)
	}
	if c.Function.Arguments, err = readString(m.get("arguments"), at+".arguments", false); err != nil {
		return c, err
	}
	return c, nil
}

// readCallID reads the members a function_call item and its
// function_call_output share: the item's own id and status, checked and
// dropped, and the call_id, which is returned.
func readCallID(m members, at string) (string, error) {
	if _, err := readString(m.get("id"), at+".id", false); err != nil {
		return "", err
	}
	if _, err := readString(m.get("status"), at+".status", false); err != nil {
		return "", err
	}
	return readString(m.get("call_id"), at+".call_id", true)
}

// readFunctionOutput translates a function_call_output item into a tool
// message.
func readFunctionOutput(m members, at string) (chat.RequestMessage, error) {
	msg := chat.RequestMessage{Role: "tool"}
	if err := checkKeys(at, m, "type", "id", "call_id", "output", "status"); err != nil {
		return msg, err
	}
	var err error
	if msg.ToolCallID, err = readCallID(m, at); err != nil {
		return msg, err
	}
	output, parts, err := stringOrParts(m.get("output"), "output", at, "input_text parts")
	if err != nil {
		return msg, err
	}
	if output != nil {
		msg.Content = output
		return msg, nil
	}
	out := make([]chat.TextPart, 0, len(parts))
	for i, raw := range parts {
		pat := fmt.Sprintf("%s.output[%d]", at, i)
		pm, typ, err := readTyped(raw, pat)
		if err != nil {
			return msg, err
		}
		if typ != PartInputText {
			return msg, llm.Invalid(pat+".type", "%s: %s parts in a function_call_output are not supported by this gateway (only input_text is)", pat, llm.Quote(typ))
		}
		text, err := partText(pm, pm.get("text"), pat, "text")
		if err != nil {
			return msg, err
		}
		out = append(out, chat.TextPart{Type: chat.PartText, Text: text})
	}
	msg.Content = llm.TextContent(out)
	return msg, nil
}

// stringOrParts reads the required member field (raw) of the item at
// at, a string or an array of parts (what names them in the error): the
// string as it is written, or the parts.
func stringOrParts(raw jsontext.Value, field, at, what string) (json.RawMessage, []json.RawMessage, error) {
	fat := at + "." + field
	if !present(raw) {
		return nil, nil, llm.Invalid(fat, "%s is required", fat)
	}
	if raw[0] == '"' {
		if _, err := stringValue(raw, fat); err != nil {
			return nil, nil, err
		}
		return json.RawMessage(raw), nil, nil
	}
	parts, err := readArray(raw, fat, fat+" must be a string or an array of "+what)
	if err != nil {
		return nil, nil, err
	}
	return nil, parts, nil
}

// readTools translates the function tools, those of namespaces flattened;
// names are their names. Built-in tools are dropped and named. Both are
// nil when the request has no tools.
func readTools(raw jsontext.Value, h *llm.HintSet) ([]chat.Tool, map[string]bool, error) {
	if !present(raw) {
		return nil, nil, nil
	}
	list, err := readArray(raw, "tools", "tools must be an array of tools")
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]bool, len(list))
	tools := make([]chat.Tool, 0, len(list))
	for i, t := range list {
		at := fmt.Sprintf("tools[%d]", i)
		m, typ, err := readTyped(t, at)
		if err != nil {
			return nil, nil, err
		}
		switch typ {
		case ToolFunction:
			out, err := readFunctionTool(m, at, names)
			if err != nil {
				return nil, nil, err
			}
			tools = append(tools, out)
		case ToolNamespace:
			if err := checkKeys(at, m, "type", "name", "description", "tools"); err != nil {
				return nil, nil, err
			}
			if _, err := readString(m.get("name"), at+".name", true); err != nil {
				return nil, nil, err
			}
			if _, err := readString(m.get("description"), at+".description", false); err != nil {
				return nil, nil, err
			}
			if !present(m.get("tools")) {
				return nil, nil, llm.Invalid(at+".tools", "%s.tools is required", at)
			}
			inner, err := readArray(m.get("tools"), at+".tools", at+".tools must be an array of function tools")
			if err != nil {
				return nil, nil, err
			}
			for j, it := range inner {
				iat := fmt.Sprintf("%s.tools[%d]", at, j)
				im, ityp, err := readTyped(it, iat)
				if err != nil {
					return nil, nil, err
				}
				if ityp != ToolFunction {
					return nil, nil, llm.Invalid(iat+".type", "%s.type %s is not supported in a namespace (only function tools are)", iat, llm.Quote(ityp))
				}
				out, err := readFunctionTool(im, iat, names)
				if err != nil {
					return nil, nil, err
				}
				tools = append(tools, out)
			}
			h.Add("tools[namespace]")
		case "web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11",
			"file_search", "code_interpreter", "image_generation", "mcp", "local_shell", "shell",
			"computer_use_preview", "computer_use", "apply_patch":
			h.Add("tools[" + typ + "]")
		default:
			return nil, nil, llm.Invalid(at+".type", "%s.type %s is not supported by this gateway (function, namespace and built-in tools are)", at, llm.Quote(typ))
		}
	}
	return tools, names, nil
}

// readFunctionTool translates a function tool: its name (unique among
// names, the names so far, to which it is added), description, JSON
// schema and strict.
func readFunctionTool(m members, at string, names map[string]bool) (chat.Tool, error) {
	var out chat.Tool
	if err := checkKeys(at, m, "type", "name", "description", "parameters", "strict"); err != nil {
		return out, err
	}
	out.Type = "function"
	var err error
	if out.Function.Name, err = readString(m.get("name"), at+".name", true); err != nil {
		return out, err
	}
	if !validName(out.Function.Name) {
		return out, llm.Invalid(at+".name", "%s.name must be 1 to %d letters, digits, underscores and dashes", at, maxFunctionName)
	}
	if names[out.Function.Name] {
		return out, llm.Invalid(at+".name", "%s.name: tool names must be unique", at)
	}
	names[out.Function.Name] = true
	if out.Function.Description, err = readString(m.get("description"), at+".description", false); err != nil {
		return out, err
	}
	if out.Function.Parameters, err = objectMember(m.get("parameters"), at+".parameters", false); err != nil {
		return out, err
	}
	if strict, err := readBool(m.get("strict"), at+".strict"); err != nil {
		return out, err
	} else if strict != nil {
		out.Function.Strict = json.RawMessage(strconv.FormatBool(*strict))
	}
	return out, nil
}

// validName is OpenAI's rule for function names: ^[a-zA-Z0-9_-]{1,64}$.
func validName(s string) bool {
	if len(s) == 0 || len(s) > maxFunctionName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// readToolChoice translates tool_choice.
func readToolChoice(raw jsontext.Value, tools map[string]bool) (json.RawMessage, error) {
	const param = "tool_choice"
	if raw[0] == '"' {
		s, err := stringValue(raw, param)
		if err != nil {
			return nil, err
		}
		switch s {
		case "auto", "none":
		case "required":
			if len(tools) == 0 {
				return nil, llm.Invalid(param, "tool_choice \"required\" requires tools")
			}
		default:
			return nil, llm.Invalid(param, "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"name\":...}")
		}
		return jsonobj.Marshal(s), nil
	}
	m, err := readObject(raw, param)
	if err != nil {
		return nil, llm.Invalid(param, "tool_choice must be a string or an object")
	}
	typ, err := readString(m.get("type"), "tool_choice.type", true)
	if err != nil {
		return nil, err
	}
	if typ != ToolFunction {
		return nil, llm.Invalid("tool_choice.type", "tool_choice.type %s is not supported by this gateway (only function is)", llm.Quote(typ))
	}
	if err := checkKeys(param, m, "type", "name"); err != nil {
		return nil, err
	}
	name, err := readString(m.get("name"), "tool_choice.name", true)
	if err != nil {
		return nil, err
	}
	if !tools[name] {
		return nil, llm.Invalid("tool_choice.name", "tool_choice.name %s is not one of the tools", llm.Quote(name))
	}
	return jsonobj.Marshal(chat.NamedToolChoice{Type: chat.ToolTypeFunction, Function: chat.NamedFunc{Name: name}}), nil
}

// readText translates text: its format, as a response_format (nil for plain
// text), and its verbosity ("" for none).
func readText(raw jsontext.Value) (format json.RawMessage, verbosity string, err error) {
	m, err := readObject(raw, "text")
	if err != nil {
		return nil, "", err
	}
	if err := checkKeys("text", m, "format", "verbosity"); err != nil {
		return nil, "", err
	}
	verbosity, err = readString(m.get("verbosity"), "text.verbosity", false)
	if err != nil {
		return nil, "", err
	}
	switch verbosity {
	case "", "low", "medium", "high":
	default:
		return nil, "", llm.Invalid("text.verbosity", "text.verbosity must be \"low\", \"medium\" or \"high\"")
	}
	format, err = readFormat(m.get("format"))
	return format, verbosity, err
}

// readFormat translates text.format.
func readFormat(raw jsontext.Value) (json.RawMessage, error) {
	if !present(raw) {
		return nil, nil
	}
	const at = "text.format"
	f, typ, err := readTyped(raw, at)
	if err != nil {
		return nil, err
	}
	keys := func(allowed ...string) error { return checkKeys(at, f, allowed...) }
	switch typ {
	case FormatText:
		return nil, keys("type")
	case FormatJSONObject:
		if err := keys("type"); err != nil {
			return nil, err
		}
		return jsonobj.Marshal(chat.ResponseFormat{Type: chat.FormatJSONObject}), nil
	case FormatJSONSchema:
	default:
		return nil, llm.Invalid(at+".type", "%s.type must be \"text\", \"json_schema\" or \"json_object\"", at)
	}
	if err := keys("type", "name", "schema", "description", "strict"); err != nil {
		return nil, err
	}
	var js chat.JSONSchema
	if js.Name, err = readString(f.get("name"), at+".name", true); err != nil {
		return nil, err
	}
	if !validName(js.Name) {
		return nil, llm.Invalid(at+".name", "%s.name must be 1 to %d letters, digits, underscores and dashes", at, maxFunctionName)
	}
	if js.Description, err = readString(f.get("description"), at+".description", false); err != nil {
		return nil, err
	}
	if js.Schema, err = objectMember(f.get("schema"), at+".schema", true); err != nil {
		return nil, err
	}
	if strict, err := readBool(f.get("strict"), at+".strict"); err != nil {
		return nil, err
	} else if strict != nil {
		js.Strict = json.RawMessage(strconv.FormatBool(*strict))
	}
	return jsonobj.Marshal(chat.ResponseFormat{Type: chat.FormatJSONSchema, JSONSchema: &js}), nil
}

// readMetadata checks metadata, OpenAI's map of at most 16 strings, and
// returns it compacted.
func readMetadata(raw json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, llm.Invalid("metadata", "metadata must be an object")
	}
	if len(m) > maxMetadata {
		return nil, llm.Invalid("metadata", "metadata must have at most %d keys", maxMetadata)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Sorted, so the error does not depend on map order.
	sort.Strings(keys)
	for _, k := range keys {
		name := k
		if len(name) > 64 || !utf8.ValidString(name) {
			name = "(unprintable)"
		}
		at := "metadata." + name
		if len(k) > maxMetadataKey {
			return nil, llm.Invalid(at, "metadata keys must be at most %d characters", maxMetadataKey)
		}
		v, err := stringValue(jsontext.Value(m[k]), at)
		if err != nil {
			return nil, err
		}
		if len(v) > maxMetadataValue {
			return nil, llm.Invalid(at, "%s must be at most %d characters", at, maxMetadataValue)
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, llm.Invalid("metadata", "metadata must be an object")
	}
	return b.Bytes(), nil
}

// checkIgnored checks the shape of the ignored fields (a wrong type is
// still the client's mistake) and returns reasoning.effort, which is
// translated.
func checkIgnored(v members, h *llm.HintSet) (effort string, err error) {
	if present(v.get("client_metadata")) && v.get("client_metadata")[0] != '{' {
		return "", llm.Invalid("client_metadata", "client_metadata must be an object")
	}
	for _, name := range []string{"service_tier", "prompt_cache_key", "prompt_cache_retention"} {
		if _, err := readString(v.get(name), name, false); err != nil {
			return "", err
		}
	}
	truncation, err := readString(v.get("truncation"), "truncation", false)
	if err != nil {
		return "", err
	}
	if truncation != "" && truncation != "auto" && truncation != "disabled" {
		return "", llm.Invalid("truncation", "truncation must be \"auto\" or \"disabled\"")
	}
	if _, err := readInt(v.get("max_tool_calls"), "max_tool_calls", 0, math.MaxInt32); err != nil {
		return "", err
	}
	if present(v.get("include")) {
		list, err := readArray(v.get("include"), "include", "include must be an array of strings")
		if err != nil {
			return "", err
		}
		for i, s := range list {
			if _, err := stringValue(s, fmt.Sprintf("include[%d]", i)); err != nil {
				return "", err
			}
		}
	}
	if present(v.get("reasoning")) {
		reasoning := []string{"effort", "summary", "generate_summary"}
		m, err := readObject(v.get("reasoning"), "reasoning")
		if err != nil {
			return "", err
		}
		if err := checkKeys("reasoning", m, reasoning...); err != nil {
			return "", err
		}
		for _, name := range reasoning {
			if _, err := readString(m.get(name), "reasoning."+name, false); err != nil {
				return "", err
			}
		}
		effort, _ = readString(m.get("effort"), "reasoning.effort", false)
		switch effort {
		case "", "none", "minimal", "low", "medium", "high", "xhigh":
		default:
			return "", llm.Invalid("reasoning.effort", "reasoning.effort must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" or \"xhigh\"")
		}
		if present(m.get("summary")) || present(m.get("generate_summary")) {
			h.Add("reasoning.summary")
		}
	}
	if present(v.get("stream_options")) {
		m, err := readObject(v.get("stream_options"), "stream_options")
		if err != nil {
			return "", err
		}
		if err := checkKeys("stream_options", m, "include_obfuscation"); err != nil {
			return "", err
		}
		if _, err := readBool(m.get("include_obfuscation"), "stream_options.include_obfuscation"); err != nil {
			return "", err
		}
	}
	return effort, nil
}

// The readers of a view's members, each a JSON value as the client wrote
// it: nil when absent. A null member is an absent one.

// firstByte is body's first byte after white space, or 0.
func firstByte(body []byte) byte {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 {
		return t[0]
	}
	return 0
}

func present(raw jsontext.Value) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// members are an object of the request as written.
type members chat.Object

// get is the value of the member name (the last, if given twice); nil when
// absent.
func (o members) get(name string) jsontext.Value {
	return jsontext.Value(chat.Object(o).Get(name))
}

// bodyMembers are the members a request body may have: those read, the
// gateway's and the ignored ones.
var bodyMembers = slices.Concat([]string{
	"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools",
	"tool_choice", "parallel_tool_calls", "text", "metadata", "user", "safety_identifier", "stream",
	"store", "previous_response_id", "background", "top_logprobs", "conversation", "prompt",
	"reasoning",
}, llm.GatewayFields, IgnoredFields)

// readObject reads a member that must be an object.
func readObject(raw []byte, param string) (members, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, llm.Invalid(param, "%s must be an object", param)
	}
	o, ok := chat.ParseObject(raw)
	if !ok {
		return nil, llm.Invalid(param, "%s must be an object", param)
	}
	return members(o), nil
}

// readTyped reads a member that must be an object with a type, and its
// type.
func readTyped(raw []byte, at string) (members, string, error) {
	o, err := readObject(raw, at)
	if err != nil {
		return nil, "", err
	}
	typ, err := readString(o.get("type"), at+".type", true)
	return o, typ, err
}

// objectMember reads a member that holds a JSON schema object, kept as
// written; a required one must be there. It is nil when absent.
func objectMember(raw jsontext.Value, param string, required bool) (json.RawMessage, error) {
	if !present(raw) {
		if required {
			return nil, llm.Invalid(param, "%s is required", param)
		}
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, llm.Invalid(param, "%s must be a JSON schema object", param)
	}
	return json.RawMessage(raw), nil
}

// readArray reads a member that must be an array (msg says so).
func readArray(raw jsontext.Value, param, msg string) ([]json.RawMessage, error) {
	if len(raw) == 0 || raw[0] != '[' {
		return nil, llm.Invalid(param, "%s", msg)
	}
	a, ok := chat.ParseArray(raw)
	if !ok {
		return nil, llm.Invalid(param, "%s", msg)
	}
	return a, nil
}

// readString reads a string member; a required one must be there and not
// empty.
func readString(raw jsontext.Value, param string, required bool) (string, error) {
	if !present(raw) {
		if required {
			return "", llm.Invalid(param, "%s is required", param)
		}
		return "", nil
	}
	s, err := stringValue(raw, param)
	if err != nil {
		return "", err
	}
	if required && s == "" {
		return "", llm.Invalid(param, "%s must not be empty", param)
	}
	return s, nil
}

// stringValue reads a string, invalid UTF-8 replaced as encoding/json
// replaces it.
func stringValue(raw []byte, param string) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", llm.Invalid(param, "%s must be a string", param)
	}
	return s, nil
}

// readBool reads a boolean member; nil when absent.
func readBool(raw jsontext.Value, param string) (*bool, error) {
	if !present(raw) {
		return nil, nil
	}
	var b bool
	switch string(raw) {
	case "true":
		b = true
	case "false":
	default:
		return nil, llm.Invalid(param, "%s must be a boolean", param)
	}
	return &b, nil
}

// readInt reads an integer in [lo, hi] (1024 and 1024.0 alike); 0 when
// absent.
func readInt(raw jsontext.Value, param string, lo, hi int64) (int64, error) {
	if !present(raw) {
		return 0, nil
	}
	f, ok := jsonobj.Number(json.RawMessage(raw))
	if !ok || f != math.Trunc(f) {
		return 0, llm.Invalid(param, "%s must be an integer", param)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, llm.Invalid(param, "%s must be an integer from %d to %d", param, lo, hi)
	}
	return int64(f), nil
}

// checkKeys rejects a member of the object o at param (the body when "")
// that is not allowed. Of several, it names the first in sorted order.
func checkKeys(param string, o members, allowed ...string) error {
	name, ok := "", false
	for _, m := range o {
		k := m.Key
		if !utf8.ValidString(k) {
			k = string([]rune(k)) // each byte that is not UTF-8 as U+FFFD, as encoding/json reads it
		}
		if !slices.Contains(allowed, k) && (!ok || k < name) {
			name, ok = k, true
		}
	}
	if !ok {
		return nil
	}
	if !utf8.ValidString(name) || len(name) > 64 {
		name = "(unprintable)"
	}
	if name == "" {
		name = `""` // an empty key, named so that the error names a param
	}
	if param != "" {
		name = param + "." + name
	}
	return llm.Invalid(name, "unknown field %s", name)
}

// InputMessages are Responses input or output items (or an input string)
// as Chat Completions messages, as a request's input is translated.
func InputMessages(raw json.RawMessage) ([]json.RawMessage, error) {
	r := &HubRequest{}
	if err := r.input(raw, &llm.HintSet{}); err != nil {
		return nil, err
	}
	return r.Input, nil
}
