package converse

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithydocument "github.com/aws/smithy-go/document"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// refused are the Chat Completions fields a request toward
// Converse is refused for when set beyond their default, in the order they
// are checked: they change the answer and Converse has no counterpart (n
// above 1, logprobs true, top_logprobs above 0, a non-empty logit_bias,
// audio output, output modalities other than text, the legacy functions,
// and a JSON response_format).
var refused = []string{
	"n", "logprobs", "top_logprobs", "logit_bias", "audio", "modalities",
	"functions", "function_call", "response_format",
}

// translated are the Chat Completions fields FromHub
// translates.
var translated = []string{
	"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"stop", "tools", "tool_choice",
}

// readFields are the top-level fields FromHub reads: the ones it
// translates, the ones it refuses beyond their default, and the ones the
// gateway sets ("stream", "stream_options"). Every other field that is not
// null is left out and named in dropped: the hints (user, metadata, store,
// service_tier, parallel_tool_calls, prompt_cache_key, safety_identifier,
// seed, frequency_penalty, presence_penalty, reasoning_effort, top_k,
// verbosity, prediction, web_search_options, ...) and any field this
// translation does not know.
var readFields = func() map[string]bool {
	m := map[string]bool{"stream": true, "stream_options": true}
	for _, k := range translated {
		m[k] = true
	}
	for _, k := range refused {
		m[k] = true
	}
	return m
}()

// FromHub translates a Chat Completions request body (a JSON object as the
// gateway sends upstream: "model", "messages", "stream": true, "stream_options",
// and any of the Chat parameters) into a ConverseStream call of modelID.
// dropped names the request's fields left out as mere hints (in the order met).
// A field that would change the answer and that Converse cannot express
// (n > 1, logprobs, a json_schema response_format, audio, ...) is an error:
// a *llm.ProviderError{Class: llm.FailRejected, Message: "<field> is not supported on Bedrock Converse"}.
//
// The translation:
//
//   - system and developer messages, wherever they are, become one system
//     text block, joined by a blank line;
//   - user messages become user turns of text and image blocks: an
//     image_url part with a base64 data: URL of a png, jpeg, gif or webp
//     image becomes an image block of its bytes; an http(s) URL is refused,
//     as Converse cannot fetch it;
//   - an assistant's content becomes text blocks and its tool_calls
//     toolUse blocks (the arguments, a JSON object, as the input document);
//   - tool messages become toolResult blocks of a user turn; consecutive
//     turns of one role are merged into one, as Converse requires
//     alternating roles; empty text is left out, as Converse rejects it;
//   - tools (type function) become toolSpecs with the parameters as the
//     JSON input schema (strict passed when true); tool_choice auto,
//     required, {function} becomes auto, any, {tool}; tool_choice none
//     leaves the tools out, as Converse has no choice of none;
//   - max_completion_tokens, else max_tokens, becomes maxTokens;
//     temperature and top_p pass as they are; stop (a string or a list)
//     becomes stopSequences, empty strings left out;
//   - the message-level "name" is left out and named "messages[].name".
//
// JSON objects go to the SDK as documents of their decoded values, numbers
// kept as written; the SDK writes an object's keys sorted.
func FromHub(req *llm.UpstreamRequest) (in *bedrockruntime.ConverseStreamInput, dropped []string, err error) {
	// Members are what this translation reads: each name exactly as
	// written.
	view, _ := req.ChatView()
	top := view.Members
	if top == nil {
		return nil, nil, Refuse("the request body is not a JSON object")
	}
	for _, k := range refused {
		if refuses(k, top.Get(k)) {
			return nil, nil, Refuse(k + " is not supported on Bedrock Converse")
		}
	}
	modelID := req.Model
	if modelID == "" {
		modelID, _ = jsonobj.String(top.Get("model"))
	}
	in = &bedrockruntime.ConverseStreamInput{ModelId: aws.String(modelID)}

	msgs, err := messages(view)
	if err != nil {
		return nil, nil, err
	}
	if err := turns(in, msgs); err != nil {
		return nil, nil, err
	}
	if in.InferenceConfig, err = inference(top); err != nil {
		return nil, nil, err
	}
	if in.ToolConfig, err = toolConfig(view); err != nil {
		return nil, nil, err
	}

	dropped = view.Unread(readFields)
	for _, m := range msgs {
		if !jsonobj.IsNull(m.Members.Get("name")) {
			dropped = append(dropped, "messages[].name")
			break
		}
	}
	return in, dropped, nil
}

