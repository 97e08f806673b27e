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

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// The OpenAI Responses request, as POST /api/v1/responses reads it.
//
// Decoding is two steps, because a request continuing an earlier response
// needs that response's stored turn, and only the request says which:
//
//	r, err := parseResponses(body)   // validate; r.PreviousResponseID, r.Input, ...
//	prior := load(r.PreviousResponseID) // when set: the stored conversation
//	err = r.build(prior)              // r.Chat
//
// decodeResponses(body, prior) does both; with a previous_response_id and a
// nil prior it stops after the first and leaves Chat nil.
//
// The Chat Completions body is then decoded with llm.DecodeChatRequest like
// any chat request, so the router, the idempotency layer and billing run
// unchanged. Its messages are: a system message of instructions (if any),
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
// they do not change what the answer is (rsIgnoredFields): truncation (the
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

// responsesRequest is a decoded Responses request: the Chat Completions body
// to run, and what the gateway needs besides.
type responsesRequest struct {
	Chat               []byte            // Chat Completions body (messages = prior + this turn's input)
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
	// top-level ones are rsIgnoredFields).
	Dropped []string

	// What build needs besides: the model, the Chat Completions fields
	// after messages (in order), and the function_call_output items whose
	// call_id must be one of prior's tool calls.
	model   json.RawMessage
	fields  []rsField
	pending []rsPending
}

type rsField struct {
	key   string
	value json.RawMessage
}

// rsPending is a function_call_output of this input answering no
// function_call of this input: prior must have its call.
type rsPending struct {
	param  string
	callID string
}

// rsIgnoredFields are the top-level fields accepted and ignored (see above).
var rsIgnoredFields = []string{
	"truncation", "include", "service_tier", "prompt_cache_key", "prompt_cache_retention",
	"max_tool_calls", "stream_options", "client_metadata",
}

// Limits OpenAI sets on metadata.
const (
	rsMaxMetadata        = 16
	rsMaxMetadataKey     = 64
	rsMaxMetadataValue   = 512
	rsMaxFunctionNameLen = 64
)

