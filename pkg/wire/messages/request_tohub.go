package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/canonjson"
	"github.com/buzzgate/buzzgate/pkg/llm"
	chatwire "github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// The Anthropic Messages request, as POST /api/v1/messages reads it: the
// body is decoded once into Request, then checked and
// translated.
//
// ToHub translates it into a Chat Completions body, which the gateway
// reads as it decodes any chat request (llm.Hub.Request, from the members
// written, or llm.DecodeChatRequest), so the router, the idempotency
// layer and billing run unchanged. The translation
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
// the top level (IgnoredFields) service_tier, container, mcp_servers,
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

// IgnoredFields are the top-level fields accepted and ignored: beta and
// account features the gateway does not offer, which the SDKs may send.
var IgnoredFields = []string{"service_tier", "container", "mcp_servers", "context_management"}

// imageTypes are the media types Anthropic accepts for a base64 image.
var imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// checkOptions read a request as the translation checks it: strictly
// but for a thinking block's members, which it drops unread, and a
// cache_control, a hint whose presence is all that counts. Content blocks,
// sources and thinking configurations are read by byType.
var checkOptions = jsonv2.JoinUnmarshalers(
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, s *string) error {
		if dec.PeekKind() == '"' || !thinkingMember(dec.StackPointer()) {
			return errors.ErrUnsupported
		}
		*s = ""
		return dec.SkipValue()
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *[]string) error {
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		return readStrings(raw, dec.StackPointer(), v)
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *Block) error {
		type plain Block
		return byType(dec, (*plain)(v), &v.Extra, blockMembers, dec.Options())
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *CacheControl) error {
		*v = CacheControl{}
		return dec.SkipValue()
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *Source) error {
		if dec.PeekKind() == '"' {
			return errors.ErrUnsupported
		}
		type plain Source
		return byType(dec, (*plain)(v), &v.Extra, sourceMembers, plainOptions)
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *Thinking) error {
		type plain Thinking
		return byType(dec, (*plain)(v), &v.Extra, thinkingMembers, plainOptions)
	}),
)

// plainOptions read a source or a thinking configuration, which hold no
// member checkOptions reads its own way.
var plainOptions = jsonv2.JoinOptions(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))

// readStrings reads a list of strings (stop_sequences, at base), a null
// element an error naming it, as an empty string is not.
func readStrings(raw jsontext.Value, base jsontext.Pointer, v *[]string) error {
	if raw.Kind() == '[' {
		d := jsontext.NewDecoder(bytes.NewReader(raw), plainOptions)
		if _, err := d.ReadToken(); err != nil {
			return err
		}
		for i := 0; d.PeekKind() != ']'; i++ {
			el, err := d.ReadValue()
			if err != nil {
				return err
			}
			if el.Kind() == 'n' {
				return &jsonv2.SemanticError{JSONPointer: base + jsontext.Pointer("/"+strconv.Itoa(i)), JSONKind: 'n', Err: errors.New("null is not a string")}
			}
		}
	}
	err := jsonv2.Unmarshal(raw, v, plainOptions)
	var se *jsonv2.SemanticError
	if errors.As(err, &se) {
		se.JSONPointer = base + se.JSONPointer
	}
	return err
}

// thinkingMember reports whether a member's pointer, within a content
// block read by byType, is one of a thinking block's own.
func thinkingMember(p jsontext.Pointer) bool {
	n := 0
	for range p.Tokens() {
		n++
	}
	switch p.LastToken() {
	case "thinking", "signature", "data":
		return n == 1
	}
	return false
}

// The members an object may have, by its type, of those its Go type
// models; a modelled member its type may not have is read as one the Go
// type does not model (into Extra), for the check that names it.
var (
	blockMembers = map[string][]string{
		BlockText:             {"type", "text", "cache_control", "citations"},
		BlockImage:            {"type", "source", "cache_control"},
		BlockToolUse:          {"type", "id", "name", "input", "cache_control"},
		BlockToolResult:       {"type", "tool_use_id", "content", "is_error", "cache_control"},
		BlockThinking:         {"type", "thinking", "signature", "data", "cache_control"},
		BlockRedactedThinking: {"type", "thinking", "signature", "data", "cache_control"},
		"":                    modelled(Block{}),
	}
	sourceMembers = map[string][]string{
		SourceBase64: {"type", "media_type", "data"},
		SourceURL:    {"type", "url"},
		"":           modelled(Source{}),
	}
	thinkingMembers = map[string][]string{
		ThinkingEnabled:  {"type", "budget_tokens", "display"},
		ThinkingAdaptive: {"type", "display"},
		ThinkingDisabled: {"type"},
		"":               modelled(Thinking{}),
	}
)