// messages are the request's messages; none for null or absent.
func messages(view *chat.RequestView) ([]chat.RequestViewMessage, error) {
	if err := isList(view.Members.Get("messages"), "messages"); err != nil {
		return nil, err
	}
	if jsonobj.IsNull(view.Members.Get("messages")) {
		return nil, nil
	}
	return view.ExactMessages(), nil
}

// refuses reports whether field k of refused, of value v, asks
// for what Converse cannot give: it is set, and not to its default.
func refuses(k string, v json.RawMessage) bool {
	if jsonobj.IsNull(v) {
		return false
	}
	s := string(bytes.Join(bytes.Fields(v), nil))
	switch k {
	case "n":
		return s != "1"
	case "logprobs":
		return s != "false"
	case "top_logprobs":
		return s != "0"
	case "logit_bias":
		return s != "{}"
	case "modalities":
		var ms []string
		if json.Unmarshal(v, &ms) != nil {
			return true
		}
		for _, m := range ms {
			if m != "text" {
				return true
			}
		}
		return false
	case "response_format":
		f, err := jsonobj.Parse(v)
		if err != nil {
			return true
		}
		typ, _ := f.Str("type")
		return typ != "" && typ != "text"
	}
	return true // audio, functions, function_call: any value
}

// turns fills the system prompt and the turns from msgs.
func turns(in *bedrockruntime.ConverseStreamInput, msgs []chat.RequestViewMessage) error {
	var system chat.SystemPrompt
	for i, msg := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		m := msg.Members
		if m == nil {
			return Refuse(at + " must be an object")
		}
		role, _ := jsonobj.String(m.Get("role"))
		switch role {
		case "system", "developer":
			text, err := chat.PlainContent(m.Get("content"), at, content, textOf)
			if err != nil {
				return err
			}
			system.Add(text)
		case "user":
			blocks, err := content(m.Get("content"), at)
			if err != nil {
				return err
			}
			in.Messages = AppendTurn(in.Messages, types.ConversationRoleUser, blocks)
		case "assistant":
			blocks, err := content(m.Get("content"), at)
			if err != nil {
				return err
			}
			calls, err := list(m.Get("tool_calls"), at+".tool_calls")
			if err != nil {
				return err
			}
			for j, rawCall := range calls {
				b, err := toolUse(rawCall, fmt.Sprintf("%s.tool_calls[%d]", at, j))
				if err != nil {
					return err
				}
				blocks = append(blocks, b)
			}
			in.Messages = AppendTurn(in.Messages, types.ConversationRoleAssistant, blocks)
		case "tool":
			text, err := chat.PlainContent(m.Get("content"), at, content, textOf)
			if err != nil {
				return err
			}
			id, _ := jsonobj.String(m.Get("tool_call_id"))
			if id == "" {
				return Refuse(at + ".tool_call_id is required")
			}
			in.Messages = AppendTurn(in.Messages, types.ConversationRoleUser, []types.ContentBlock{
				&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
					ToolUseId: aws.String(id),
					Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: text}},
				}},
			})
		default:
			return Refuse(fmt.Sprintf("%s.role %s is not supported on Bedrock Converse", at, Quote(role)))
		}
	}
	if len(in.Messages) == 0 {
		return Refuse("messages must contain at least one user or assistant message")
	}
	if text := system.Text(); text != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: text}}
	}
	return nil
}

// AppendTurn adds blocks as a turn of role, merged into the last turn
// when it has the same role. A turn with no blocks is left out.
func AppendTurn(msgs []types.Message, role types.ConversationRole, blocks []types.ContentBlock) []types.Message {
	if len(blocks) == 0 {
		return msgs
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		return msgs
	}
	return append(msgs, types.Message{Role: role, Content: blocks})
}

// textOf is a content block's text; a block that is not text is refused,
// as the content of a message at may only hold text.
func textOf(b types.ContentBlock, at string) (string, error) {
	if t, ok := b.(*types.ContentBlockMemberText); ok {
		return t.Value, nil
	}
	return "", Refuse(at + ".content may only hold text on Bedrock Converse")
}