// decodeResponses validates a Responses request and builds its Chat
// Completions body (parseResponses, then build). prior is the conversation
// of the previous response's turn (Chat Completions messages, oldest first),
// which the caller loads when PreviousResponseID is set: with a
// previous_response_id and a nil prior, decodeResponses only parses and
// leaves Chat nil; call build with the loaded prior then. Without a
// previous_response_id, prior should be nil.
func decodeResponses(body []byte, prior []json.RawMessage) (*responsesRequest, error) {
	r, err := parseResponses(body)
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
// turn's messages (decodeResponses with its prior) replaces it.
func (r *responsesRequest) preview() ([]byte, error) {
	stand := *r
	stand.pending = nil
	if err := stand.build([]json.RawMessage{json.RawMessage(`{"role":"user","content":""}`)}); err != nil {
		return nil, err
	}
	return stand.Chat, nil
}

// parseResponses validates a Responses request body and translates all of
// it but the messages before this turn's; Chat is left nil until build.
func parseResponses(body []byte) (*responsesRequest, error) {
	fields, err := clientapi.ObjectBody(body)
	if err != nil {
		return nil, err
	}
	known := []string{
		"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools", "tool_choice",
		"parallel_tool_calls", "text", "metadata", "user", "safety_identifier", "stream", "store",
		"previous_response_id", "background", "top_logprobs", "conversation", "prompt", "reasoning",
	}
	if err := clientapi.Keys(fields, "", slices.Concat(known, llm.GatewayFields, rsIgnoredFields)...); err != nil {
		return nil, err
	}
	r := &responsesRequest{Store: true}
	add := func(key string, value json.RawMessage) {
		r.fields = append(r.fields, rsField{key, value})
	}

	// Features the gateway does not offer: a clear 400 rather than a
	// silently different answer.
	if _, ok := clientapi.Present(fields, "conversation"); ok {
		return nil, clientapi.Invalid("conversation", "conversation is not supported by this gateway; continue a conversation with previous_response_id")
	}
	if _, ok := clientapi.Present(fields, "prompt"); ok {
		return nil, clientapi.Invalid("prompt", "prompt templates are not supported by this gateway; send the prompt as instructions and input")
	}
	background, err := clientapi.BoolField(fields, "background", "background")
	if err != nil {
		return nil, err
	}
	if background != nil && *background {
		return nil, clientapi.Invalid("background", "background mode is not supported by this gateway; send the request with background false (or without it), streaming if it is long")
	}
	if logprobs, err := clientapi.IntField(fields, "top_logprobs", "top_logprobs", 0, 20, false); err != nil {
		return nil, err
	} else if logprobs > 0 {
		return nil, clientapi.Invalid("top_logprobs", "top_logprobs is not supported by this gateway")
	}
	h := &clientapi.HintSet{}
	effort, err := rsCheckIgnored(fields, h)
	if err != nil {
		return nil, err
	}

	model, err := clientapi.StringField(fields, "model", "model", true)
	if err != nil {
		return nil, err
	}
	r.model = clientapi.JSON(model)

	if r.PreviousResponseID, err = clientapi.StringField(fields, "previous_response_id", "previous_response_id", false); err != nil {
		return nil, err
	}
	if _, ok := clientapi.Present(fields, "previous_response_id"); ok && r.PreviousResponseID == "" {
		return nil, clientapi.Invalid("previous_response_id", "previous_response_id must not be empty")
	}
	if store, err := clientapi.BoolField(fields, "store", "store"); err != nil {
		return nil, err
	} else if store != nil {
		r.Store = *store
	}
	if r.Instructions, err = clientapi.StringField(fields, "instructions", "instructions", false); err != nil {
		return nil, err
	}
	if err := r.input(fields, h); err != nil {
		return nil, err
	}

	if _, ok := clientapi.Present(fields, "max_output_tokens"); ok {
		n, err := clientapi.IntField(fields, "max_output_tokens", "max_output_tokens", 1, clientapi.MaxTokens, false)
		if err != nil {
			return nil, err
		}
		add("max_completion_tokens", json.RawMessage(strconv.FormatInt(n, 10)))
	}
	if effort != "" {
		add("reasoning_effort", clientapi.JSON(effort))
	}
	for _, p := range []struct {
		name string
		max  float64
	}{{"temperature", 2}, {"top_p", 1}} {
		raw, ok := clientapi.Present(fields, p.name)
		if !ok {
			continue
		}
		f, ok := clientapi.Number(raw)
		if !ok {
			return nil, clientapi.Invalid(p.name, "%s must be a number", p.name)
		}
		if f < 0 || f > p.max {
			return nil, clientapi.Invalid(p.name, "%s must be from 0 to %g", p.name, p.max)
		}
		add(p.name, raw)
	}

	tools, names, err := rsTools(fields, h)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		add("tools", clientapi.JSON(tools))
	}
	if raw, ok := clientapi.Present(fields, "tool_choice"); ok {
		choice, err := rsToolChoice(raw, names)
		if err != nil {
			return nil, err
		}
		if len(tools) > 0 {
			add("tool_choice", choice)
		} else {
			r.EchoToolChoice = raw
		}
	}
	if parallel, err := clientapi.BoolField(fields, "parallel_tool_calls", "parallel_tool_calls"); err != nil {
		return nil, err
	} else if parallel != nil && len(tools) > 0 {
		add("parallel_tool_calls", json.RawMessage(strconv.FormatBool(*parallel)))
	} else {
		r.EchoParallel = parallel
	}

	if raw, ok := clientapi.Present(fields, "text"); ok {
		format, verbosity, err := rsText(raw)
		if err != nil {
			return nil, err
		}
		if format != nil {
			add("response_format", format)
		}
		if verbosity != "" {
			add("verbosity", clientapi.JSON(verbosity))
		}
	}

	if raw, ok := clientapi.Present(fields, "metadata"); ok {
		if r.Metadata, err = rsMetadata(raw); err != nil {
			return nil, err
		}
	}
	user, err := clientapi.StringField(fields, "user", "user", false)
	if err != nil {
		return nil, err
	}
	safety, err := clientapi.StringField(fields, "safety_identifier", "safety_identifier", false)
	if err != nil {
		return nil, err
	}
	if safety != "" {
		user = safety
	}
	if user != "" {
		add("user", clientapi.JSON(user))
	}

	if stream, err := clientapi.BoolField(fields, "stream", "stream"); err != nil {
		return nil, err
	} else if stream != nil && *stream {
		add("stream", json.RawMessage("true"))
		add("stream_options", json.RawMessage(`{"include_usage":true}`))
	}
	for _, name := range llm.GatewayFields {
		if raw, ok := clientapi.Present(fields, name); ok {
			add(name, raw)
		}
	}

	r.Dropped = h.Names
	// Without a previous response, everything build checks is known now.
	if r.PreviousResponseID == "" {
		if len(r.pending) > 0 {
			p := r.pending[0]
			return nil, clientapi.Invalid(p.param, "no tool call found for function call output with call_id %s", clientapi.Quote(p.callID))
		}
		if len(r.Input) == 0 && r.Instructions == "" {
			return nil, clientapi.Invalid("input", "input has no message for the model")
		}
	}
	return r, nil
}