// modelled is the member names v's Go type models, from its json tags.
func modelled(v any) []string {
	var names []string
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// byType reads an object into v (a type without this unmarshaler, with
// opts), a
// modelled member its "type" may not have (members[type]; members[""] are
// all the modelled ones) into extra instead. An object of another type
// is read as it is.
func byType[T any](dec *jsontext.Decoder, v *T, extra *jsontext.Value, members map[string][]string, opts jsonv2.Options) error {
	var zero T
	*v = zero // a name given twice: the last value alone is read
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	base := dec.StackPointer()
	fail := func(err error) error {
		var se *jsonv2.SemanticError
		if errors.As(err, &se) {
			se.JSONPointer = base + se.JSONPointer
		}
		return err
	}
	if raw.Kind() != '{' {
		return fail(jsonv2.Unmarshal(raw, v, opts))
	}
	typ, moved := movesMember(raw, members)
	if !moved {
		return fail(jsonv2.Unmarshal(raw, v, opts))
	}
	allowed := members[typ]
	var kept, out []byte
	kept, out = append(kept, '{'), append(out, '{')
	d := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	for d.PeekKind() == '"' {
		name, _ := d.ReadValue()
		nameCopy := slices.Clone(name)
		val, err := d.ReadValue()
		if err != nil {
			return err
		}
		var key string
		_ = jsonv2.Unmarshal(nameCopy, &key, jsontext.AllowInvalidUTF8(true))
		dst := &kept
		if slices.Contains(members[""], key) && !slices.Contains(allowed, key) {
			dst = &out
		}
		if len(*dst) > 1 {
			*dst = append(*dst, ',')
		}
		*dst = append(append(append(*dst, nameCopy...), ':'), val...)
	}
	if err := jsonv2.Unmarshal(append(kept, '}'), v, opts); err != nil {
		return fail(err)
	}
	if len(*extra) > 2 {
		out = append(append(out, ','), (*extra)[1:len(*extra)-1]...)
	}
	*extra = append(out, '}')
	return nil
}

// movesMember reads an object's type and reports whether it has a modelled
// member its type may not have.
func movesMember(raw jsontext.Value, members map[string][]string) (typ string, moved bool) {
	d := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := d.ReadToken(); err != nil {
		return "", false
	}
	var names []string
	for d.PeekKind() == '"' {
		tok, err := d.ReadToken()
		if err != nil {
			return "", false
		}
		name := tok.String()
		names = append(names, name)
		if name == "type" && d.PeekKind() == '"' {
			t, err := d.ReadToken()
			if err != nil {
				return "", false
			}
			typ = t.String()
			continue
		}
		if err := d.SkipValue(); err != nil {
			return "", false
		}
	}
	allowed, ok := members[typ]
	if !ok || typ == "" {
		return typ, false
	}
	for _, n := range names {
		if slices.Contains(members[""], n) && !slices.Contains(allowed, n) {
			return typ, true
		}
	}
	return typ, false
}

// ToHub validates an Anthropic Messages request body and
// returns the equivalent Chat Completions request (a body that
// llm.DecodeChatRequest accepts, with the members it was written from,
// read by llm.Hub.Request), so the gateway's router, idempotency and
// billing run unchanged, and the nested hints the translation drops (the
// top-level ones are IgnoredFields).
func ToHub(body []byte) (chat llm.Hub, dropped []string, err error) {
	h := &llm.HintSet{}
	chat, err = toHub(body, h)
	if err != nil {
		return llm.Hub{}, nil, err
	}
	return chat, h.Names, nil
}

// hubReader checks and translates one request; body is kept for the error
// path, which looks up what the types do not say (a member there but
// empty, an element that is null).
type hubReader struct {
	body []byte
	h    *llm.HintSet
}

func toHub(body []byte, h *llm.HintSet) (chat llm.Hub, err error) {
	var req Request
	if err := Unmarshal(body, &req, checkOptions); err != nil {
		return llm.Hub{}, decodeError(body, err)
	}
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); trimmed[0] != '{' {
		return llm.Hub{}, decodeError(body, nil) // null
	}
	r := &hubReader{body: body, h: h}
	if err := rejectUnknown(req.Extra, "", slices.Concat(llm.GatewayFields, IgnoredFields)...); err != nil {
		return llm.Hub{}, err
	}
	var out llm.ObjectWriter

	if req.Model == "" {
		return llm.Hub{}, r.required("model", "model")
	}
	out.Add("model", jsonobj.Marshal(req.Model))

	if req.MaxTokens == nil {
		return llm.Hub{}, llm.Invalid("max_tokens", "max_tokens is required")
	}
	maxTokens, err := intIn(*req.MaxTokens, "max_tokens", 1, llm.MaxTokensBound)
	if err != nil {
		return llm.Hub{}, err
	}
	out.Add("max_completion_tokens", json.RawMessage(strconv.FormatInt(maxTokens, 10)))

	var msgs []chatwire.RequestMessage
	content, err := r.system(req.System, "system")
	if err != nil {
		return llm.Hub{}, err
	}
	if content != nil {
		msgs = append(msgs, chatwire.RequestMessage{Role: "system", Content: content})
	}
	turns, err := r.turns(req.Messages)
	if err != nil {
		return llm.Hub{}, err
	}
	msgs = append(msgs, turns...)
	out.AddMessages(len(msgs), jsonobj.Marshal(msgs))

	if len(req.StopSequences) > 0 {
		out.Add("stop", jsonobj.Marshal(req.StopSequences))
	}
	for _, s := range []struct {
		name string
		raw  jsontext.Value
	}{{"temperature", req.Temperature}, {"top_p", req.TopP}} {
		if jsonobj.IsNull(s.raw) {
			continue
		}
		f, ok := jsonobj.Number(json.RawMessage(s.raw))
		if !ok {
			return llm.Hub{}, llm.Invalid(s.name, "%s must be a number", s.name)
		}
		if f < 0 || f > 1 {
			return llm.Hub{}, llm.Invalid(s.name, "%s must be from 0 to 1", s.name)
		}
		out.Add(s.name, json.RawMessage(s.raw))
	}
	if !jsonobj.IsNull(req.TopK) {
		f, ok := jsonobj.Number(json.RawMessage(req.TopK))
		if !ok {
			return llm.Hub{}, llm.Invalid("top_k", "top_k must be an integer")
		}
		if _, err := intIn(f, "top_k", 0, math.MaxInt32); err != nil {
			return llm.Hub{}, err
		}
		out.Add("top_k", json.RawMessage(req.TopK))
	}

	effort, format, err := r.reasoning(&req)
	if err != nil {
		return llm.Hub{}, err
	}
	if effort != "" {
		out.Add("reasoning_effort", jsonobj.Marshal(effort))
	}
	if format != nil {
		out.Add("response_format", format)
	}

	tools, names, err := r.tools(req.Tools)
	if err != nil {
		return llm.Hub{}, err
	}
	if len(tools) > 0 {
		out.Add("tools", jsonobj.Marshal(tools))
	}
	if req.ToolChoice != nil {
		choice, parallel, err := r.toolChoice(req.ToolChoice, names)
		if err != nil {
			return llm.Hub{}, err
		}
		if len(tools) > 0 {
			out.Add("tool_choice", choice)
			if parallel != nil {
				out.Add("parallel_tool_calls", parallel)
			}
		}
	}

	if m := req.Metadata; m != nil {
		if err := rejectUnknown(m.Extra, "metadata"); err != nil {
			return llm.Hub{}, err
		}
		if m.UserID != "" {
			out.Add("user", jsonobj.Marshal(m.UserID))
		}
	}

	if req.Stream {
		out.Add("stream", json.RawMessage("true"))
		out.Add("stream_options", json.RawMessage(`{"include_usage":true}`))
	}
	for _, name := range llm.GatewayFields {
		if raw, ok := memberOf(req.Extra, name); ok {
			out.Add(name, raw)
		}
	}
	return out.Hub(), nil
}