// content translates a message content: a string, or an array of
// text, refusal and image_url parts. Empty text is left out.
func content(raw json.RawMessage, at string) ([]types.ContentBlock, error) {
	s, parts, err := stringOrList(raw, at+".content must be a string or an array of content parts")
	if err != nil || s == "" && parts == nil {
		return nil, err
	}
	if s != "" {
		return []types.ContentBlock{&types.ContentBlockMemberText{Value: s}}, nil
	}
	var blocks []types.ContentBlock
	err = eachObject(parts, at+".content", " must be a content part object", func(p jsonobj.Object, pat string) error {
		typ, _ := p.Str("type")
		switch typ {
		case "text", "refusal":
			s, ok := p.Str(typ)
			if !ok && !jsonobj.IsNull(p[typ]) {
				return Refuse(pat + "." + typ + " must be a string")
			}
			if s != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: s})
			}
		case "image_url":
			img, err := jsonobj.Parse(p["image_url"])
			if err != nil {
				return Refuse(pat + ".image_url is required")
			}
			u, _ := img.Str("url")
			b, err := imageURL(u, pat+".image_url.url")
			if err != nil {
				return err
			}
			blocks = append(blocks, b)
		default:
			return Refuse(fmt.Sprintf("%s: content part type %s is not supported on Bedrock Converse", pat, Quote(typ)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return blocks, nil
}

// imageFormats are the image media types Converse takes, by the
// format it names them.
var imageFormats = map[string]types.ImageFormat{
	"image/png":  types.ImageFormatPng,
	"image/jpeg": types.ImageFormatJpeg,
	"image/jpg":  types.ImageFormatJpeg,
	"image/gif":  types.ImageFormatGif,
	"image/webp": types.ImageFormatWebp,
}

// imageURL reads an image_url's url (at is its path, for errors): a
// base64 data: URL becomes an image block of its bytes.
func imageURL(u, at string) (types.ContentBlock, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
			return nil, Refuse(at + ": an http(s) image URL is not supported on Bedrock Converse, which cannot fetch it; send the image as a base64 data: URL")
		}
		return nil, Refuse(at + " must be a base64 data: URL (data:image/png;base64,...)")
	}
	meta, data, ok := strings.Cut(rest, ",")
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isBase64 {
		return nil, Refuse(at + " must be a base64 data: URL (data:image/png;base64,...)")
	}
	mediaType, _, _ = strings.Cut(mediaType, ";")
	format, ok := imageFormats[strings.ToLower(strings.TrimSpace(mediaType))]
	if !ok {
		return nil, Refuse(fmt.Sprintf("%s: image type %s is not supported on Bedrock Converse (png, jpeg, gif, webp)", at, Quote(mediaType)))
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(data); err != nil {
			return nil, Refuse(at + ": the data: URL is not valid base64")
		}
	}
	return &types.ContentBlockMemberImage{Value: types.ImageBlock{
		Format: format,
		Source: &types.ImageSourceMemberBytes{Value: b},
	}}, nil
}

// toolUse translates an assistant's tool call.
func toolUse(raw json.RawMessage, at string) (types.ContentBlock, error) {
	c, err := jsonobj.Parse(raw)
	if err != nil {
		return nil, Refuse(at + " must be a tool call object")
	}
	if typ, _ := c.Str("type"); typ != "" && typ != "function" {
		return nil, Refuse(fmt.Sprintf("%s.type %s is not supported on Bedrock Converse", at, Quote(typ)))
	}
	fn, err := jsonobj.Parse(c["function"])
	if err != nil {
		return nil, Refuse(at + ".function must be an object")
	}
	id, _ := c.Str("id")
	name, _ := fn.Str("name")
	args, ok := fn.Str("arguments")
	if !ok && !jsonobj.IsNull(fn["arguments"]) {
		return nil, Refuse(at + ".function.arguments must be a string")
	}
	input := json.RawMessage(strings.TrimSpace(args))
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if input[0] != '{' || !json.Valid(input) {
		return nil, Refuse(at + ".function.arguments must be a JSON object")
	}
	doc, err := Document(input, at+".function.arguments")
	if err != nil {
		return nil, err
	}
	return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
		ToolUseId: aws.String(id),
		Name:      aws.String(name),
		Input:     doc,
	}}, nil
}