// build sets Chat: the instructions' system message, prior (the loaded
// conversation of PreviousResponseID, oldest first), this turn's input. An
// unusable prior is an internal error, not the client's.
func (r *responsesRequest) build(prior []json.RawMessage) error {
	msgs := make([]json.RawMessage, 0, 1+len(prior)+len(r.Input))
	if r.Instructions != "" {
		msgs = append(msgs, clientapi.JSON(clientapi.ChatMessage{Role: "system", Content: clientapi.JSON(r.Instructions)}))
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
			return clientapi.Invalid(p.param, "no tool call found for function call output with call_id %s", clientapi.Quote(p.callID))
		}
	}
	msgs = append(msgs, r.Input...)
	if len(msgs) == 0 {
		return clientapi.Invalid("input", "input has no message for the model")
	}

	n := len(r.model) + 32
	for _, m := range msgs {
		n += len(m) + 1
	}
	for _, f := range r.fields {
		n += len(f.key) + len(f.value) + 4
	}
	out := clientapi.NewObject(n)
	out.Add("model", r.model)
	list := make([]byte, 0, n)
	list = append(list, '[')
	for i, m := range msgs {
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, m...)
	}
	out.Add("messages", append(list, ']'))
	for _, f := range r.fields {
		out.Add(f.key, f.value)
	}
	r.Chat = out.Bytes()
	return nil
}

// input translates input into r.Input.
func (r *responsesRequest) input(fields map[string]json.RawMessage, h *clientapi.HintSet) error {
	raw, ok := clientapi.Present(fields, "input")
	if !ok {
		return clientapi.Invalid("input", "input is required")
	}
	if raw[0] == '"' {
		if _, err := clientapi.StringValue(raw, "input"); err != nil {
			return err
		}
		r.Input = []json.RawMessage{clientapi.JSON(clientapi.ChatMessage{Role: "user", Content: raw})}
		return nil
	}
	items, err := clientapi.Array(raw, "input", "input must be a string or an array of input items")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return clientapi.Invalid("input", "input must not be empty")
	}
	var out []clientapi.ChatMessage
	open := -1 // the assistant message in out a function_call joins, or -1
	declared := make(map[string]bool)
	for i, item := range items {
		at := fmt.Sprintf("input[%d]", i)
		m, err := clientapi.ObjectOf(item, at)
		if err != nil {
			return err
		}
		typ, err := clientapi.StringField(m, "type", at+".type", false)
		if err != nil {
			return err
		}
		if typ == "" {
			if _, ok := clientapi.Present(m, "role"); !ok {
				return clientapi.Invalid(at+".type", "%s.type is required (or a role, for a message)", at)
			}
			typ = responseswire.ItemMessage
		}
		switch typ {
		case responseswire.ItemMessage:
			msg, err := rsMessage(m, at)
			if err != nil {
				return err
			}
			out = append(out, msg)
			open = -1
			if msg.Role == "assistant" {
				open = len(out) - 1
			}
		case responseswire.ItemFunctionCall:
			c, err := rsFunctionCall(m, at)
			if err != nil {
				return err
			}
			declared[c.ID] = true
			if open < 0 {
				out = append(out, clientapi.ChatMessage{Role: "assistant", Content: json.RawMessage("null")})
				open = len(out) - 1
			} else if string(out[open].Content) == `""` {
				out[open].Content = json.RawMessage("null")
			}
			out[open].ToolCalls = append(out[open].ToolCalls, c)
		case responseswire.ItemFunctionCallOutput:
			msg, err := rsFunctionOutput(m, at)
			if err != nil {
				return err
			}
			if !declared[msg.ToolCallID] {
				r.pending = append(r.pending, rsPending{param: at + ".call_id", callID: msg.ToolCallID})
			}
			out = append(out, msg)
			open = -1
		case responseswire.ItemReasoning:
			// An earlier output's reasoning, sent back: encrypted for the
			// upstream that wrote it, which no other can read.
			if err := clientapi.Keys(m, at, "type", "id", "summary", "content", "encrypted_content", "status"); err != nil {
				return err
			}
			h.Add("input[reasoning]")
		case responseswire.ItemReference:
			return clientapi.Invalid(at+".type", "%s: item_reference is not supported by this gateway; continue from a stored response with previous_response_id, or send the item itself", at)
		default:
			return clientapi.Invalid(at+".type", "%s.type %s is not supported by this gateway (only message, function_call, function_call_output and reasoning items are)", at, clientapi.Quote(typ))
		}
	}
	r.Input = make([]json.RawMessage, len(out))
	for i, msg := range out {
		r.Input[i] = clientapi.JSON(msg)
	}
	return nil
}