// intIn checks that f is an integer in [lo, hi] (1024 and 1024.0 alike).
func intIn(f float64, param string, lo, hi int64) (int64, error) {
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, llm.Invalid(param, "%s must be an integer", param)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, llm.Invalid(param, "%s must be an integer from %d to %d", param, lo, hi)
	}
	return int64(f), nil
}

// memberOf is the member name of an object kept as written, when there
// and not null.
func memberOf(obj jsontext.Value, name string) (json.RawMessage, bool) {
	if len(obj) == 0 {
		return nil, false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(obj), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	var found json.RawMessage
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, false
		}
		key := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		if key == name {
			found = json.RawMessage(v.Clone())
		}
	}
	if found == nil || string(found) == "null" {
		return nil, false
	}
	return found, true
}

// rejectUnknown rejects a member of extra (the members an object's type does
// not model) that is not in allowed, the first in sorted order, as
// unknownKey does.
func rejectUnknown(extra jsontext.Value, param string, allowed ...string) error {
	if len(extra) == 0 {
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(extra), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := dec.ReadToken(); err != nil {
		return nil
	}
	m := map[string]json.RawMessage{}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		m[tok.String()] = nil
		if err := dec.SkipValue(); err != nil {
			return nil
		}
	}
	return unknownKey(m, param, allowed...)
}

// onlyMembers rejects a block holding a member its type does not have, the
// first in sorted order, as unknownKey does: byType has read such a
// member, modelled or not, into Extra.
func onlyMembers(b *Block, at string) error {
	return rejectUnknown(b.Extra, at, blockMembers[b.Type]...)
}

