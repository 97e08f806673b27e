package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// DroppedFields are the Chat Completions fields that have no Responses
// counterpart and are left out of the upstream request: hints that do not
// change what the answer is (the gateway names those a client set in the
// answer's x-gateway-dropped header, docs/translation.md). A field that
// would change the answer and has no counterpart is refused instead
// (refusedField).
var DroppedFields = []string{"seed", "prediction", "store", "top_k"}

// Dropped names the fields of a Chat Completions request that
// EncodeRequest leaves out (for the answer's x-gateway-dropped): the
// top-level ones it does not read (DroppedFields among them, and any it
// does not know), and a message's name.
func Dropped(req *llm.UpstreamRequest) []string {
	view, _ := req.ChatView()
	dropped := view.Unread(readFields)
	if !view.Spaced() && messageNamed(req, view) {
		dropped = append(dropped, "messages[].name")
	}
	return dropped
}

// messageNamed reports whether a message has a member "name" that is not
// null, as encoding/json reads the body's messages into maps: those of
// the member "messages" in any case, each an object or null, else none.
func messageNamed(req *llm.UpstreamRequest, view *chat.RequestView) bool {
	at := -1
	for i, m := range view.Members {
		if strings.EqualFold(m.Key, "messages") {
			if at >= 0 {
				// Two arrays merge, as encoding/json reads them: rare
				// enough to read the body again.
				return messageNamedByJSON(req.Bytes())
			}
			at = i
		}
	}
	if at < 0 || string(view.Members[at].Value) == "null" || view.Members[at].Value[0] != '[' {
		return false
	}
	msgs := view.MessagesIn(at)
	for _, m := range msgs {
		if m.Members == nil && !m.Null {
			return false
		}
	}
	for _, m := range msgs {
		if name := m.Members.Get("name"); name != nil && string(name) != "null" {
			return true
		}
	}
	return false
}

func messageNamedByJSON(body []byte) bool {
	var in struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &in) == nil {
		for _, m := range in.Messages {
			if name, ok := m["name"]; ok && string(name) != "null" {
				return true
			}
		}
	}
	return false
}

// readFields are translated and the fields the gateway sets.
var readFields = func() map[string]bool {
	m := map[string]bool{"stream": true, "stream_options": true}
	for k := range translated {
		m[k] = true
	}
	return m
}()

// translated are the Chat Completions fields EncodeRequest reads; any
// other field is checked by refusedField or dropped.
var translated = map[string]bool{
	"model": true, "messages": true, "max_tokens": true, "max_completion_tokens": true,
	"temperature": true, "top_p": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"response_format": true, "verbosity": true, "reasoning_effort": true, "user": true,
	"safety_identifier": true, "prompt_cache_key": true, "prompt_cache_retention": true,
	"service_tier": true, "metadata": true,
}