// rsMessage translates a message item.
func rsMessage(m map[string]json.RawMessage, at string) (clientapi.ChatMessage, error) {
	var msg clientapi.ChatMessage
	if err := clientapi.Keys(m, at, "type", "role", "content", "id", "status", "phase"); err != nil {
		return msg, err
	}
	// phase marks an assistant message as commentary or the final answer,
	// for the SDKs to send back as they got it: checked, then left out, as
	// id and status are (Chat Completions has no such field).
	switch phase, err := clientapi.StringField(m, "phase", at+".phase", false); {
	case err != nil:
		return msg, err
	case phase != "" && phase != "commentary" && phase != "final_answer":
		return msg, clientapi.Invalid(at+".phase", "%s.phase must be \"commentary\" or \"final_answer\"", at)
	}
	role, err := clientapi.StringField(m, "role", at+".role", true)
	if err != nil {
		return msg, err
	}
	switch role {
	case "user", "assistant", "system":
	case "developer":
		role = "system"
	default:
		return msg, clientapi.Invalid(at+".role", "%s.role must be \"user\", \"assistant\", \"system\" or \"developer\"", at)
	}
	if _, err := clientapi.StringField(m, "status", at+".status", false); err != nil {
		return msg, err
	}
	msg.Role = role
	content, parts, err := rsStringOrParts(m, "content", at, "content parts")
	if err != nil {
		return msg, err
	}
	if content != nil {
		msg.Content = content
		return msg, nil
	}
	if len(parts) == 0 {
		return msg, clientapi.Invalid(at+".content", "%s.content must not be empty", at)
	}
	out := make([]any, 0, len(parts))
	err = clientapi.EachBlock(parts, at+".content", func(pm map[string]json.RawMessage, pat, typ string) error {
		assistant := role == "assistant"
		switch {
		case typ == responseswire.PartInputText && !assistant:
			text, err := rsPartText(pm, pat, "text")
			if err != nil {
				return err
			}
			out = append(out, clientapi.TextPart{Type: "text", Text: text})
		case typ == responseswire.PartInputImage && role == responseswire.RoleUser:
			img, err := rsImage(pm, pat)
			if err != nil {
				return err
			}
			out = append(out, img)
		case typ == responseswire.PartOutputText && assistant:
			if err := clientapi.Keys(pm, pat, "type", "text", "annotations", "logprobs"); err != nil {
				return err
			}
			text, err := clientapi.StringField(pm, "text", pat+".text", false)
			if err != nil {
				return err
			}
			if _, ok := clientapi.Present(pm, "text"); !ok {
				return clientapi.Invalid(pat+".text", "%s.text is required", pat)
			}
			out = append(out, clientapi.TextPart{Type: "text", Text: text})
		case typ == responseswire.PartRefusal && assistant:
			text, err := rsPartText(pm, pat, "refusal")
			if err != nil {
				return err
			}
			out = append(out, chat.RefusalPart{Type: chat.PartRefusal, Refusal: text})
		case typ == responseswire.PartInputText || typ == responseswire.PartInputImage || typ == responseswire.PartOutputText || typ == responseswire.PartRefusal:
			return clientapi.Invalid(pat+".type", "%s: %s parts are not allowed in a %s message (%s)", pat, typ, rsClientRole(m), rsAllowedParts(role))
		case typ == responseswire.PartInputFile || typ == responseswire.PartInputAudio:
			return clientapi.Invalid(pat+".type", "%s: %s parts are not supported by this gateway", pat, typ)
		default:
			return clientapi.Invalid(pat+".type", "%s.type %s is not a content part type (%s)", pat, clientapi.Quote(typ), rsAllowedParts(role))
		}
		return nil
	})
	if err != nil {
		return msg, err
	}
	msg.Content = clientapi.JSON(out)
	return msg, nil
}