// required is the error of a required member found empty: absent or null
// in the body (at path, the member's place), it is required; there, it
// must not be empty.
func (r *hubReader) required(param string, path ...any) error {
	if v, ok := lookup(r.body, path...); ok && v != nil {
		return llm.Invalid(param, "%s must not be empty", param)
	}
	return llm.Invalid(param, "%s is required", param)
}

// requiredIn is r.required of the member name of the object at at.
func (r *hubReader) requiredIn(at, name string) error {
	return r.required(at+"."+name, append(paramPath(at), name)...)
}

// nonEmpty is requiredIn when v, the member's value, is empty; nil
// otherwise.
func (r *hubReader) nonEmpty(at, name, v string) error {
	if v != "" {
		return nil
	}
	return r.requiredIn(at, name)
}

// lookup is the value at path (object names and array indexes) of body;
// ok is false when there is none, and the value nil when it is null.
func lookup(body []byte, path ...any) (v any, ok bool) {
	if json.Unmarshal(body, &v) != nil {
		return nil, false
	}
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, isMap := v.(map[string]any)
			if !isMap {
				return nil, false
			}
			if v, ok = m[p]; !ok {
				return nil, false
			}
		case int:
			l, isList := v.([]any)
			if !isList || p >= len(l) {
				return nil, false
			}
			v = l[p]
		}
	}
	return v, true
}

// decodeError is the error of a body the request's types cannot read,
// naming the member at fault as the translation's checks do.
func decodeError(body []byte, err error) error {
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) || se.JSONPointer == "" || !json.Valid(body) {
		return llm.BodyError(body)
	}
	var at, shape string
	var path []any
	for tok := range se.JSONPointer.Tokens() {
		if i, err := strconv.Atoi(tok); err == nil {
			at += fmt.Sprintf("[%d]", i)
			shape += "[]"
			path = append(path, i)
			continue
		}
		if at != "" {
			at, shape = at+".", shape+"."
		}
		at, shape = at+tok, shape+tok
		path = append(path, tok)
	}
	switch shape {
	case "max_tokens", "thinking.budget_tokens":
		return llm.Invalid(at, "%s must be an integer", at)
	case "stream", "tools[].strict", "tool_choice.disable_parallel_tool_use",
		"messages[].content[].is_error":
		return llm.Invalid(at, "%s must be a boolean", at)
	case "stop_sequences":
		return llm.Invalid(at, "stop_sequences must be an array of strings")
	case "messages":
		return llm.Invalid(at, "messages must be an array of messages")
	case "tools":
		return llm.Invalid(at, "tools must be an array of tools")
	case "system":
		return llm.Invalid(at, "%s must be a string or an array of text blocks", at)
	case "messages[].content":
		if role, _ := lookup(body, path[0], path[1], "role"); role == RoleSystem {
			return llm.Invalid(at, "%s must be a string or an array of text blocks", at)
		}
		return llm.Invalid(at, "%s must be a string or an array of content blocks", at)
	case "messages[].content[].content":
		return llm.Invalid(at, "%s must be a string or an array of text blocks", at)
	case "messages[]", "system[]", "messages[].content[]", "messages[].content[].content[]", "tools[]",
		"tool_choice", "metadata", "thinking", "output_config", "output_config.format",
		"messages[].content[].source", "messages[].content[].content[].source":
		return llm.Invalid(at, "%s must be an object", at)
	}
	return llm.Invalid(at, "%s must be a string", at)
}