// EncodeRequest turns the gateway's upstream request, a Chat Completions
// body, into a streaming Responses body, as the package doc's table says. A
// request it cannot express is a FailRejected *llm.ProviderError naming the
// field, as the upstream's own 400 would be, and nothing is sent. Every key
// is read exactly as written (a "Model" is not "model"), so that what is sent
// depends on the body's members, never on their order.
func EncodeRequest(req *llm.UpstreamRequest) ([]byte, error) {
	// Members are what this translation reads: each name exactly as
	// written.
	view, _ := req.ChatView()
	top := view.Members
	if top == nil {
		_, err := jsonobj.Parse(req.Bytes())
		return nil, rejected("the request body is not a JSON object", err)
	}
	// The first field refused, by name.
	refusal, refusedKey := "", ""
	for _, m := range top {
		if translated[m.Key] || refusal != "" && m.Key >= refusedKey {
			continue
		}
		if msg := refusedField(m.Key, top.Get(m.Key)); msg != "" {
			refusal, refusedKey = msg, m.Key
		}
	}
	if refusal != "" {
		return nil, rejected(refusal, nil)
	}
	out := Request{Model: req.Model, Stream: true}
	if out.Model == "" {
		out.Model, _ = jsonobj.String(top.Get("model"))
	}

	if err := translateMessages(&out, view); err != nil {
		return nil, err
	}
	if tools := top.Get("tools"); !jsonobj.IsNull(tools) {
		if tools[0] != '[' {
			return nil, rejected("tools must be an array", nil)
		}
		for i, t := range view.ExactTools() {
			t, err := translateTool(t.Members, fmt.Sprintf("tools[%d]", i))
			if err != nil {
				return nil, err
			}
			out.Tools = append(out.Tools, t)
		}
	}
	var err error
	if tc := top.Get("tool_choice"); !jsonobj.IsNull(tc) {
		if out.ToolChoice, err = toolChoice(tc); err != nil {
			return nil, err
		}
	}
	out.ParallelToolCalls = jsonobj.NonNull(top.Get("parallel_tool_calls"))
	if rf := top.Get("response_format"); !jsonobj.IsNull(rf) {
		format, err := textFormat(rf)
		if err != nil {
			return nil, err
		}
		out.Text = &Text{Format: format}
	}
	if v := jsonobj.NonNull(top.Get("verbosity")); v != nil {
		if out.Text == nil {
			out.Text = &Text{}
		}
		out.Text.Verbosity = v
	}
	if e := jsonobj.NonNull(top.Get("reasoning_effort")); e != nil {
		out.Reasoning = &Reasoning{Effort: e}
	}
	out.MaxOutputTokens = jsonobj.NonNull(top.Get("max_completion_tokens"))
	if out.MaxOutputTokens == nil {
		out.MaxOutputTokens = jsonobj.NonNull(top.Get("max_tokens"))
	}
	out.Temperature = jsonobj.NonNull(top.Get("temperature"))
	out.TopP = jsonobj.NonNull(top.Get("top_p"))
	out.User = jsonobj.NonNull(top.Get("user"))
	out.SafetyIdentifier = jsonobj.NonNull(top.Get("safety_identifier"))
	out.PromptCacheKey = jsonobj.NonNull(top.Get("prompt_cache_key"))
	out.PromptCacheRetention = jsonobj.NonNull(top.Get("prompt_cache_retention"))
	out.ServiceTier = jsonobj.NonNull(top.Get("service_tier"))
	out.Metadata = jsonobj.NonNull(top.Get("metadata"))
	return jsonobj.Marshal(out), nil
}

// refusedField says why field k, which EncodeRequest does not translate,
// cannot be sent: it asks for what Responses cannot give. "" means the
// field is dropped (a hint, or a field this adapter does not know).
func refusedField(k string, v json.RawMessage) string {
	if jsonobj.IsNull(v) {
		return ""
	}
	s := string(bytes.TrimSpace(v))
	switch k {
	case "n":
		if s != "1" {
			return "n: this provider (OpenAI Responses) returns one choice per call"
		}
	case "logprobs":
		if s != "false" {
			return "logprobs: this provider (OpenAI Responses) returns no log probabilities through this gateway"
		}
	case "top_logprobs":
		if s != "0" {
			return "top_logprobs: this provider (OpenAI Responses) returns no log probabilities through this gateway"
		}
	case "stop":
		if s != `""` && s != "[]" {
			return "stop: this provider (OpenAI Responses) has no stop sequences"
		}
	case "frequency_penalty", "presence_penalty":
		if s != "0" && s != "0.0" {
			return k + ": this provider (OpenAI Responses) has no penalties"
		}
	case "logit_bias":
		if s != "{}" {
			return "logit_bias: this provider (OpenAI Responses) has no logit bias"
		}
	case "modalities":
		if s != `["text"]` && s != "[]" {
			return "modalities: this provider (OpenAI Responses) answers in text only"
		}
	case "audio":
		return "audio: this provider (OpenAI Responses) answers in text only"
	case "functions", "function_call":
		return k + ": deprecated, not supported by this provider (OpenAI Responses): use tools and tool_choice"
	case "web_search_options":
		return "web_search_options: not supported by this provider (OpenAI Responses)"
	}
	return ""
}