// rsClientRole is the role as the client wrote it, for messages.
func rsClientRole(m map[string]json.RawMessage) string {
	var s string
	_ = json.Unmarshal(m["role"], &s)
	return s
}

func rsAllowedParts(role string) string {
	switch role {
	case "assistant":
		return "an assistant message holds output_text and refusal parts"
	case "user":
		return "a user message holds input_text and input_image parts"
	}
	return "a system or developer message holds input_text parts"
}

// rsPartText reads a part of {type, <name>: string}; the string may be
// empty but must be there.
func rsPartText(m map[string]json.RawMessage, at, name string) (string, error) {
	if err := clientapi.Keys(m, at, "type", name); err != nil {
		return "", err
	}
	if _, ok := clientapi.Present(m, name); !ok {
		return "", clientapi.Invalid(at+"."+name, "%s.%s is required", at, name)
	}
	return clientapi.StringField(m, name, at+"."+name, false)
}

// rsImage translates an input_image part.
func rsImage(m map[string]json.RawMessage, at string) (chat.ImagePart, error) {
	p := chat.ImagePart{Type: chat.PartImageURL}
	if err := clientapi.Keys(m, at, "type", "image_url", "file_id", "detail"); err != nil {
		return p, err
	}
	if _, ok := clientapi.Present(m, "file_id"); ok {
		return p, clientapi.Invalid(at+".file_id", "%s.file_id is not supported by this gateway (it keeps no files); send the image as image_url, an https or data: URL", at)
	}
	u, err := clientapi.StringField(m, "image_url", at+".image_url", true)
	if err != nil {
		return p, err
	}
	lower := strings.ToLower(u)
	switch {
	case strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "http://"):
	case strings.HasPrefix(lower, "data:image/"):
		meta, _, ok := strings.Cut(u, ",")
		if !ok || !strings.HasSuffix(strings.ToLower(meta), ";base64") {
			return p, clientapi.Invalid(at+".image_url", "%s.image_url: a data URL must be base64 (data:image/png;base64,...)", at)
		}
	default:
		return p, clientapi.Invalid(at+".image_url", "%s.image_url must be an http or https URL or a data:image/...;base64 URL", at)
	}
	p.ImageURL.URL = u
	detail, err := clientapi.StringField(m, "detail", at+".detail", false)
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
		return p, clientapi.Invalid(at+".detail", "%s.detail must be \"auto\", \"low\", \"high\" or \"original\"", at)
	}
	return p, nil
}

// rsFunctionCall translates a function_call item into a tool call.
func rsFunctionCall(m map[string]json.RawMessage, at string) (llm.ToolCall, error) {
	var c llm.ToolCall
	c.Type = "function"
	if err := clientapi.Keys(m, at, "type", "id", "call_id", "name", "arguments", "status"); err != nil {
		return c, err
	}
	var err error
	if c.ID, err = rsCallID(m, at); err != nil {
		return c, err
	}
	if c.Function.Name, err = clientapi.StringField(m, "name", at+".name", true); err != nil {
		return c, err
	}
	if _, ok := clientapi.Present(m, "arguments"); !ok {
		return c, clientapi.Invalid(at+".arguments", "%s.arguments is required", at)
	}
	if c.Function.Arguments, err = clientapi.StringField(m, "arguments", at+".arguments", false); err != nil {
		return c, err
	}
	return c, nil
}

// rsCallID reads the members a function_call item and its
// function_call_output share: the item's own id and status, checked and
// dropped, and the call_id, which is returned.
func rsCallID(m map[string]json.RawMessage, at string) (string, error) {
	if _, err := clientapi.StringField(m, "id", at+".id", false); err != nil {
		return "", err
	}
	if _, err := clientapi.StringField(m, "status", at+".status", false); err != nil {
		return "", err
	}
	return clientapi.StringField(m, "call_id", at+".call_id", true)
}