type imagePart struct {
	Type     string `json:"type"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// system translates the system prompt: a string or an array of text
// blocks. nil means there is none.
//
// A list of blocks is joined by a blank line into one string, as the
// blocks are paragraphs of one prompt (an upstream that reads text parts
// would run them together). param is where it is: "system", or a system
// message's content; path is its place in the body.
func (r *hubReader) system(c Content, param string, path ...any) (json.RawMessage, error) {
	if c.Blocks == nil {
		if c.Text == "" {
			return nil, nil
		}
		return jsonobj.Marshal(c.Text), nil
	}
	if len(path) == 0 {
		path = []any{param}
	}
	if len(c.Blocks) == 0 {
		return nil, nil
	}
	texts := make([]string, 0, len(c.Blocks))
	for i := range c.Blocks {
		b := &c.Blocks[i]
		at := fmt.Sprintf("%s[%d]", param, i)
		bpath := append(slices.Clip(path), i)
		if err := r.blockType(b, at, bpath); err != nil {
			return nil, err
		}
		if b.Type != BlockText {
			return nil, llm.Invalid(at+".type", "%s.type must be \"text\"", at)
		}
		text, err := r.text(b, at)
		if err != nil {
			return nil, err
		}
		texts = append(texts, text)
	}
	return jsonobj.Marshal(strings.Join(texts, "\n\n")), nil
}

// blockType checks that a block has a type: a block decoded from null has
// none, and is no object.
func (r *hubReader) blockType(b *Block, at string, path []any) error {
	if b.Type != "" {
		return nil
	}
	if v, ok := lookup(r.body, path...); ok && v == nil {
		return llm.Invalid(at, "%s must be an object", at)
	}
	return r.required(at+".type", append(slices.Clip(path), "type")...)
}

// turns translates messages into Chat Completions messages.
func (r *hubReader) turns(turns []InputMessage) ([]chatwire.RequestMessage, error) {
	if turns == nil {
		return nil, llm.Invalid("messages", "messages is required")
	}
	if len(turns) == 0 {
		return nil, llm.Invalid("messages", "messages must not be empty")
	}
	var out []chatwire.RequestMessage
	for i := range turns {
		t := &turns[i]
		at := fmt.Sprintf("messages[%d]", i)
		if t.Role == "" {
			if v, ok := lookup(r.body, "messages", i); ok && v == nil {
				return nil, llm.Invalid(at, "%s must be an object", at)
			}
		}
		if err := rejectUnknown(t.Extra, at); err != nil {
			return nil, err
		}
		role := t.Role
		if role == "" {
			return nil, r.required(at+".role", "messages", i, "role")
		}
		if role != RoleUser && role != RoleAssistant && role != RoleSystem {
			return nil, llm.Invalid(at+".role", "%s.role must be \"user\", \"assistant\" or \"system\"", at)
		}
		content := t.Content
		if content.Blocks == nil && content.Text == "" {
			if v, ok := lookup(r.body, "messages", i, "content"); !ok || v == nil {
				return nil, llm.Invalid(at+".content", "%s.content is required", at)
			}
		}
		if role == RoleSystem {
			// A system prompt given at this point of the conversation
			// (Claude Code sends one so): a system message here.
			text, err := r.system(content, at+".content", "messages", i, "content")
			if err != nil {
				return nil, err
			}
			if text == nil {
				return nil, llm.Invalid(at+".content", "%s.content must not be empty", at)
			}
			out = append(out, chatwire.RequestMessage{Role: "system", Content: text})
			continue
		}
		final := i == len(turns)-1 && role == RoleAssistant
		if content.Blocks == nil {
			if content.Text == "" && !final {
				return nil, llm.Invalid(at+".content", "%s.content must not be empty (only a final assistant message may be)", at)
			}
			out = append(out, chatwire.RequestMessage{Role: role, Content: jsonobj.Marshal(content.Text)})
			continue
		}
		if len(content.Blocks) == 0 && !final {
			return nil, llm.Invalid(at+".content", "%s.content must not be empty (only a final assistant message may be)", at)
		}
		var err error
		if out, err = r.turn(out, role, content.Blocks, at, i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// blockRole is the role of the messages a content block type may be in.
var blockRole = map[string]string{
	BlockImage: RoleUser, BlockToolResult: RoleUser,
	BlockToolUse: RoleAssistant, BlockThinking: RoleAssistant, BlockRedactedThinking: RoleAssistant,
}

// turn translates a user or an assistant turn of blocks: a user's tool
// results as tool messages, then the rest as one user message; an
// assistant's text parts and tool calls as one assistant message.
func (r *hubReader) turn(out []chatwire.RequestMessage, role string, blocks []Block, at string, turn int) ([]chatwire.RequestMessage, error) {
	var parts []any
	var calls []chatwire.ToolCall
	err := r.eachBlock(blocks, at, []any{"messages", turn, "content"}, func(p chatwire.TextPart) { parts = append(parts, p) },
		func(b *Block, bat string) error {
			only, known := blockRole[b.Type]
			switch {
			case !known:
				return unsupportedBlock(bat, b.Type)
			case only != role:
				return llm.Invalid(bat+".type", "%s: %s blocks are only allowed in %s messages", bat, b.Type, only)
			}
			switch b.Type {
			case BlockImage:
				p, err := r.image(b, bat)
				if err != nil {
					return err
				}
				parts = append(parts, p)
			case BlockToolResult:
				msg, err := r.toolResult(b, bat)
				if err != nil {
					return err
				}
				out = append(out, msg)
			case BlockToolUse:
				c, err := r.toolUse(b, bat)
				if err != nil {
					return err
				}
				calls = append(calls, c)
			default: // thinking or redacted_thinking
				// An earlier turn's thinking, signed by Anthropic for
				// Anthropic: no other upstream can read it.
				if err := onlyMembers(b, bat); err != nil {
					return err
				}
				r.h.Add("messages[].content[" + b.Type + "]")
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if role == RoleUser {
		if len(parts) > 0 {
			out = append(out, chatwire.RequestMessage{Role: "user", Content: jsonobj.Marshal(parts)})
		}
		return out, nil
	}
	msg := chatwire.RequestMessage{Role: "assistant", ToolCalls: calls}
	switch {
	case len(parts) > 0:
		msg.Content = jsonobj.Marshal(parts)
	case len(calls) > 0:
		msg.Content = json.RawMessage("null")
	default:
		msg.Content = json.RawMessage(`""`)
	}
	return append(out, msg), nil
}

// eachBlock reads a content's blocks in order: a text block's text (read
// by text) goes to text, any other block to other, with its path. path is
// the content's place in the body.
func (r *hubReader) eachBlock(blocks []Block, at string, path []any, text func(chatwire.TextPart),
	other func(b *Block, bat string) error) error {
	for i := range blocks {
		b := &blocks[i]
		bat := fmt.Sprintf("%s.content[%d]", at, i)
		if err := r.blockType(b, bat, append(slices.Clip(path), i)); err != nil {
			return err
		}
		if b.Type != BlockText {
			if err := other(b, bat); err != nil {
				return err
			}
			continue
		}
		t, err := r.text(b, bat)
		if err != nil {
			return err
		}
		text(chatwire.TextPart{Type: "text", Text: t})
	}
	return nil
}

func unsupportedBlock(at, typ string) error {
	return llm.Invalid(at+".type", "%s: content block type %s is not supported by this gateway", at, llm.Quote(typ))
}

// text reads a text block's text, which must not be empty.
func (r *hubReader) text(b *Block, at string) (string, error) {
	if err := onlyMembers(b, at); err != nil {
		return "", err
	}
	r.hint(b.CacheControl != nil, "cache_control")
	r.hint(!jsonobj.IsNull(b.Citations), "citations")
	if b.Text == "" {
		return "", llm.Invalid(at+".text", "%s.text must be a non-empty string", at)
	}
	return b.Text, nil
}

// hint adds name when set.
func (r *hubReader) hint(set bool, name string) {
	if set {
		r.h.Add(name)
	}
}

// image translates an image block into an image_url part.
func (r *hubReader) image(b *Block, at string) (imagePart, error) {
	var p imagePart
	p.Type = "image_url"
	if err := onlyMembers(b, at); err != nil {
		return p, err
	}
	r.hint(b.CacheControl != nil, "cache_control")
	sat := at + ".source"
	src := b.Source
	if src == nil {
		return p, llm.Invalid(sat, "%s is required", sat)
	}
	if src.Name != "" {
		return p, llm.Invalid(sat, "%s must be an object", sat)
	}
	only := func() error { return rejectUnknown(src.Extra, sat, sourceMembers[src.Type]...) }
	switch src.Type {
	case "":
		if v, _ := lookup(r.body, paramPath(sat)...); v != nil {
			if _, isString := v.(string); isString {
				return p, llm.Invalid(sat, "%s must be an object", sat)
			}
		}
		return p, r.requiredIn(sat, "type")
	case SourceBase64:
		if err := only(); err != nil {
			return p, err
		}
		if err := r.nonEmpty(sat, "media_type", src.MediaType); err != nil {
			return p, err
		}
		if !slices.Contains(imageTypes, src.MediaType) {
			return p, llm.Invalid(sat+".media_type", "%s.media_type must be one of %s", sat, strings.Join(imageTypes, ", "))
		}
		if err := r.nonEmpty(sat, "data", src.Data); err != nil {
			return p, err
		}
		p.ImageURL.URL = "data:" + src.MediaType + ";base64," + src.Data
	case SourceURL:
		if err := only(); err != nil {
			return p, err
		}
		if err := r.nonEmpty(sat, "url", src.URL); err != nil {
			return p, err
		}
		lower := strings.ToLower(src.URL)
		if !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") {
			return p, llm.Invalid(sat+".url", "%s.url must be an http or https URL", sat)
		}
		p.ImageURL.URL = src.URL
	default:
		return p, llm.Invalid(sat+".type", "%s.type must be \"base64\" or \"url\" (%s is not supported by this gateway)", sat, llm.Quote(src.Type))
	}
	return p, nil
}

// toolUse translates a tool_use block into a tool call.
func (r *hubReader) toolUse(b *Block, at string) (chatwire.ToolCall, error) {
	var c chatwire.ToolCall
	c.Type = "function"
	if err := onlyMembers(b, at); err != nil {
		return c, err
	}
	r.hint(b.CacheControl != nil, "cache_control")
	if err := r.nonEmpty(at, "id", b.ID); err != nil {
		return c, err
	}
	if err := r.nonEmpty(at, "name", b.Name); err != nil {
		return c, err
	}
	c.ID, c.Function.Name = b.ID, b.Name
	if jsonobj.IsNull(b.Input) {
		return c, llm.Invalid(at+".input", "%s.input is required", at)
	}
	raw := json.RawMessage(b.Input)
	if raw[0] != '{' {
		return c, llm.Invalid(at+".input", "%s.input must be an object", at)
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
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return c, llm.Invalid(at+".input", "%s.input must be an object", at)
	}
	c.Function.Arguments = buf.String()
	return c, nil
}

// toolResult translates a tool_result block into a tool message.
func (r *hubReader) toolResult(b *Block, at string) (chatwire.RequestMessage, error) {
	msg := chatwire.RequestMessage{Role: "tool"}
	if err := onlyMembers(b, at); err != nil {
		return msg, err
	}
	r.hint(b.CacheControl != nil, "cache_control")
	if err := r.nonEmpty(at, "tool_use_id", b.ToolUseID); err != nil {
		return msg, err
	}
	msg.ToolCallID = b.ToolUseID
	// is_error has no Chat Completions counterpart: checked (a boolean, by
	// its type), then dropped; the result's own text is what tells the
	// model what went wrong.
	switch c := b.Content; {
	case c == nil:
		msg.Content = json.RawMessage(`""`)
	case c.Blocks == nil:
		msg.Content = jsonobj.Marshal(c.Text)
	default:
		parts := make([]chatwire.TextPart, 0, len(c.Blocks))
		for i := range c.Blocks {
			p := &c.Blocks[i]
			pat := fmt.Sprintf("%s.content[%d]", at, i)
			if p.Type == "" {
				if v, ok := lookup(r.body, paramPath(pat)...); ok && v == nil {
					return msg, llm.Invalid(pat, "%s must be an object", pat)
				}
				return msg, r.requiredIn(pat, "type")
			}
			switch p.Type {
			case BlockText:
				t, err := r.text(p, pat)
				if err != nil {
					return msg, err
				}
				parts = append(parts, chatwire.TextPart{Type: "text", Text: t})
			case BlockImage:
				return msg, llm.Invalid(pat+".type", "%s: images in a tool_result are not supported by this gateway; send the image in a user text turn's content instead", pat)
			default:
				return msg, unsupportedBlock(pat, p.Type)
			}
		}
		msg.Content = llm.TextContent(parts)
	}
	return msg, nil
}

// paramPath is the body path of a param written messages[0].content[1]...
func paramPath(param string) []any {
	var path []any
	for part := range strings.SplitSeq(param, ".") {
		name, rest, _ := strings.Cut(part, "[")
		path = append(path, name)
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			i, _ := strconv.Atoi(idx)
			path = append(path, i)
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return path
}

// tools translates the tool definitions; names are the function tools'
// names. A tool of a server-defined type (web_search_20250305, bash_…),
// which only Anthropic runs, is dropped and named tools[<type>], its date
// left out.
func (r *hubReader) tools(tools []Tool) ([]chatwire.Tool, map[string]bool, error) {
	if tools == nil {
		return nil, nil, nil
	}
	names := make(map[string]bool, len(tools))
	out := make([]chatwire.Tool, 0, len(tools))
	for i := range tools {
		t := &tools[i]
		at := fmt.Sprintf("tools[%d]", i)
		if t.Name == "" {
			if v, ok := lookup(r.body, "tools", i); ok && v == nil {
				return nil, nil, llm.Invalid(at, "%s must be an object", at)
			}
		}
		if !t.Custom() {
			if t.Name == "" {
				return nil, nil, r.required(at+".name", "tools", i, "name")
			}
			r.h.Add("tools[" + ServerToolName(t.Type) + "]")
			continue
		}
		hints := []string{"defer_loading", "input_examples", "eager_input_streaming"}
		if err := rejectUnknown(t.Extra, at, hints...); err != nil {
			return nil, nil, err
		}
		r.hint(t.CacheControl != nil, "cache_control")
		for _, hint := range hints {
			_, ok := memberOf(t.Extra, hint)
			r.hint(ok, "tools[]."+hint)
		}
		var ct chatwire.Tool
		ct.Type = "function"
		if t.Name == "" {
			return nil, nil, r.required(at+".name", "tools", i, "name")
		}
		if names[t.Name] {
			return nil, nil, llm.Invalid(at+".name", "%s.name: tool names must be unique", at)
		}
		names[t.Name] = true
		ct.Function.Name, ct.Function.Description = t.Name, t.Description
		if jsonobj.IsNull(t.InputSchema) {
			return nil, nil, llm.Invalid(at+".input_schema", "%s.input_schema is required", at)
		}
		if t.InputSchema[0] != '{' {
			return nil, nil, llm.Invalid(at+".input_schema", "%s.input_schema must be a JSON schema object", at)
		}
		ct.Function.Parameters = json.RawMessage(t.InputSchema)
		if t.Strict != nil {
			ct.Function.Strict = json.RawMessage(strconv.FormatBool(*t.Strict))
		}
		out = append(out, ct)
	}
	return out, names, nil
}

// reasoning translates thinking and output_config into Chat's
// reasoning_effort ("" for none) and response_format (nil for none).
func (r *hubReader) reasoning(req *Request) (effort string, format json.RawMessage, err error) {
	if c := req.OutputConfig; c != nil {
		if err := rejectUnknown(c.Extra, "output_config"); err != nil {
			return "", nil, err
		}
		switch c.Effort {
		case "":
		case "low", "medium", "high":
			effort = c.Effort
		case "xhigh", "max":
			effort = "high"
		default:
			return "", nil, llm.Invalid("output_config.effort", "output_config.effort must be \"low\", \"medium\", \"high\", \"xhigh\" or \"max\"")
		}
		if c.Format != nil {
			if format, err = r.outputFormat(c.Format); err != nil {
				return "", nil, err
			}
		}
	}
	t := req.Thinking
	if t == nil {
		return effort, format, nil
	}
	check := func() error { return rejectUnknown(t.Extra, "thinking", thinkingMembers[t.Type]...) }
	switch t.Type {
	case "":
		return "", nil, r.required("thinking.type", "thinking", "type")
	case ThinkingEnabled:
		if err := check(); err != nil {
			return "", nil, err
		}
		if t.BudgetTokens == nil {
			return "", nil, llm.Invalid("thinking.budget_tokens", "thinking.budget_tokens is required")
		}
		budget, err := intIn(*t.BudgetTokens, "thinking.budget_tokens", 1024, llm.MaxTokensBound)
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
	case ThinkingAdaptive:
		if err := check(); err != nil {
			return "", nil, err
		}
		if effort == "" {
			effort = "medium"
		}
	case ThinkingDisabled:
		if err := check(); err != nil {
			return "", nil, err
		}
	default:
		return "", nil, llm.Invalid("thinking.type", "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\"")
	}
	return effort, format, nil
}

// outputFormat translates output_config.format, Anthropic's structured
// output: {type: json_schema, schema} becomes a json_schema
// response_format named "output".
func (r *hubReader) outputFormat(f *OutputFormat) (json.RawMessage, error) {
	const at = "output_config.format"
	if f.Type == "" {
		return nil, r.required(at+".type", "output_config", "format", "type")
	}
	if f.Type != "json_schema" {
		return nil, llm.Invalid(at+".type", "%s.type must be \"json_schema\"", at)
	}
	if err := rejectUnknown(f.Extra, at, "type", "schema"); err != nil {
		return nil, err
	}
	if jsonobj.IsNull(f.Schema) || f.Schema[0] != '{' {
		return nil, llm.Invalid(at+".schema", "%s.schema must be a JSON schema object", at)
	}
	return jsonobj.Marshal(struct {
		Type       string `json:"type"`
		JSONSchema any    `json:"json_schema"`
	}{"json_schema", struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}{"output", json.RawMessage(f.Schema)}}), nil
}

// toolChoice translates tool_choice; parallel is nil unless parallel tool
// use is turned off.
func (r *hubReader) toolChoice(c *ToolChoice, tools map[string]bool) (choice, parallel json.RawMessage, err error) {
	if err := rejectUnknown(c.Extra, "tool_choice"); err != nil {
		return nil, nil, err
	}
	if c.Type == "" {
		return nil, nil, r.required("tool_choice.type", "tool_choice", "type")
	}
	if c.DisableParallelToolUse {
		parallel = json.RawMessage("false")
	}
	if c.Type != ToolChoiceTool && c.Name != "" {
		return nil, nil, llm.Invalid("tool_choice.name", "tool_choice.name is only allowed when tool_choice.type is \"tool\"")
	}
	switch c.Type {
	case ToolChoiceAuto:
		choice = json.RawMessage(`"auto"`)
	case ToolChoiceNone:
		choice, parallel = json.RawMessage(`"none"`), nil
	case ToolChoiceAny:
		if len(tools) == 0 {
			return nil, nil, llm.Invalid("tool_choice.type", "tool_choice.type \"any\" requires tools")
		}
		choice = json.RawMessage(`"required"`)
	case ToolChoiceTool:
		if c.Name == "" {
			return nil, nil, llm.Invalid("tool_choice.name", "tool_choice.name is required when tool_choice.type is \"tool\"")
		}
		if !tools[c.Name] {
			return nil, nil, llm.Invalid("tool_choice.name", "tool_choice.name %s is not one of the tools", llm.Quote(c.Name))
		}
		var tc struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		tc.Type, tc.Function.Name = "function", c.Name
		choice = jsonobj.Marshal(tc)
	default:
		return nil, nil, llm.Invalid("tool_choice.type", "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\"")
	}
	return choice, parallel, nil
}

// unknownKey rejects a field not in known, the first in sorted order so
// the error does not depend on map order.
func unknownKey(m map[string]json.RawMessage, param string, known ...string) error {
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
	return llm.Invalid(name, "unknown field %s", name)
}