// translateMessages fills instructions and input from messages.
func translateMessages(out *Request, view *chat.RequestView) error {
	if raw := view.Members.Get("messages"); jsonobj.IsNull(raw) || raw[0] != '[' {
		return rejected("messages must be an array", nil)
	}
	var system chat.SystemPrompt
	for i, msg := range view.ExactMessages() {
		at := fmt.Sprintf("messages[%d]", i)
		m := msg.Members
		if m == nil {
			return rejected(at+" must be an object", jsonobj.ErrNotObject)
		}
		role, _ := jsonobj.String(m.Get("role"))
		switch role {
		case "system", "developer":
			text, err := plainText(m.Get("content"), at)
			if err != nil {
				return err
			}
			system.Add(text)
		case "user":
			content, err := userContent(m.Get("content"), at)
			if err != nil {
				return err
			}
			out.Input = append(out.Input, InputMessage{Type: ItemMessage, Role: RoleUser, Content: content})
		case "assistant":
			if err := assistantItems(out, m, at); err != nil {
				return err
			}
		case "tool":
			text, err := plainText(m.Get("content"), at)
			if err != nil {
				return err
			}
			id, _ := jsonobj.String(m.Get("tool_call_id"))
			if id == "" {
				return rejected(at+".tool_call_id is required", nil)
			}
			out.Input = append(out.Input, FunctionCallOutput{Type: ItemFunctionCallOutput, CallID: id, Output: text})
		default:
			return rejected(fmt.Sprintf("%s.role %q is not supported by this provider (OpenAI Responses)", at, role), nil)
		}
	}
	if len(out.Input) == 0 {
		return rejected("messages must contain at least one user, assistant or tool message", nil)
	}
	out.Instructions = system.Text()
	return nil
}

// assistantItems adds an assistant message: a message item of its text and
// refusal (none when it has neither), then a function_call item per tool
// call.
func assistantItems(out *Request, m chat.Object, at string) error {
	var parts []InputPart
	content := m.Get("content")
	switch {
	case jsonobj.IsNull(content):
	case content[0] == '"':
		var s string
		if err := json.Unmarshal(content, &s); err != nil {
			return rejected(at+".content must be a string or an array of content parts", err)
		}
		if s != "" {
			parts = append(parts, InputPart{Type: PartOutputText, Text: &s})
		}
	case content[0] == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(content, &list); err != nil {
			return rejected(at+".content must be a string or an array of content parts", err)
		}
		for j, raw := range list {
			pat := fmt.Sprintf("%s.content[%d]", at, j)
			p, err := jsonobj.Parse(raw)
			if err != nil {
				return rejected(pat+" must be an object", err)
			}
			switch typ, _ := p.Str("type"); typ {
			case "text":
				if text, _ := p.Str("text"); text != "" {
					parts = append(parts, InputPart{Type: PartOutputText, Text: &text})
				}
			case "refusal":
				if refusal, _ := p.Str("refusal"); refusal != "" {
					parts = append(parts, InputPart{Type: PartRefusal, Refusal: &refusal})
				}
			default:
				return rejected(fmt.Sprintf("%s: content part type %q is not supported in an assistant message by this provider (OpenAI Responses)", pat, typ), nil)
			}
		}
	default:
		return rejected(at+".content must be a string or an array of content parts", nil)
	}
	if refusal, _ := jsonobj.String(m.Get("refusal")); refusal != "" {
		parts = append(parts, InputPart{Type: PartRefusal, Refusal: &refusal})
	}
	if len(parts) > 0 {
		out.Input = append(out.Input, InputMessage{Type: ItemMessage, Role: RoleAssistant, Content: parts})
	}
	calls, err := list(m.Get("tool_calls"), at+".tool_calls")
	if err != nil {
		return err
	}
	for j, raw := range calls {
		cat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
		c, err := jsonobj.Parse(raw)
		if err != nil {
			return rejected(cat+" must be an object", err)
		}
		if typ, _ := c.Str("type"); typ != "" && typ != "function" {
			return rejected(fmt.Sprintf("%s.type %q is not supported by this provider (OpenAI Responses)", cat, typ), nil)
		}
		f, err := jsonobj.Parse(c["function"])
		if err != nil {
			return rejected(cat+".function must be an object", err)
		}
		id, _ := c.Str("id")
		name, _ := f.Str("name")
		args, _ := f.Str("arguments")
		if id == "" || name == "" {
			return rejected(cat+" needs an id and a function name", nil)
		}
		out.Input = append(out.Input, FunctionCall{Type: ItemFunctionCall, CallID: id, Name: name, Arguments: args})
	}
	return nil
}