// rsFunctionOutput translates a function_call_output item into a tool
// message.
func rsFunctionOutput(m map[string]json.RawMessage, at string) (clientapi.ChatMessage, error) {
	msg := clientapi.ChatMessage{Role: "tool"}
	if err := clientapi.Keys(m, at, "type", "id", "call_id", "output", "status"); err != nil {
		return msg, err
	}
	var err error
	if msg.ToolCallID, err = rsCallID(m, at); err != nil {
		return msg, err
	}
	output, parts, err := rsStringOrParts(m, "output", at, "input_text parts")
	if err != nil {
		return msg, err
	}
	if output != nil {
		msg.Content = output
		return msg, nil
	}
	out := make([]clientapi.TextPart, 0, len(parts))
	err = clientapi.EachBlock(parts, at+".output", func(pm map[string]json.RawMessage, pat, typ string) error {
		if typ != responseswire.PartInputText {
			return clientapi.Invalid(pat+".type", "%s: %s parts in a function_call_output are not supported by this gateway (only input_text is)", pat, clientapi.Quote(typ))
		}
		text, err := rsPartText(pm, pat, "text")
		if err != nil {
			return err
		}
		out = append(out, clientapi.TextPart{Type: "text", Text: text})
		return nil
	})
	if err != nil {
		return msg, err
	}
	msg.Content = clientapi.TextContent(out)
	return msg, nil
}

// rsStringOrParts reads the required field of the item at at, a string or
// an array of parts (what names them in the error): the string as it is
// written, or the parts.
func rsStringOrParts(m map[string]json.RawMessage, field, at, what string) (json.RawMessage, []json.RawMessage, error) {
	fat := at + "." + field
	raw, ok := clientapi.Present(m, field)
	if !ok {
		return nil, nil, clientapi.Invalid(fat, "%s is required", fat)
	}
	if raw[0] == '"' {
		if _, err := clientapi.StringValue(raw, fat); err != nil {
			return nil, nil, err
		}
		return raw, nil, nil
	}
	parts, err := clientapi.Array(raw, fat, fat+" must be a string or an array of "+what)
	if err != nil {
		return nil, nil, err
	}
	return nil, parts, nil
}

// rsTools translates the function tools, those of namespaces flattened;
// names are their names. Built-in tools are dropped and named.
func rsTools(fields map[string]json.RawMessage, h *clientapi.HintSet) ([]clientapi.ChatTool, map[string]bool, error) {
	return clientapi.ReadTools(fields, func(tools []clientapi.ChatTool, t json.RawMessage, at string, names map[string]bool) ([]clientapi.ChatTool, error) {
		m, typ, err := clientapi.Block(t, at)
		if err != nil {
			return nil, err
		}
		switch typ {
		case responseswire.ToolFunction:
			out, err := rsFunctionTool(m, at, names)
			if err != nil {
				return nil, err
			}
			tools = append(tools, out)
		case responseswire.ToolNamespace:
			if err := clientapi.Keys(m, at, "type", "name", "description", "tools"); err != nil {
				return nil, err
			}
			if _, err := clientapi.StringField(m, "name", at+".name", true); err != nil {
				return nil, err
			}
			if _, err := clientapi.StringField(m, "description", at+".description", false); err != nil {
				return nil, err
			}
			inner, ok := clientapi.Present(m, "tools")
			if !ok {
				return nil, clientapi.Invalid(at+".tools", "%s.tools is required", at)
			}
			list, err := clientapi.Array(inner, at+".tools", at+".tools must be an array of function tools")
			if err != nil {
				return nil, err
			}
			err = clientapi.EachBlock(list, at+".tools", func(im map[string]json.RawMessage, iat, ityp string) error {
				if ityp != responseswire.ToolFunction {
					return clientapi.Invalid(iat+".type", "%s.type %s is not supported in a namespace (only function tools are)", iat, clientapi.Quote(ityp))
				}
				out, err := rsFunctionTool(im, iat, names)
				if err != nil {
					return err
				}
				tools = append(tools, out)
				return nil
			})
			if err != nil {
				return nil, err
			}
			h.Add("tools[namespace]")
		case "web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11",
			"file_search", "code_interpreter", "image_generation", "mcp", "local_shell", "shell",
			"computer_use_preview", "computer_use", "apply_patch":
			h.Add("tools[" + typ + "]")
		default:
			return nil, clientapi.Invalid(at+".type", "%s.type %s is not supported by this gateway (function, namespace and built-in tools are)", at, clientapi.Quote(typ))
		}
		return tools, nil
	})
}

// rsFunctionTool translates a function tool; names are the names so far.
func rsFunctionTool(m map[string]json.RawMessage, at string, names map[string]bool) (clientapi.ChatTool, error) {
	if err := clientapi.Keys(m, at, "type", "name", "description", "parameters", "strict"); err != nil {
		return clientapi.ChatTool{}, err
	}
	return clientapi.FunctionTool(m, at, names, func(name string) error {
		if !rsValidName(name) {
			return clientapi.Invalid(at+".name", "%s.name must be 1 to %d letters, digits, underscores and dashes", at, rsMaxFunctionNameLen)
		}
		return nil
	}, "parameters", false)
}

