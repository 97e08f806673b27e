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

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// The OpenAI Responses request, as POST /api/v1/responses reads it: the
// body is decoded into pkg/wire/responses' RequestView, and each item,
// part and tool into its view, members raw, so that each member is
// checked in the order below and named in its error; a member a view does
// not model is refused by name.
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
	var v responseswire.RequestView
	if err := jsonv2.Unmarshal(body, &v, rsOptions); err != nil || rsFirst(body) != '{' {
		return nil, rsBodyError(body)
	}
	if err := rsKeys("", v.Extra, slices.Concat(llm.GatewayFields, rsIgnoredFields)); err != nil {
		return nil, err
	}
	r := &responsesRequest{Store: true}
	add := func(key string, value json.RawMessage) {
		r.fields = append(r.fields, rsField{key, value})
	}

	// Features the gateway does not offer: a clear 400 rather than a
	// silently different answer.
	if rsPresent(v.Conversation) {
		return nil, clientapi.Invalid("conversation", "conversation is not supported by this gateway; continue a conversation with previous_response_id")
	}
	if rsPresent(v.Prompt) {
		return nil, clientapi.Invalid("prompt", "prompt templates are not supported by this gateway; send the prompt as instructions and input")
	}
	background, err := rsBool(v.Background, "background")
	if err != nil {
		return nil, err
	}
	if background != nil && *background {
		return nil, clientapi.Invalid("background", "background mode is not supported by this gateway; send the request with background false (or without it), streaming if it is long")
	}
	if logprobs, err := rsInt(v.TopLogprobs, "top_logprobs", 0, 20); err != nil {
		return nil, err
	} else if logprobs > 0 {
		return nil, clientapi.Invalid("top_logprobs", "top_logprobs is not supported by this gateway")
	}
	h := &clientapi.HintSet{}
	effort, err := rsCheckIgnored(&v, h)
	if err != nil {
		return nil, err
	}

	model, err := rsString(v.Model, "model", true)
	if err != nil {
		return nil, err
	}
	r.model = clientapi.JSON(model)

	if r.PreviousResponseID, err = rsString(v.PreviousResponseID, "previous_response_id", false); err != nil {
		return nil, err
	}
	if rsPresent(v.PreviousResponseID) && r.PreviousResponseID == "" {
		return nil, clientapi.Invalid("previous_response_id", "previous_response_id must not be empty")
	}
	if store, err := rsBool(v.Store, "store"); err != nil {
		return nil, err
	} else if store != nil {
		r.Store = *store
	}
	if r.Instructions, err = rsString(v.Instructions, "instructions", false); err != nil {
		return nil, err
	}
	if err := r.input(v.Input, h); err != nil {
		return nil, err
	}

	if rsPresent(v.MaxOutputTokens) {
		n, err := rsInt(v.MaxOutputTokens, "max_output_tokens", 1, clientapi.MaxTokens)
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
		raw  jsontext.Value
		max  float64
	}{{"temperature", v.Temperature, 2}, {"top_p", v.TopP, 1}} {
		if !rsPresent(p.raw) {
			continue
		}
		f, ok := clientapi.Number(json.RawMessage(p.raw))
		if !ok {
			return nil, clientapi.Invalid(p.name, "%s must be a number", p.name)
		}
		if f < 0 || f > p.max {
			return nil, clientapi.Invalid(p.name, "%s must be from 0 to %g", p.name, p.max)
		}
		add(p.name, json.RawMessage(p.raw))
	}

	tools, names, err := rsTools(v.Tools, h)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		add("tools", clientapi.JSON(tools))
	}
	if rsPresent(v.ToolChoice) {
		choice, err := rsToolChoice(v.ToolChoice, names)
		if err != nil {
			return nil, err
		}
		if len(tools) > 0 {
			add("tool_choice", choice)
		} else {
			r.EchoToolChoice = json.RawMessage(v.ToolChoice)
		}
	}
	if parallel, err := rsBool(v.ParallelToolCalls, "parallel_tool_calls"); err != nil {
		return nil, err
	} else if parallel != nil && len(tools) > 0 {
		add("parallel_tool_calls", json.RawMessage(strconv.FormatBool(*parallel)))
	} else {
		r.EchoParallel = parallel
	}

	if rsPresent(v.Text) {
		format, verbosity, err := rsText(v.Text)
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

	if rsPresent(v.Metadata) {
		if r.Metadata, err = rsMetadata(json.RawMessage(v.Metadata)); err != nil {
			return nil, err
		}
	}
	user, err := rsString(v.User, "user", false)
	if err != nil {
		return nil, err
	}
	safety, err := rsString(v.SafetyIdentifier, "safety_identifier", false)
	if err != nil {
		return nil, err
	}
	if safety != "" {
		user = safety
	}
	if user != "" {
		add("user", clientapi.JSON(user))
	}

	if stream, err := rsBool(v.Stream, "stream"); err != nil {
		return nil, err
	} else if stream != nil && *stream {
		add("stream", json.RawMessage("true"))
		add("stream_options", json.RawMessage(`{"include_usage":true}`))
	}
	if len(v.Extra) > 0 {
		for _, name := range llm.GatewayFields {
			if raw := rsExtraMember(v.Extra, name); rsPresent(raw) {
				add(name, json.RawMessage(raw))
			}
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
		msgs = append(msgs, clientapi.JSON(chat.RequestMessage{Role: "system", Content: clientapi.JSON(r.Instructions)}))
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

// input translates input (a string or an array of items, as written)
// into r.Input.
func (r *responsesRequest) input(input []byte, h *clientapi.HintSet) error {
	raw := jsontext.Value(input)
	if !rsPresent(raw) {
		return clientapi.Invalid("input", "input is required")
	}
	if raw[0] == '"' {
		if _, err := rsStringValue(raw, "input"); err != nil {
			return err
		}
		r.Input = []json.RawMessage{clientapi.JSON(chat.RequestMessage{Role: "user", Content: json.RawMessage(raw)})}
		return nil
	}
	items, err := rsArray(raw, "input", "input must be a string or an array of input items")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return clientapi.Invalid("input", "input must not be empty")
	}
	var out []chat.RequestMessage
	open := -1 // the assistant message in out a function_call joins, or -1
	declared := make(map[string]bool)
	for i, item := range items {
		at := fmt.Sprintf("input[%d]", i)
		var m responseswire.InputItemView
		if err := rsObject(item, at, &m); err != nil {
			return err
		}
		typ, err := rsString(m.Type, at+".type", false)
		if err != nil {
			return err
		}
		if typ == "" {
			if !rsPresent(m.Role) {
				return clientapi.Invalid(at+".type", "%s.type is required (or a role, for a message)", at)
			}
			typ = responseswire.ItemMessage
		}
		switch typ {
		case responseswire.ItemMessage:
			msg, err := rsMessage(&m, at)
			if err != nil {
				return err
			}
			out = append(out, msg)
			open = -1
			if msg.Role == "assistant" {
				open = len(out) - 1
			}
		case responseswire.ItemFunctionCall:
			c, err := rsFunctionCall(&m, at)
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
		case responseswire.ItemFunctionCallOutput:
			msg, err := rsFunctionOutput(&m, at)
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
			if err := rsItemKeys(&m, at, "type", "id", "summary", "content", "encrypted_content", "status"); err != nil {
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

// rsItemKeys rejects a member of an input item that its type may not
// have: one of allowed, of those the view models, or any it does not.
func rsItemKeys(m *responseswire.InputItemView, at string, allowed ...string) error {
	return rsKeys(at, m.Extra, nil, rsMembers(allowed,
		rsMember{"type", m.Type}, rsMember{"id", m.ID}, rsMember{"role", m.Role}, rsMember{"content", m.Content},
		rsMember{"status", m.Status}, rsMember{"phase", m.Phase}, rsMember{"call_id", m.CallID}, rsMember{"name", m.Name},
		rsMember{"arguments", m.Arguments}, rsMember{"output", m.Output}, rsMember{"summary", m.Summary},
		rsMember{"encrypted_content", m.EncryptedContent})...)
}

// rsPartKeys is rsItemKeys for a content part.
func rsPartKeys(p *responseswire.InputPartView, at string, allowed ...string) error {
	return rsKeys(at, p.Extra, nil, rsMembers(allowed,
		rsMember{"type", p.Type}, rsMember{"text", p.Text}, rsMember{"refusal", p.Refusal}, rsMember{"image_url", p.ImageURL},
		rsMember{"file_id", p.FileID}, rsMember{"detail", p.Detail}, rsMember{"annotations", p.Annotations},
		rsMember{"logprobs", p.Logprobs})...)
}

// rsToolKeys is rsItemKeys for a tool.
func rsToolKeys(t *responseswire.ToolView, at string, allowed ...string) error {
	return rsKeys(at, t.Extra, nil, rsMembers(allowed,
		rsMember{"type", t.Type}, rsMember{"name", t.Name}, rsMember{"description", t.Description},
		rsMember{"parameters", t.Parameters}, rsMember{"strict", t.Strict}, rsMember{"tools", t.Tools})...)
}

// rsMessage translates a message item.
func rsMessage(m *responseswire.InputItemView, at string) (chat.RequestMessage, error) {
	var msg chat.RequestMessage
	if err := rsItemKeys(m, at, "type", "role", "content", "id", "status", "phase"); err != nil {
		return msg, err
	}
	// phase marks an assistant message as commentary or the final answer,
	// for the SDKs to send back as they got it: checked, then left out, as
	// id and status are (Chat Completions has no such field).
	switch phase, err := rsString(m.Phase, at+".phase", false); {
	case err != nil:
		return msg, err
	case phase != "" && phase != "commentary" && phase != "final_answer":
		return msg, clientapi.Invalid(at+".phase", "%s.phase must be \"commentary\" or \"final_answer\"", at)
	}
	clientRole, err := rsString(m.Role, at+".role", true)
	if err != nil {
		return msg, err
	}
	role := clientRole
	switch role {
	case "user", "assistant", "system":
	case "developer":
		role = "system"
	default:
		return msg, clientapi.Invalid(at+".role", "%s.role must be \"user\", \"assistant\", \"system\" or \"developer\"", at)
	}
	if _, err := rsString(m.Status, at+".status", false); err != nil {
		return msg, err
	}
	msg.Role = role
	content, parts, err := rsStringOrParts(m.Content, "content", at, "content parts")
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
	assistant := role == "assistant"
	for i, raw := range parts {
		pat := fmt.Sprintf("%s.content[%d]", at, i)
		var pm responseswire.InputPartView
		if err := rsObject(raw, pat, &pm); err != nil {
			return msg, err
		}
		typ, err := rsString(pm.Type, pat+".type", true)
		if err != nil {
			return msg, err
		}
		switch {
		case typ == responseswire.PartInputText && !assistant:
			text, err := rsPartText(&pm, pm.Text, pat, "text")
			if err != nil {
				return msg, err
			}
			out = append(out, chat.TextPart{Type: chat.PartText, Text: text})
		case typ == responseswire.PartInputImage && role == responseswire.RoleUser:
			img, err := rsImage(&pm, pat)
			if err != nil {
				return msg, err
			}
			out = append(out, img)
		case typ == responseswire.PartOutputText && assistant:
			if err := rsPartKeys(&pm, pat, "type", "text", "annotations", "logprobs"); err != nil {
				return msg, err
			}
			text, err := rsString(pm.Text, pat+".text", false)
			if err != nil {
				return msg, err
			}
			if !rsPresent(pm.Text) {
				return msg, clientapi.Invalid(pat+".text", "%s.text is required", pat)
			}
			out = append(out, chat.TextPart{Type: chat.PartText, Text: text})
		case typ == responseswire.PartRefusal && assistant:
			text, err := rsPartText(&pm, pm.Refusal, pat, "refusal")
			if err != nil {
				return msg, err
			}
			out = append(out, chat.RefusalPart{Type: chat.PartRefusal, Refusal: text})
		case typ == responseswire.PartInputText || typ == responseswire.PartInputImage || typ == responseswire.PartOutputText || typ == responseswire.PartRefusal:
			return msg, clientapi.Invalid(pat+".type", "%s: %s parts are not allowed in a %s message (%s)", pat, typ, clientRole, rsAllowedParts(role))
		case typ == responseswire.PartInputFile || typ == responseswire.PartInputAudio:
			return msg, clientapi.Invalid(pat+".type", "%s: %s parts are not supported by this gateway", pat, typ)
		default:
			return msg, clientapi.Invalid(pat+".type", "%s.type %s is not a content part type (%s)", pat, clientapi.Quote(typ), rsAllowedParts(role))
		}
	}
	msg.Content = clientapi.JSON(out)
	return msg, nil
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

// rsPartText reads a part of {type, <name>: string} (value is its
// member name); the string may be empty but must be there.
func rsPartText(p *responseswire.InputPartView, value jsontext.Value, at, name string) (string, error) {
	if err := rsPartKeys(p, at, "type", name); err != nil {
		return "", err
	}
	if !rsPresent(value) {
		return "", clientapi.Invalid(at+"."+name, "%s.%s is required", at, name)
	}
	return rsString(value, at+"."+name, false)
}

// rsImage translates an input_image part.
func rsImage(m *responseswire.InputPartView, at string) (chat.ImagePart, error) {
	p := chat.ImagePart{Type: chat.PartImageURL}
	if err := rsPartKeys(m, at, "type", "image_url", "file_id", "detail"); err != nil {
		return p, err
	}
	if rsPresent(m.FileID) {
		return p, clientapi.Invalid(at+".file_id", "%s.file_id is not supported by this gateway (it keeps no files); send the image as image_url, an https or data: URL", at)
	}
	u, err := rsString(m.ImageURL, at+".image_url", true)
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
	detail, err := rsString(m.Detail, at+".detail", false)
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
func rsFunctionCall(m *responseswire.InputItemView, at string) (chat.ToolCall, error) {
	var c chat.ToolCall
	c.Type = "function"
	if err := rsItemKeys(m, at, "type", "id", "call_id", "name", "arguments", "status"); err != nil {
		return c, err
	}
	var err error
	if c.ID, err = rsCallID(m, at); err != nil {
		return c, err
	}
	if c.Function.Name, err = rsString(m.Name, at+".name", true); err != nil {
		return c, err
	}
	if !rsPresent(m.Arguments) {
		return c, clientapi.Invalid(at+".arguments", "%s.arguments is required", at)
	}
	if c.Function.Arguments, err = rsString(m.Arguments, at+".arguments", false); err != nil {
		return c, err
	}
	return c, nil
}

// rsCallID reads the members a function_call item and its
// function_call_output share: the item's own id and status, checked and
// dropped, and the call_id, which is returned.
func rsCallID(m *responseswire.InputItemView, at string) (string, error) {
	if _, err := rsString(m.ID, at+".id", false); err != nil {
		return "", err
	}
	if _, err := rsString(m.Status, at+".status", false); err != nil {
		return "", err
	}
	return rsString(m.CallID, at+".call_id", true)
}

// rsFunctionOutput translates a function_call_output item into a tool
// message.
func rsFunctionOutput(m *responseswire.InputItemView, at string) (chat.RequestMessage, error) {
	msg := chat.RequestMessage{Role: "tool"}
	if err := rsItemKeys(m, at, "type", "id", "call_id", "output", "status"); err != nil {
		return msg, err
	}
	var err error
	if msg.ToolCallID, err = rsCallID(m, at); err != nil {
		return msg, err
	}
	output, parts, err := rsStringOrParts(m.Output, "output", at, "input_text parts")
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
		var pm responseswire.InputPartView
		if err := rsObject(raw, pat, &pm); err != nil {
			return msg, err
		}
		typ, err := rsString(pm.Type, pat+".type", true)
		if err != nil {
			return msg, err
		}
		if typ != responseswire.PartInputText {
			return msg, clientapi.Invalid(pat+".type", "%s: %s parts in a function_call_output are not supported by this gateway (only input_text is)", pat, clientapi.Quote(typ))
		}
		text, err := rsPartText(&pm, pm.Text, pat, "text")
		if err != nil {
			return msg, err
		}
		out = append(out, chat.TextPart{Type: chat.PartText, Text: text})
	}
	msg.Content = clientapi.TextContent(out)
	return msg, nil
}

// rsStringOrParts reads the required member field (raw) of the item at
// at, a string or an array of parts (what names them in the error): the
// string as it is written, or the parts.
func rsStringOrParts(raw jsontext.Value, field, at, what string) (json.RawMessage, []jsontext.Value, error) {
	fat := at + "." + field
	if !rsPresent(raw) {
		return nil, nil, clientapi.Invalid(fat, "%s is required", fat)
	}
	if raw[0] == '"' {
		if _, err := rsStringValue(raw, fat); err != nil {
			return nil, nil, err
		}
		return json.RawMessage(raw), nil, nil
	}
	parts, err := rsArray(raw, fat, fat+" must be a string or an array of "+what)
	if err != nil {
		return nil, nil, err
	}
	return nil, parts, nil
}

// rsTools translates the function tools, those of namespaces flattened;
// names are their names. Built-in tools are dropped and named. Both are
// nil when the request has no tools.
func rsTools(raw jsontext.Value, h *clientapi.HintSet) ([]chat.Tool, map[string]bool, error) {
	if !rsPresent(raw) {
		return nil, nil, nil
	}
	list, err := rsArray(raw, "tools", "tools must be an array of tools")
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]bool, len(list))
	tools := make([]chat.Tool, 0, len(list))
	for i, t := range list {
		at := fmt.Sprintf("tools[%d]", i)
		var m responseswire.ToolView
		if err := rsObject(t, at, &m); err != nil {
			return nil, nil, err
		}
		typ, err := rsString(m.Type, at+".type", true)
		if err != nil {
			return nil, nil, err
		}
		switch typ {
		case responseswire.ToolFunction:
			out, err := rsFunctionTool(&m, at, names)
			if err != nil {
				return nil, nil, err
			}
			tools = append(tools, out)
		case responseswire.ToolNamespace:
			if err := rsToolKeys(&m, at, "type", "name", "description", "tools"); err != nil {
				return nil, nil, err
			}
			if _, err := rsString(m.Name, at+".name", true); err != nil {
				return nil, nil, err
			}
			if _, err := rsString(m.Description, at+".description", false); err != nil {
				return nil, nil, err
			}
			if !rsPresent(m.Tools) {
				return nil, nil, clientapi.Invalid(at+".tools", "%s.tools is required", at)
			}
			inner, err := rsArray(m.Tools, at+".tools", at+".tools must be an array of function tools")
			if err != nil {
				return nil, nil, err
			}
			for j, it := range inner {
				iat := fmt.Sprintf("%s.tools[%d]", at, j)
				var im responseswire.ToolView
				if err := rsObject(it, iat, &im); err != nil {
					return nil, nil, err
				}
				ityp, err := rsString(im.Type, iat+".type", true)
				if err != nil {
					return nil, nil, err
				}
				if ityp != responseswire.ToolFunction {
					return nil, nil, clientapi.Invalid(iat+".type", "%s.type %s is not supported in a namespace (only function tools are)", iat, clientapi.Quote(ityp))
				}
				out, err := rsFunctionTool(&im, iat, names)
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
			return nil, nil, clientapi.Invalid(at+".type", "%s.type %s is not supported by this gateway (function, namespace and built-in tools are)", at, clientapi.Quote(typ))
		}
	}
	return tools, names, nil
}

// rsFunctionTool translates a function tool: its name (unique among
// names, the names so far, to which it is added), description, JSON
// schema and strict.
func rsFunctionTool(m *responseswire.ToolView, at string, names map[string]bool) (chat.Tool, error) {
	var out chat.Tool
	if err := rsToolKeys(m, at, "type", "name", "description", "parameters", "strict"); err != nil {
		return out, err
	}
	out.Type = "function"
	var err error
	if out.Function.Name, err = rsString(m.Name, at+".name", true); err != nil {
		return out, err
	}
	if !rsValidName(out.Function.Name) {
		return out, clientapi.Invalid(at+".name", "%s.name must be 1 to %d letters, digits, underscores and dashes", at, rsMaxFunctionNameLen)
	}
	if names[out.Function.Name] {
		return out, clientapi.Invalid(at+".name", "%s.name: tool names must be unique", at)
	}
	names[out.Function.Name] = true
	if out.Function.Description, err = rsString(m.Description, at+".description", false); err != nil {
		return out, err
	}
	if out.Function.Parameters, err = rsObjectMember(m.Parameters, at+".parameters", false); err != nil {
		return out, err
	}
	if strict, err := rsBool(m.Strict, at+".strict"); err != nil {
		return out, err
	} else if strict != nil {
		out.Function.Strict = json.RawMessage(strconv.FormatBool(*strict))
	}
	return out, nil
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
func rsToolChoice(raw jsontext.Value, tools map[string]bool) (json.RawMessage, error) {
	const param = "tool_choice"
	if raw[0] == '"' {
		s, err := rsStringValue(raw, param)
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
	var m responseswire.ToolChoiceView
	if err := rsObject(raw, param, &m); err != nil {
		return nil, clientapi.Invalid(param, "tool_choice must be a string or an object")
	}
	typ, err := rsString(m.Type, "tool_choice.type", true)
	if err != nil {
		return nil, err
	}
	if typ != responseswire.ToolFunction {
		return nil, clientapi.Invalid("tool_choice.type", "tool_choice.type %s is not supported by this gateway (only function is)", clientapi.Quote(typ))
	}
	if err := rsKeys(param, m.Extra, nil); err != nil {
		return nil, err
	}
	name, err := rsString(m.Name, "tool_choice.name", true)
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
func rsText(raw jsontext.Value) (format json.RawMessage, verbosity string, err error) {
	var m responseswire.TextView
	if err := rsObject(raw, "text", &m); err != nil {
		return nil, "", err
	}
	if err := rsKeys("text", m.Extra, nil); err != nil {
		return nil, "", err
	}
	verbosity, err = rsString(m.Verbosity, "text.verbosity", false)
	if err != nil {
		return nil, "", err
	}
	switch verbosity {
	case "", "low", "medium", "high":
	default:
		return nil, "", clientapi.Invalid("text.verbosity", "text.verbosity must be \"low\", \"medium\" or \"high\"")
	}
	format, err = rsFormat(m.Format)
	return format, verbosity, err
}

// rsFormat translates text.format.
func rsFormat(raw jsontext.Value) (json.RawMessage, error) {
	if !rsPresent(raw) {
		return nil, nil
	}
	const at = "text.format"
	var f responseswire.TextFormatView
	if err := rsObject(raw, at, &f); err != nil {
		return nil, err
	}
	typ, err := rsString(f.Type, at+".type", true)
	if err != nil {
		return nil, err
	}
	keys := func(allowed ...string) error {
		return rsKeys(at, f.Extra, nil, rsMembers(allowed,
			rsMember{"type", f.Type}, rsMember{"name", f.Name}, rsMember{"schema", f.Schema},
			rsMember{"description", f.Description}, rsMember{"strict", f.Strict})...)
	}
	switch typ {
	case responseswire.FormatText:
		return nil, keys("type")
	case responseswire.FormatJSONObject:
		if err := keys("type"); err != nil {
			return nil, err
		}
		return clientapi.JSON(chat.ResponseFormat{Type: chat.FormatJSONObject}), nil
	case responseswire.FormatJSONSchema:
	default:
		return nil, clientapi.Invalid(at+".type", "%s.type must be \"text\", \"json_schema\" or \"json_object\"", at)
	}
	if err := keys("type", "name", "schema", "description", "strict"); err != nil {
		return nil, err
	}
	var js chat.JSONSchema
	if js.Name, err = rsString(f.Name, at+".name", true); err != nil {
		return nil, err
	}
	if !rsValidName(js.Name) {
		return nil, clientapi.Invalid(at+".name", "%s.name must be 1 to %d letters, digits, underscores and dashes", at, rsMaxFunctionNameLen)
	}
	if js.Description, err = rsString(f.Description, at+".description", false); err != nil {
		return nil, err
	}
	if js.Schema, err = rsObjectMember(f.Schema, at+".schema", true); err != nil {
		return nil, err
	}
	if strict, err := rsBool(f.Strict, at+".strict"); err != nil {
		return nil, err
	} else if strict != nil {
		js.Strict = json.RawMessage(strconv.FormatBool(*strict))
	}
	return clientapi.JSON(chat.ResponseFormat{Type: chat.FormatJSONSchema, JSONSchema: &js}), nil
}

// rsMetadata checks metadata, OpenAI's map of at most 16 strings, and
// returns it compacted.
func rsMetadata(raw json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, clientapi.Invalid("metadata", "metadata must be an object")
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
		v, err := rsStringValue(jsontext.Value(m[k]), at)
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
func rsCheckIgnored(v *responseswire.RequestView, h *clientapi.HintSet) (effort string, err error) {
	if rsPresent(v.ClientMetadata) && v.ClientMetadata[0] != '{' {
		return "", clientapi.Invalid("client_metadata", "client_metadata must be an object")
	}
	for _, f := range []rsMember{{"service_tier", v.ServiceTier}, {"prompt_cache_key", v.PromptCacheKey}, {"prompt_cache_retention", v.PromptCacheRetention}} {
		if _, err := rsString(f.value, f.name, false); err != nil {
			return "", err
		}
	}
	truncation, err := rsString(v.Truncation, "truncation", false)
	if err != nil {
		return "", err
	}
	if truncation != "" && truncation != "auto" && truncation != "disabled" {
		return "", clientapi.Invalid("truncation", "truncation must be \"auto\" or \"disabled\"")
	}
	if _, err := rsInt(v.MaxToolCalls, "max_tool_calls", 0, math.MaxInt32); err != nil {
		return "", err
	}
	if rsPresent(v.Include) {
		list, err := rsArray(v.Include, "include", "include must be an array of strings")
		if err != nil {
			return "", err
		}
		for i, s := range list {
			if _, err := rsStringValue(s, fmt.Sprintf("include[%d]", i)); err != nil {
				return "", err
			}
		}
	}
	if rsPresent(v.Reasoning) {
		var m responseswire.ReasoningView
		if err := rsObject(v.Reasoning, "reasoning", &m); err != nil {
			return "", err
		}
		if err := rsKeys("reasoning", m.Extra, nil); err != nil {
			return "", err
		}
		for _, f := range []rsMember{{"effort", m.Effort}, {"summary", m.Summary}, {"generate_summary", m.GenerateSummary}} {
			if _, err := rsString(f.value, "reasoning."+f.name, false); err != nil {
				return "", err
			}
		}
		effort, _ = rsString(m.Effort, "reasoning.effort", false)
		switch effort {
		case "", "none", "minimal", "low", "medium", "high", "xhigh":
		default:
			return "", clientapi.Invalid("reasoning.effort", "reasoning.effort must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" or \"xhigh\"")
		}
		if rsPresent(m.Summary) || rsPresent(m.GenerateSummary) {
			h.Add("reasoning.summary")
		}
	}
	if rsPresent(v.StreamOptions) {
		var m responseswire.StreamOptionsView
		if err := rsObject(v.StreamOptions, "stream_options", &m); err != nil {
			return "", err
		}
		if err := rsKeys("stream_options", m.Extra, nil); err != nil {
			return "", err
		}
		if _, err := rsBool(m.IncludeObfuscation, "stream_options.include_obfuscation"); err != nil {
			return "", err
		}
	}
	return effort, nil
}

// The readers of a view's members, each a JSON value as the client wrote
// it: nil when absent. A null member is an absent one.

// rsOptions read a request: of a name given twice the last value counts,
// and strings need not be valid UTF-8, as encoding/json reads them.
var rsOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// rsFirst is body's first byte after white space, or 0.
func rsFirst(body []byte) byte {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 {
		return t[0]
	}
	return 0
}

// rsBodyError is the error of a body that is not a JSON object, saying
// where a body that is not JSON stops being JSON (clientapi.ObjectBody).
func rsBodyError(body []byte) error {
	if _, err := clientapi.ObjectBody(body); err != nil {
		return err
	}
	return clientapi.Invalid("", "request body must be a JSON object")
}

func rsPresent(raw jsontext.Value) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// rsObject reads a member that must be an object into its view.
func rsObject(raw jsontext.Value, param string, v any) error {
	if len(raw) == 0 || raw[0] != '{' || jsonv2.Unmarshal(raw, v, rsOptions) != nil {
		return clientapi.Invalid(param, "%s must be an object", param)
	}
	return nil
}

// rsObjectMember reads a member that holds a JSON schema object, kept as
// written; a required one must be there. It is nil when absent.
func rsObjectMember(raw jsontext.Value, param string, required bool) (json.RawMessage, error) {
	if !rsPresent(raw) {
		if required {
			return nil, clientapi.Invalid(param, "%s is required", param)
		}
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, clientapi.Invalid(param, "%s must be a JSON schema object", param)
	}
	return json.RawMessage(raw), nil
}

// rsArray reads a member that must be an array (msg says so).
func rsArray(raw jsontext.Value, param, msg string) ([]jsontext.Value, error) {
	var a []jsontext.Value
	if len(raw) == 0 || raw[0] != '[' || jsonv2.Unmarshal(raw, &a, rsOptions) != nil {
		return nil, clientapi.Invalid(param, "%s", msg)
	}
	return a, nil
}

// rsString reads a string member; a required one must be there and not
// empty.
func rsString(raw jsontext.Value, param string, required bool) (string, error) {
	if !rsPresent(raw) {
		if required {
			return "", clientapi.Invalid(param, "%s is required", param)
		}
		return "", nil
	}
	s, err := rsStringValue(raw, param)
	if err != nil {
		return "", err
	}
	if required && s == "" {
		return "", clientapi.Invalid(param, "%s must not be empty", param)
	}
	return s, nil
}

// rsStringValue reads a string, invalid UTF-8 replaced as encoding/json
// replaces it.
func rsStringValue(raw jsontext.Value, param string) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", clientapi.Invalid(param, "%s must be a string", param)
	}
	return s, nil
}

// rsBool reads a boolean member; nil when absent.
func rsBool(raw jsontext.Value, param string) (*bool, error) {
	if !rsPresent(raw) {
		return nil, nil
	}
	var b bool
	switch string(raw) {
	case "true":
		b = true
	case "false":
	default:
		return nil, clientapi.Invalid(param, "%s must be a boolean", param)
	}
	return &b, nil
}

// rsInt reads an integer in [lo, hi] (1024 and 1024.0 alike); 0 when
// absent.
func rsInt(raw jsontext.Value, param string, lo, hi int64) (int64, error) {
	if !rsPresent(raw) {
		return 0, nil
	}
	f, ok := clientapi.Number(json.RawMessage(raw))
	if !ok || f != math.Trunc(f) {
		return 0, clientapi.Invalid(param, "%s must be an integer", param)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, clientapi.Invalid(param, "%s must be an integer from %d to %d", param, lo, hi)
	}
	return int64(f), nil
}

// rsMember is a modelled member of a view, by name.
type rsMember struct {
	name  string
	value jsontext.Value
}

// rsMembers are those of members that are there (null or not) and not
// allowed.
func rsMembers(allowed []string, members ...rsMember) []rsMember {
	var out []rsMember
	for _, m := range members {
		if m.value != nil && !slices.Contains(allowed, m.name) {
			out = append(out, m)
		}
	}
	return out
}

// rsKeys rejects a member of the object at param (the body when "") that
// is not allowed: one of extra, the members the object's view does not
// model, but those in known, or one of refused, modelled members the
// object may not have. Of several, it names the first in sorted order.
func rsKeys(param string, extra jsontext.Value, known []string, refused ...rsMember) error {
	name, ok := "", false
	for _, m := range refused {
		if !ok || m.name < name {
			name, ok = m.name, true
		}
	}
	if len(extra) > 2 {
		d := jsontext.NewDecoder(bytes.NewReader(extra), rsOptions)
		if _, err := d.ReadToken(); err == nil {
			for d.PeekKind() == '"' {
				raw, err := d.ReadValue()
				if err != nil {
					break
				}
				var k string
				_ = json.Unmarshal(raw, &k) // before the next read reuses raw
				if d.SkipValue() != nil {
					break
				}
				if !slices.Contains(known, k) && (!ok || k < name) {
					name, ok = k, true
				}
			}
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
	return clientapi.Invalid(name, "unknown field %s", name)
}

// rsExtraMember is the member name of extra (the last, if given twice),
// or nil.
func rsExtraMember(extra jsontext.Value, name string) jsontext.Value {
	var out jsontext.Value
	d := jsontext.NewDecoder(bytes.NewReader(extra), rsOptions)
	if _, err := d.ReadToken(); err != nil {
		return nil
	}
	for d.PeekKind() == '"' {
		raw, err := d.ReadValue()
		if err != nil {
			return out
		}
		var k string
		_ = json.Unmarshal(raw, &k)
		v, err := d.ReadValue()
		if err != nil {
			return out
		}
		if k == name {
			out = v.Clone()
		}
	}
	return out
}