// userContent is a user message's content: a string as it is, or its parts
// as Responses input parts.
func userContent(raw json.RawMessage, at string) (any, error) {
	text, list, err := splitContent(raw, at, "content parts")
	if err != nil || list == nil {
		return text, err
	}
	parts := make([]InputPart, 0, len(list))
	for j, rawPart := range list {
		pat := fmt.Sprintf("%s.content[%d]", at, j)
		p, err := jsonobj.Parse(rawPart)
		if err != nil {
			return nil, rejected(pat+" must be an object", err)
		}
		switch typ, _ := p.Str("type"); typ {
		case "text":
			text, _ := p.Str("text")
			parts = append(parts, InputPart{Type: PartInputText, Text: &text})
		case "image_url":
			img, err := jsonobj.Parse(p["image_url"])
			if err != nil {
				return nil, rejected(pat+".image_url must be an object", err)
			}
			url, _ := img.Str("url")
			if url == "" {
				return nil, rejected(pat+".image_url.url is required", nil)
			}
			detail, _ := img.Str("detail")
			if detail == "" {
				detail = "auto"
			}
			parts = append(parts, InputPart{Type: PartInputImage, ImageURL: url, Detail: detail})
		case "input_audio":
			audio := jsonobj.NonNull(p["input_audio"])
			if audio == nil || audio[0] != '{' {
				return nil, rejected(pat+".input_audio must be an object", nil)
			}
			parts = append(parts, InputPart{Type: PartInputAudio, InputAudio: audio})
		case "file":
			f, err := jsonobj.Parse(p["file"])
			if err != nil {
				return nil, rejected(pat+".file must be an object", err)
			}
			fp := InputPart{Type: PartInputFile, FileID: jsonobj.NonNull(f["file_id"]), FileData: jsonobj.NonNull(f["file_data"]), Filename: jsonobj.NonNull(f["filename"])}
			if fp.FileID == nil && fp.FileData == nil {
				return nil, rejected(pat+".file needs a file_id or file_data", nil)
			}
			parts = append(parts, fp)
		default:
			return nil, rejected(fmt.Sprintf("%s: content part type %q is not supported by this provider (OpenAI Responses)", pat, typ), nil)
		}
	}
	return parts, nil
}

// plainText is the text of a content that may only hold text (a system,
// developer or tool message): a string, or text parts, concatenated.
func plainText(raw json.RawMessage, at string) (string, error) {
	text, list, err := splitContent(raw, at, "text parts")
	if err != nil || list == nil {
		return text, err
	}
	var b strings.Builder
	for j, rawPart := range list {
		p, err := jsonobj.Parse(rawPart)
		typ, _ := p.Str("type")
		if err != nil || typ != "text" {
			return "", rejected(fmt.Sprintf("%s.content[%d]: this message may only hold text parts for this provider (OpenAI Responses)", at, j), err)
		}
		text, _ := p.Str("text")
		b.WriteString(text)
	}
	return b.String(), nil
}

// splitContent reads a message's content: a string (null reads as ""),
// or an array, whose elements it returns; list is nil exactly when the
// content is no array (json.Unmarshal makes [] an empty slice). parts
// names what the array holds, for the error.
func splitContent(raw json.RawMessage, at, parts string) (text string, list []json.RawMessage, err error) {
	raw = bytes.TrimSpace(raw)
	if jsonobj.IsNull(raw) {
		return "", nil, nil
	}
	bad := at + ".content must be a string or an array of " + parts
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", nil, rejected(bad, err)
		}
		return text, nil, nil
	}
	if raw[0] != '[' {
		return "", nil, rejected(bad, nil)
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", nil, rejected(bad, err)
	}
	return "", list, nil
}

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// translateTool flattens a Chat Completions function tool, t its members
// (nil: it is not an object).
func translateTool(t chat.Object, at string) (FunctionTool, error) {
	if t == nil {
		return FunctionTool{}, rejected(at+" must be an object", jsonobj.ErrNotObject)
	}
	if typ, _ := jsonobj.String(t.Get("type")); typ != "function" {
		return FunctionTool{}, rejected(fmt.Sprintf("%s.type %q is not supported by this provider (OpenAI Responses): function tools only", at, typ), nil)
	}
	f, err := jsonobj.Parse(t.Get("function"))
	if err != nil {
		return FunctionTool{}, rejected(at+".function must be an object", err)
	}
	out := FunctionTool{Type: ToolFunction, Parameters: jsonobj.NonNull(f["parameters"]), Strict: jsonobj.NonNull(f["strict"])}
	if out.Name, _ = f.Str("name"); out.Name == "" {
		return FunctionTool{}, rejected(at+".function.name is required", nil)
	}
	if d, ok := f.Str("description"); ok {
		out.Description = &d
	}
	if out.Parameters == nil {
		out.Parameters = emptySchema
	}
	if out.Strict == nil {
		out.Strict = json.RawMessage("false") // Chat's default; Responses' own is true
	}
	return out, nil
}