// toolConfig translates tools and tool_choice; nil when there are no tools,
// or tool_choice is none.
func toolConfig(view *chat.RequestView) (*types.ToolConfiguration, error) {
	rawTools := view.Members.Get("tools")
	if err := isList(rawTools, "tools"); err != nil {
		return nil, err
	}
	var tools []types.Tool
	if !jsonobj.IsNull(rawTools) {
		for i, t := range view.ExactTools() {
			spec, err := tool(t.Members, fmt.Sprintf("tools[%d]", i))
			if err != nil {
				return nil, err
			}
			tools = append(tools, spec)
		}
	}
	choice, none, err := toolChoice(view.Members.Get("tool_choice"))
	if err != nil {
		return nil, err
	}
	if len(tools) == 0 || none {
		return nil, nil
	}
	return &types.ToolConfiguration{Tools: tools, ToolChoice: choice}, nil
}

// tool translates a tool, t its members (nil: it is not an object).
func tool(t chat.Object, at string) (types.Tool, error) {
	if t == nil {
		return nil, Refuse(at + " must be a tool object")
	}
	if typ, _ := jsonobj.String(t.Get("type")); typ != "function" {
		return nil, Refuse(fmt.Sprintf("%s.type %s is not supported on Bedrock Converse", at, Quote(typ)))
	}
	fn, err := jsonobj.Parse(t.Get("function"))
	if err != nil {
		return nil, Refuse(at + ".function must be an object")
	}
	name, _ := fn.Str("name")
	spec := types.ToolSpecification{Name: aws.String(name)}
	if d, _ := fn.Str("description"); d != "" {
		spec.Description = aws.String(d)
	}
	if strict := bytes.TrimSpace(fn["strict"]); string(strict) == "true" {
		spec.Strict = aws.Bool(true)
	}
	schema := bytes.TrimSpace(fn["parameters"])
	if jsonobj.IsNull(schema) {
		schema = []byte(`{"type":"object","properties":{}}`)
	}
	if schema[0] != '{' {
		return nil, Refuse(at + ".function.parameters must be a JSON object")
	}
	doc, err := Document(schema, at+".function.parameters")
	if err != nil {
		return nil, err
	}
	spec.InputSchema = &types.ToolInputSchemaMemberJson{Value: doc}
	return &types.ToolMemberToolSpec{Value: spec}, nil
}

// toolChoice translates tool_choice: nil for none given (Converse's
// default, auto), none true for "none".
func toolChoice(raw json.RawMessage) (choice types.ToolChoice, none bool, err error) {
	raw = bytes.TrimSpace(raw)
	if jsonobj.IsNull(raw) {
		return nil, false, nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto":
			return &types.ToolChoiceMemberAuto{}, false, nil
		case "required":
			return &types.ToolChoiceMemberAny{}, false, nil
		case "none":
			return nil, true, nil
		}
		return nil, false, Refuse(fmt.Sprintf("tool_choice %s is not supported on Bedrock Converse", Quote(s)))
	}
	c, err := jsonobj.Parse(raw)
	if err != nil {
		return nil, false, Refuse("tool_choice must be auto, none, required or a function")
	}
	typ, _ := c.Str("type")
	fn, err := jsonobj.Parse(c["function"])
	name, _ := fn.Str("name")
	if typ != "function" || err != nil || name == "" {
		return nil, false, Refuse("tool_choice must be auto, none, required or a function")
	}
	return &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(name)}}, false, nil
}