// rsValidName is OpenAI's rule for function names: ^[a-zA-Z0-9_-]{1,64}$.
func rsValidName(s string) bool {
	if len(s) == 0 || len(s) > rsMaxFunctionNameLen {
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

// rsToolChoice translates tool_choice.
func rsToolChoice(raw json.RawMessage, tools map[string]bool) (json.RawMessage, error) {
	const param = "tool_choice"
	if raw[0] == '"' {
		s, err := clientapi.StringValue(raw, param)
		if err != nil {
			return nil, err
		}
		switch s {
		case "auto", "none":
		case "required":
			if len(tools) == 0 {
				return nil, clientapi.Invalid(param, "tool_choice \"required\" requires tools")
			}
		default:
			return nil, clientapi.Invalid(param, "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"name\":...}")
		}
		return clientapi.JSON(s), nil
	}
	m, err := clientapi.ObjectOf(raw, param)
	if err != nil {
		return nil, clientapi.Invalid(param, "tool_choice must be a string or an object")
	}
	typ, err := clientapi.StringField(m, "type", "tool_choice.type", true)
	if err != nil {
		return nil, err
	}
	if typ != responseswire.ToolFunction {
		return nil, clientapi.Invalid("tool_choice.type", "tool_choice.type %s is not supported by this gateway (only function is)", clientapi.Quote(typ))
	}
	if err := clientapi.Keys(m, param, "type", "name"); err != nil {
		return nil, err
	}
	name, err := clientapi.StringField(m, "name", "tool_choice.name", true)
	if err != nil {
		return nil, err
	}
	if !tools[name] {
		return nil, clientapi.Invalid("tool_choice.name", "tool_choice.name %s is not one of the tools", clientapi.Quote(name))
	}
	return clientapi.JSON(chat.NamedToolChoice{Type: chat.ToolTypeFunction, Function: chat.NamedFunc{Name: name}}), nil
}

// rsText translates text: its format, as a response_format (nil for plain
// text), and its verbosity ("" for none).
func rsText(raw json.RawMessage) (format json.RawMessage, verbosity string, err error) {
	m, err := clientapi.ObjectOf(raw, "text")
	if err != nil {
		return nil, "", err
	}
	if err := clientapi.Keys(m, "text", "format", "verbosity"); err != nil {
		return nil, "", err
	}
	verbosity, err = clientapi.StringField(m, "verbosity", "text.verbosity", false)
	if err != nil {
		return nil, "", err
	}
	switch verbosity {
	case "", "low", "medium", "high":
	default:
		return nil, "", clientapi.Invalid("text.verbosity", "text.verbosity must be \"low\", \"medium\" or \"high\"")
	}
	format, err = rsFormat(m)
	return format, verbosity, err
}

// rsFormat translates text.format (m is text).
func rsFormat(m map[string]json.RawMessage) (json.RawMessage, error) {
	fraw, ok := clientapi.Present(m, "format")
	if !ok {
		return nil, nil
	}
	const at = "text.format"
	f, typ, err := clientapi.Block(fraw, at)
	if err != nil {
		return nil, err
	}
	switch typ {
	case responseswire.FormatText:
		return nil, clientapi.Keys(f, at, "type")
	case responseswire.FormatJSONObject:
		if err := clientapi.Keys(f, at, "type"); err != nil {
			return nil, err
		}
		return clientapi.JSON(chat.ResponseFormat{Type: chat.FormatJSONObject}), nil
	case responseswire.FormatJSONSchema:
	default:
		return nil, clientapi.Invalid(at+".type", "%s.type must be \"text\", \"json_schema\" or \"json_object\"", at)
	}
	if err := clientapi.Keys(f, at, "type", "name", "schema", "description", "strict"); err != nil {
		return nil, err
	}
	var js chat.JSONSchema
	if js.Name, err = clientapi.StringField(f, "name", at+".name", true); err != nil {
		return nil, err
	}
	if !rsValidName(js.Name) {
		return nil, clientapi.Invalid(at+".name", "%s.name must be 1 to %d letters, digits, underscores and dashes", at, rsMaxFunctionNameLen)
	}
	if js.Description, err = clientapi.StringField(f, "description", at+".description", false); err != nil {
		return nil, err
	}
	if js.Schema, err = clientapi.ObjectField(f, "schema", at, true, "a JSON schema object"); err != nil {
		return nil, err
	}
	if strict, err := clientapi.BoolField(f, "strict", at+".strict"); err != nil {
		return nil, err
	} else if strict != nil {
		js.Strict = json.RawMessage(strconv.FormatBool(*strict))
	}
	return clientapi.JSON(chat.ResponseFormat{Type: chat.FormatJSONSchema, JSONSchema: &js}), nil
}

// rsMetadata checks metadata, OpenAI's map of at most 16 strings, and
// returns it compacted.
func rsMetadata(raw json.RawMessage) (json.RawMessage, error) {
	m, err := clientapi.ObjectOf(raw, "metadata")
	if err != nil {
		return nil, err
	}
	if len(m) > rsMaxMetadata {
		return nil, clientapi.Invalid("metadata", "metadata must have at most %d keys", rsMaxMetadata)
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
		if len(k) > rsMaxMetadataKey {
			return nil, clientapi.Invalid(at, "metadata keys must be at most %d characters", rsMaxMetadataKey)
		}
		v, err := clientapi.StringValue(m[k], at)
		if err != nil {
			return nil, err
		}
		if len(v) > rsMaxMetadataValue {
			return nil, clientapi.Invalid(at, "%s must be at most %d characters", at, rsMaxMetadataValue)
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, clientapi.Invalid("metadata", "metadata must be an object")
	}
	return b.Bytes(), nil
}

// rsCheckIgnored checks the shape of the ignored fields (a wrong type is
// still the client's mistake) and returns reasoning.effort, which is
// translated.
func rsCheckIgnored(fields map[string]json.RawMessage, h *clientapi.HintSet) (effort string, err error) {
	if raw, ok := clientapi.Present(fields, "client_metadata"); ok {
		if _, err := clientapi.ObjectOf(raw, "client_metadata"); err != nil {
			return "", err
		}
	}
	for _, name := range []string{"service_tier", "prompt_cache_key", "prompt_cache_retention"} {
		if _, err := clientapi.StringField(fields, name, name, false); err != nil {
			return "", err
		}
	}
	truncation, err := clientapi.StringField(fields, "truncation", "truncation", false)
	if err != nil {
		return "", err
	}
	if truncation != "" && truncation != "auto" && truncation != "disabled" {
		return "", clientapi.Invalid("truncation", "truncation must be \"auto\" or \"disabled\"")
	}
	if _, err := clientapi.IntField(fields, "max_tool_calls", "max_tool_calls", 0, math.MaxInt32, false); err != nil {
		return "", err
	}
	if raw, ok := clientapi.Present(fields, "include"); ok {
		list, err := clientapi.Array(raw, "include", "include must be an array of strings")
		if err != nil {
			return "", err
		}
		for i, v := range list {
			if _, err := clientapi.StringValue(v, fmt.Sprintf("include[%d]", i)); err != nil {
				return "", err
			}
		}
	}
	if raw, ok := clientapi.Present(fields, "reasoning"); ok {
		m, err := clientapi.ObjectOf(raw, "reasoning")
		if err != nil {
			return "", err
		}
		if err := clientapi.Keys(m, "reasoning", "effort", "summary", "generate_summary"); err != nil {
			return "", err
		}
		for _, name := range []string{"effort", "summary", "generate_summary"} {
			if _, err := clientapi.StringField(m, name, "reasoning."+name, false); err != nil {
				return "", err
			}
		}
		effort, _ = clientapi.StringField(m, "effort", "reasoning.effort", false)
		switch effort {
		case "", "none", "minimal", "low", "medium", "high", "xhigh":
		default:
			return "", clientapi.Invalid("reasoning.effort", "reasoning.effort must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" or \"xhigh\"")
		}
		h.Nested(m, "summary", "reasoning.summary")
		h.Nested(m, "generate_summary", "reasoning.summary")
	}
	if raw, ok := clientapi.Present(fields, "stream_options"); ok {
		m, err := clientapi.ObjectOf(raw, "stream_options")
		if err != nil {
			return "", err
		}
		if err := clientapi.Keys(m, "stream_options", "include_obfuscation"); err != nil {
			return "", err
		}
		if _, err := clientapi.BoolField(m, "include_obfuscation", "stream_options.include_obfuscation"); err != nil {
			return "", err
		}
	}
	return effort, nil
}