// toolChoice translates tool_choice.
func toolChoice(raw json.RawMessage) (any, error) {
	const want = "tool_choice must be auto, none, required, a function or allowed_tools"
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto", "none", "required":
			return s, nil
		}
		return nil, rejected(fmt.Sprintf("tool_choice %q is not supported by this provider (OpenAI Responses)", s), nil)
	}
	c, err := jsonobj.Parse(raw)
	if err != nil {
		return nil, rejected(want, err)
	}
	switch typ, _ := c.Str("type"); typ {
	case "function":
		f, err := jsonobj.Parse(c["function"])
		if err != nil {
			return nil, rejected(want, err)
		}
		name, _ := f.Str("name")
		if name == "" {
			return nil, rejected("tool_choice.function.name is required", nil)
		}
		return &NamedTool{Type: ToolFunction, Name: name}, nil
	case "allowed_tools":
		a, err := jsonobj.Parse(c["allowed_tools"])
		if err != nil {
			return nil, rejected("tool_choice.allowed_tools must be an object", err)
		}
		mode, _ := a.Str("mode")
		tools := []NamedTool{}
		allowed, err := list(a["tools"], "tool_choice.allowed_tools.tools")
		if err != nil {
			return nil, err
		}
		for i, raw := range allowed {
			t, err := jsonobj.Parse(raw)
			if err != nil {
				return nil, rejected(fmt.Sprintf("tool_choice.allowed_tools.tools[%d] must be an object", i), err)
			}
			f, _ := jsonobj.Parse(t["function"])
			name, _ := f.Str("name")
			if typ, _ := t.Str("type"); typ != "function" || name == "" {
				return nil, rejected(fmt.Sprintf("tool_choice.allowed_tools.tools[%d] must be a function with a name", i), nil)
			}
			tools = append(tools, NamedTool{Type: ToolFunction, Name: name})
		}
		return &AllowedTools{Type: ToolAllowedTools, Mode: mode, Tools: tools}, nil
	}
	return nil, rejected(want, nil)
}

// textFormat translates response_format into text.format.
func textFormat(raw json.RawMessage) (*TextFormat, error) {
	rf, err := jsonobj.Parse(raw)
	if err != nil {
		return nil, rejected("response_format must be an object", err)
	}
	switch typ, _ := rf.Str("type"); typ {
	case FormatText, FormatJSONObject:
		return &TextFormat{Type: typ}, nil
	case FormatJSONSchema:
		js, err := jsonobj.Parse(rf["json_schema"])
		if err != nil {
			return nil, rejected("response_format.json_schema must be an object", err)
		}
		name, _ := js.Str("name")
		if name == "" {
			return nil, rejected("response_format.json_schema.name is required", nil)
		}
		return &TextFormat{Type: FormatJSONSchema, Name: name, Description: jsonobj.NonNull(js["description"]),
			Schema: jsonobj.NonNull(js["schema"]), Strict: jsonobj.NonNull(js["strict"])}, nil
	default:
		return nil, rejected(fmt.Sprintf("response_format type %q is not supported by this provider (OpenAI Responses)", typ), nil)
	}
}

// list is an array's elements, none for null; anything else is refused,
// naming at.
func list(raw json.RawMessage, at string) ([]json.RawMessage, error) {
	l, ok := jsonobj.Elements(raw)
	if !ok {
		return nil, rejected(at+" must be an array", nil)
	}
	return l, nil
}

func rejected(msg string, err error) *llm.ProviderError {
	// Status 0: no upstream was called.
	return &llm.ProviderError{Class: llm.FailRejected, Message: msg, Err: err}
}