// inference translates the sampling and length parameters; nil when
// the request sets none.
func inference(top chat.Object) (*types.InferenceConfiguration, error) {
	var c types.InferenceConfiguration
	set := false
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		v := top.Get(k)
		if jsonobj.IsNull(v) {
			continue
		}
		var f float64
		if json.Unmarshal(v, &f) != nil || f < 1 || f > math.MaxInt32 || f != math.Trunc(f) {
			return nil, Refuse(k + " must be an integer from 1 to 2147483647")
		}
		if c.MaxTokens == nil {
			c.MaxTokens = aws.Int32(int32(f))
			set = true
		}
	}
	for _, p := range []struct {
		k   string
		dst **float32
	}{{"temperature", &c.Temperature}, {"top_p", &c.TopP}} {
		v := top.Get(p.k)
		if jsonobj.IsNull(v) {
			continue
		}
		var f float64
		if json.Unmarshal(v, &f) != nil || math.Abs(f) > math.MaxFloat32 {
			return nil, Refuse(p.k + " must be a number")
		}
		*p.dst = aws.Float32(float32(f))
		set = true
	}
	if stop := top.Get("stop"); !jsonobj.IsNull(stop) {
		var list []string
		if stop[0] == '"' {
			var s string
			if json.Unmarshal(stop, &s) != nil {
				return nil, Refuse("stop must be a string or an array of strings")
			}
			list = []string{s}
		} else if json.Unmarshal(stop, &list) != nil {
			return nil, Refuse("stop must be a string or an array of strings")
		}
		for _, s := range list {
			if s != "" {
				c.StopSequences = append(c.StopSequences, s)
			}
		}
		set = set || len(c.StopSequences) > 0
	}
	if !set {
		return nil, nil
	}
	return &c, nil
}

// Document is the JSON value raw as a document the SDK sends as it is.
// Numbers are kept as written (document.Number), not rounded through
// float64. A value the SDK's encoder cannot write (an object with an empty
// key) is refused here, naming at: the SDK would otherwise send a body
// that is not JSON.
func Document(raw json.RawMessage, at string) (document.Interface, error) {
	if !json.Valid(raw) {
		return nil, Refuse(at + " must be valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, Refuse(at + " must be valid JSON")
	}
	doc := document.NewLazyDocument(docValue(v))
	if _, err := doc.MarshalSmithyDocument(); err != nil {
		return nil, &llm.ProviderError{Class: llm.FailRejected, Message: at + " cannot be sent to Bedrock Converse (an object key is empty)", Err: err}
	}
	return doc, nil
}

// docValue is a value decoded with UseNumber with its numbers as
// document.Number, which the SDK's encoder writes as they are (a
// json.Number would be written as a string).
func docValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		return smithydocument.Number(v)
	case map[string]any:
		for k, e := range v {
			v[k] = docValue(e)
		}
	case []any:
		for i, e := range v {
			v[i] = docValue(e)
		}
	}
	return v
}

// stringOrList reads content that is a string or an array: the string
// ("" for null), or the array's elements; anything else is rejected with
// msg.
func stringOrList(raw json.RawMessage, msg string) (string, []json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if jsonobj.IsNull(raw) {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", nil, Refuse(msg)
		}
		return s, nil, nil
	}
	l, ok := jsonobj.Elements(raw)
	if !ok {
		return "", nil, Refuse(msg)
	}
	return "", l, nil
}

// eachObject calls f with each element of list, an object whose path is
// at[i], until f fails; an element that is no object is rejected, its path
// followed by notObject.
func eachObject(list []json.RawMessage, at, notObject string, f func(o jsonobj.Object, oat string) error) error {
	for i, raw := range list {
		oat := fmt.Sprintf("%s[%d]", at, i)
		o, err := jsonobj.Parse(raw)
		if err != nil {
			return Refuse(oat + notObject)
		}
		if err := f(o, oat); err != nil {
			return err
		}
	}
	return nil
}

// list is an array's elements, none for null or absent; anything else
// is refused, naming at.
func list(raw json.RawMessage, at string) ([]json.RawMessage, error) {
	l, ok := jsonobj.Elements(raw)
	if !ok {
		return nil, Refuse(at + " must be an array")
	}
	return l, nil
}

// isList refuses raw, naming at, unless it is an array, null or absent.
func isList(raw json.RawMessage, at string) error {
	if !jsonobj.IsNull(raw) && raw[0] != '[' {
		return Refuse(at + " must be an array")
	}
	return nil
}

// Quote is s, cut to its first 64 bytes, quoted as Go quotes a string: a
// value of the request named in a refusal.
func Quote(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strconv.Quote(s)
}

// Refuse is the refusal of a request the translation cannot send, with
// msg: a *llm.ProviderError of class FailRejected and status 0, as no
// upstream was called.
func Refuse(msg string) *llm.ProviderError {
	return &llm.ProviderError{Class: llm.FailRejected, Message: msg}
}
