package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithydocument "github.com/aws/smithy-go/document"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
	"github.com/buzzgate/buzzgate/pkg/wire/converse"
)

// converseRefused are the Chat Completions fields a request toward
// Converse is refused for when set beyond their default, in the order they
// are checked: they change the answer and Converse has no counterpart (n
// above 1, logprobs true, top_logprobs above 0, a non-empty logit_bias,
// audio output, output modalities other than text, the legacy functions,
// and a JSON response_format).
var converseRefused = []string{
	"n", "logprobs", "top_logprobs", "logit_bias", "audio", "modalities",
	"functions", "function_call", "response_format",
}

// converseTranslated are the Chat Completions fields converseInput
// translates.
var converseTranslated = []string{
	"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"stop", "tools", "tool_choice",
}

// converseRead are the top-level fields converseInput reads: the ones it
// translates, the ones it refuses beyond their default, and the ones the
// gateway sets ("stream", "stream_options"). Every other field that is not
// null is left out and named in dropped: the hints (user, metadata, store,
// service_tier, parallel_tool_calls, prompt_cache_key, safety_identifier,
// seed, frequency_penalty, presence_penalty, reasoning_effort, top_k,
// verbosity, prediction, web_search_options, ...) and any field this
// translation does not know.
var converseRead = func() map[string]bool {
	m := map[string]bool{"stream": true, "stream_options": true}
	for _, k := range converseTranslated {
		m[k] = true
	}
	for _, k := range converseRefused {
		m[k] = true
	}
	return m
}()

// converseInput translates a Chat Completions request body (a JSON object as the
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
func converseInput(modelID string, chatBody []byte) (in *bedrockruntime.ConverseStreamInput, dropped []string, err error) {
	top, err := upstream.ParseObject(chatBody)
	if err != nil {
		return nil, nil, convRejected("the request body is not a JSON object")
	}
	for _, k := range converseRefused {
		if convRefuses(k, top[k]) {
			return nil, nil, convRejected(k + " is not supported on Bedrock Converse")
		}
	}
	if modelID == "" {
		modelID, _ = top.Str("model")
	}
	in = &bedrockruntime.ConverseStreamInput{ModelId: aws.String(modelID)}

	if err := convMessages(in, top["messages"]); err != nil {
		return nil, nil, err
	}
	if in.InferenceConfig, err = convInference(top); err != nil {
		return nil, nil, err
	}
	if in.ToolConfig, err = convTools(top["tools"], top["tool_choice"]); err != nil {
		return nil, nil, err
	}

	dropped = llm.UnreadFields(chatBody, converseRead)
	if msgs, err := convList(top["messages"], "messages"); err == nil {
		for _, raw := range msgs {
			if m, err := upstream.ParseObject(raw); err == nil && !upstream.IsNull(m["name"]) {
				dropped = append(dropped, "messages[].name")
				break
			}
		}
	}
	return in, dropped, nil
}

// convRefuses reports whether field k of converseRefused, of value v, asks
// for what Converse cannot give: it is set, and not to its default.
func convRefuses(k string, v json.RawMessage) bool {
	if upstream.IsNull(v) {
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
		f, err := upstream.ParseObject(v)
		if err != nil {
			return true
		}
		typ, _ := f.Str("type")
		return typ != "" && typ != "text"
	}
	return true // audio, functions, function_call: any value
}

// convMessages fills the system prompt and the turns from messages.
func convMessages(in *bedrockruntime.ConverseStreamInput, raw json.RawMessage) error {
	msgs, err := convList(raw, "messages")
	if err != nil {
		return err
	}
	var system []string
	for i, rawMsg := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		m, err := upstream.ParseObject(rawMsg)
		if err != nil {
			return convRejected(at + " must be an object")
		}
		role, _ := m.Str("role")
		switch role {
		case "system", "developer":
			text, err := convPlainContent(m["content"], at)
			if err != nil {
				return err
			}
			if text != "" {
				system = append(system, text)
			}
		case "user":
			blocks, err := convContent(m["content"], at)
			if err != nil {
				return err
			}
			in.Messages = convAppendTurn(in.Messages, types.ConversationRoleUser, blocks)
		case "assistant":
			blocks, err := convContent(m["content"], at)
			if err != nil {
				return err
			}
			calls, err := convList(m["tool_calls"], at+".tool_calls")
			if err != nil {
				return err
			}
			for j, rawCall := range calls {
				b, err := convToolUse(rawCall, fmt.Sprintf("%s.tool_calls[%d]", at, j))
				if err != nil {
					return err
				}
				blocks = append(blocks, b)
			}
			in.Messages = convAppendTurn(in.Messages, types.ConversationRoleAssistant, blocks)
		case "tool":
			text, err := convPlainContent(m["content"], at)
			if err != nil {
				return err
			}
			id, _ := m.Str("tool_call_id")
			if id == "" {
				return convRejected(at + ".tool_call_id is required")
			}
			in.Messages = convAppendTurn(in.Messages, types.ConversationRoleUser, []types.ContentBlock{
				&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
					ToolUseId: aws.String(id),
					Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: text}},
				}},
			})
		default:
			return convRejected(fmt.Sprintf("%s.role %q is not supported on Bedrock Converse", at, convTruncate(role, 64)))
		}
	}
	if len(in.Messages) == 0 {
		return convRejected("messages must contain at least one user or assistant message")
	}
	if len(system) > 0 {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: strings.Join(system, "\n\n")}}
	}
	return nil
}

// convAppendTurn adds blocks as a turn of role, merged into the last turn
// when it has the same role. A turn with no blocks is left out.
func convAppendTurn(msgs []types.Message, role types.ConversationRole, blocks []types.ContentBlock) []types.Message {
	if len(blocks) == 0 {
		return msgs
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		return msgs
	}
	return append(msgs, types.Message{Role: role, Content: blocks})
}

// convPlainContent is the text of a content that may only hold text: a
// string, or an array of text (and refusal) parts, concatenated.
func convPlainContent(raw json.RawMessage, at string) (string, error) {
	blocks, err := convContent(raw, at)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, bl := range blocks {
		t, ok := bl.(*types.ContentBlockMemberText)
		if !ok {
			return "", convRejected(at + ".content may only hold text on Bedrock Converse")
		}
		b.WriteString(t.Value)
	}
	return b.String(), nil
}

// convContent translates a message content: a string, or an array of
// text, refusal and image_url parts. Empty text is left out.
func convContent(raw json.RawMessage, at string) ([]types.ContentBlock, error) {
	s, parts, err := convStringOrList(raw, at+".content must be a string or an array of content parts")
	if err != nil || s == "" && parts == nil {
		return nil, err
	}
	if s != "" {
		return []types.ContentBlock{&types.ContentBlockMemberText{Value: s}}, nil
	}
	var blocks []types.ContentBlock
	err = convEachObject(parts, at+".content", " must be a content part object", func(p convObject, pat string) error {
		typ, _ := p.Str("type")
		switch typ {
		case "text", "refusal":
			s, ok := p.Str(typ)
			if !ok && !upstream.IsNull(p[typ]) {
				return convRejected(pat + "." + typ + " must be a string")
			}
			if s != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: s})
			}
		case "image_url":
			img, err := upstream.ParseObject(p["image_url"])
			if err != nil {
				return convRejected(pat + ".image_url is required")
			}
			u, _ := img.Str("url")
			b, err := convImage(u, pat+".image_url.url")
			if err != nil {
				return err
			}
			blocks = append(blocks, b)
		default:
			return convRejected(fmt.Sprintf("%s: content part type %q is not supported on Bedrock Converse", pat, convTruncate(typ, 64)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return blocks, nil
}

// convImageFormats are the image media types Converse takes, by the
// format it names them.
var convImageFormats = map[string]types.ImageFormat{
	"image/png":  types.ImageFormatPng,
	"image/jpeg": types.ImageFormatJpeg,
	"image/jpg":  types.ImageFormatJpeg,
	"image/gif":  types.ImageFormatGif,
	"image/webp": types.ImageFormatWebp,
}

// convImage reads an image_url's url (at is its path, for errors): a
// base64 data: URL becomes an image block of its bytes.
func convImage(u, at string) (types.ContentBlock, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
			return nil, convRejected(at + ": an http(s) image URL is not supported on Bedrock Converse, which cannot fetch it; send the image as a base64 data: URL")
		}
		return nil, convRejected(at + " must be a base64 data: URL (data:image/png;base64,...)")
	}
	meta, data, ok := strings.Cut(rest, ",")
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isBase64 {
		return nil, convRejected(at + " must be a base64 data: URL (data:image/png;base64,...)")
	}
	mediaType, _, _ = strings.Cut(mediaType, ";")
	format, ok := convImageFormats[strings.ToLower(strings.TrimSpace(mediaType))]
	if !ok {
		return nil, convRejected(fmt.Sprintf("%s: image type %q is not supported on Bedrock Converse (png, jpeg, gif, webp)", at, convTruncate(mediaType, 64)))
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(data); err != nil {
			return nil, convRejected(at + ": the data: URL is not valid base64")
		}
	}
	return &types.ContentBlockMemberImage{Value: types.ImageBlock{
		Format: format,
		Source: &types.ImageSourceMemberBytes{Value: b},
	}}, nil
}

// convToolUse translates an assistant's tool call.
func convToolUse(raw json.RawMessage, at string) (types.ContentBlock, error) {
	c, err := upstream.ParseObject(raw)
	if err != nil {
		return nil, convRejected(at + " must be a tool call object")
	}
	if typ, _ := c.Str("type"); typ != "" && typ != "function" {
		return nil, convRejected(fmt.Sprintf("%s.type %q is not supported on Bedrock Converse", at, convTruncate(typ, 64)))
	}
	fn, err := upstream.ParseObject(c["function"])
	if err != nil {
		return nil, convRejected(at + ".function must be an object")
	}
	id, _ := c.Str("id")
	name, _ := fn.Str("name")
	args, ok := fn.Str("arguments")
	if !ok && !upstream.IsNull(fn["arguments"]) {
		return nil, convRejected(at + ".function.arguments must be a string")
	}
	input := json.RawMessage(strings.TrimSpace(args))
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if input[0] != '{' || !json.Valid(input) {
		return nil, convRejected(at + ".function.arguments must be a JSON object")
	}
	doc, err := convDocument(input, at+".function.arguments")
	if err != nil {
		return nil, err
	}
	return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
		ToolUseId: aws.String(id),
		Name:      aws.String(name),
		Input:     doc,
	}}, nil
}

// convTools translates tools and tool_choice; nil when there are no tools,
// or tool_choice is none.
func convTools(rawTools, rawChoice json.RawMessage) (*types.ToolConfiguration, error) {
	list, err := convList(rawTools, "tools")
	if err != nil {
		return nil, err
	}
	var tools []types.Tool
	for i, raw := range list {
		t, err := convTool(raw, fmt.Sprintf("tools[%d]", i))
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	choice, none, err := convToolChoice(rawChoice)
	if err != nil {
		return nil, err
	}
	if len(tools) == 0 || none {
		return nil, nil
	}
	return &types.ToolConfiguration{Tools: tools, ToolChoice: choice}, nil
}

func convTool(raw json.RawMessage, at string) (types.Tool, error) {
	t, err := upstream.ParseObject(raw)
	if err != nil {
		return nil, convRejected(at + " must be a tool object")
	}
	if typ, _ := t.Str("type"); typ != "function" {
		return nil, convRejected(fmt.Sprintf("%s.type %q is not supported on Bedrock Converse", at, convTruncate(typ, 64)))
	}
	fn, err := upstream.ParseObject(t["function"])
	if err != nil {
		return nil, convRejected(at + ".function must be an object")
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
	if upstream.IsNull(schema) {
		schema = []byte(`{"type":"object","properties":{}}`)
	}
	if schema[0] != '{' {
		return nil, convRejected(at + ".function.parameters must be a JSON object")
	}
	doc, err := convDocument(schema, at+".function.parameters")
	if err != nil {
		return nil, err
	}
	spec.InputSchema = &types.ToolInputSchemaMemberJson{Value: doc}
	return &types.ToolMemberToolSpec{Value: spec}, nil
}

// convToolChoice translates tool_choice: nil for none given (Converse's
// default, auto), none true for "none".
func convToolChoice(raw json.RawMessage) (choice types.ToolChoice, none bool, err error) {
	raw = bytes.TrimSpace(raw)
	if upstream.IsNull(raw) {
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
		return nil, false, convRejected(fmt.Sprintf("tool_choice %q is not supported on Bedrock Converse", convTruncate(s, 64)))
	}
	c, err := upstream.ParseObject(raw)
	if err != nil {
		return nil, false, convRejected("tool_choice must be auto, none, required or a function")
	}
	typ, _ := c.Str("type")
	fn, err := upstream.ParseObject(c["function"])
	name, _ := fn.Str("name")
	if typ != "function" || err != nil || name == "" {
		return nil, false, convRejected("tool_choice must be auto, none, required or a function")
	}
	return &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(name)}}, false, nil
}

// convInference translates the sampling and length parameters; nil when
// the request sets none.
func convInference(top convObject) (*types.InferenceConfiguration, error) {
	var c types.InferenceConfiguration
	set := false
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		v := top[k]
		if upstream.IsNull(v) {
			continue
		}
		var f float64
		if json.Unmarshal(v, &f) != nil || f < 1 || f > math.MaxInt32 || f != math.Trunc(f) {
			return nil, convRejected(k + " must be an integer from 1 to 2147483647")
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
		v := top[p.k]
		if upstream.IsNull(v) {
			continue
		}
		var f float64
		if json.Unmarshal(v, &f) != nil || math.Abs(f) > math.MaxFloat32 {
			return nil, convRejected(p.k + " must be a number")
		}
		*p.dst = aws.Float32(float32(f))
		set = true
	}
	if stop := bytes.TrimSpace(top["stop"]); !upstream.IsNull(stop) {
		var list []string
		if stop[0] == '"' {
			var s string
			if json.Unmarshal(stop, &s) != nil {
				return nil, convRejected("stop must be a string or an array of strings")
			}
			list = []string{s}
		} else if json.Unmarshal(stop, &list) != nil {
			return nil, convRejected("stop must be a string or an array of strings")
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

// convDocument is the JSON value raw as a document the SDK sends as it is.
// Numbers are kept as written (document.Number), not rounded through
// float64. A value the SDK's encoder cannot write (an object with an empty
// key) is refused here, naming at: the SDK would otherwise send a body
// that is not JSON.
func convDocument(raw json.RawMessage, at string) (document.Interface, error) {
	if !json.Valid(raw) {
		return nil, convRejected(at + " must be valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, convRejected(at + " must be valid JSON")
	}
	doc := document.NewLazyDocument(convDocValue(v))
	if _, err := doc.MarshalSmithyDocument(); err != nil {
		return nil, &llm.ProviderError{Class: llm.FailRejected, Message: at + " cannot be sent to Bedrock Converse (an object key is empty)", Err: err}
	}
	return doc, nil
}

// convDocValue is a value decoded with UseNumber with its numbers as
// document.Number, which the SDK's encoder writes as they are (a
// json.Number would be written as a string).
func convDocValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		return smithydocument.Number(v)
	case map[string]any:
		for k, e := range v {
			v[k] = convDocValue(e)
		}
	case []any:
		for i, e := range v {
			v[i] = convDocValue(e)
		}
	}
	return v
}

// convObject is a JSON object's members by their exact keys: every key is
// read as written (a "Model" is not "model"), so that what is sent depends
// on the members, never on their order or case.
type convObject = upstream.Object

// convList is an array's elements, none for null or absent; anything else
// is refused, naming at.
// convStringOrList reads content that is a string or an array: the string
// ("" for null), or the array's elements; anything else is rejected with
// msg.
func convStringOrList(raw json.RawMessage, msg string) (string, []json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if upstream.IsNull(raw) {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", nil, convRejected(msg)
		}
		return s, nil, nil
	}
	l, ok := upstream.List(raw)
	if !ok {
		return "", nil, convRejected(msg)
	}
	return "", l, nil
}

// convEachObject calls f with each element of list, an object whose path is
// at[i], until f fails; an element that is no object is rejected, its path
// followed by notObject.
func convEachObject(list []json.RawMessage, at, notObject string, f func(o convObject, oat string) error) error {
	for i, raw := range list {
		oat := fmt.Sprintf("%s[%d]", at, i)
		o, err := upstream.ParseObject(raw)
		if err != nil {
			return convRejected(oat + notObject)
		}
		if err := f(o, oat); err != nil {
			return err
		}
	}
	return nil
}

func convList(raw json.RawMessage, at string) ([]json.RawMessage, error) {
	l, ok := upstream.List(raw)
	if !ok {
		return nil, convRejected(at + " must be an array")
	}
	return l, nil
}

func convTruncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func convRejected(msg string) *llm.ProviderError {
	// Status 0: no upstream was called.
	return &llm.ProviderError{Class: llm.FailRejected, Message: msg}
}

// converseDecoder turns the events of one ConverseStream answer into
// chat.completion.chunks, made from the events' typed fields
// (llm.ChatChunk), with the JSON OpenAI would send:
//
//	messageStart                   role chunk {"role":"assistant","content":""}
//	contentBlockStart toolUse      delta.tool_calls[{index,id,type,function{name,arguments:""}}],
//	                               tool calls counted from 0
//	contentBlockDelta text         delta.content
//	contentBlockDelta toolUse      delta.tool_calls[{index,function{arguments}}] of the
//	                               block's tool call (the last one started when the
//	                               block is not known)
//	contentBlockDelta reasoning    delta.reasoning_content (signatures and redacted
//	                               reasoning are not carried)
//	contentBlockStop               nothing; for a toolUse block that streamed no
//	                               input: arguments "{}", so that they parse
//	messageStop stopReason         finish_reason (converse.FinishReason)
//	metadata usage                 usage chunk (choices [])
//	an exception                   a *llm.ProviderError (convFailure)
//	anything else                  nothing
//
// Usage: prompt_tokens is inputTokens plus the cache read and cache write
// tokens (OpenAI counts cached tokens in prompt_tokens), with
// prompt_tokens_details.cached_tokens the cache reads and
// prompt_tokens_details.cache_write_tokens the cache writes (the names
// llm.Usage.PromptParts reads); completion_tokens is outputTokens. A
// metadata event without usage gets no usage chunk, so the gateway
// estimates it. The zero converseDecoder is not usable; use
// newConverseDecoder.
type converseDecoder struct {
	id, model string
	created   int64

	// blocks maps a toolUse content block's index to its tool call; last
	// is the tool call started last.
	blocks map[int32]*convToolCall
	last   *convToolCall
	tools  int
}

type convToolCall struct {
	index   int
	argsOut bool
}

// newConverseDecoder returns a decoder whose chunks carry id, model and
// created.
func newConverseDecoder(id, model string, created int64) *converseDecoder {
	return &converseDecoder{id: id, model: model, created: created, blocks: map[int32]*convToolCall{}}
}

// decode returns the chunk of one event, when it has one (ok). A metadata
// event yields a usage-only chunk ("choices": [], "usage": {...}). An
// exception member of the union is returned as an error (a
// *llm.ProviderError of the class failureClass gives it), never a panic.
func (d *converseDecoder) decode(ev types.ConverseStreamOutput) (ch llm.Chunk, ok bool, err error) {
	switch ev := ev.(type) {
	case *types.ConverseStreamOutputMemberMessageStart:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		empty := ""
		return d.emit(chat.Delta{Role: "assistant", Content: &empty}, nil)
	case *types.ConverseStreamOutputMemberContentBlockStart:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		start, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse)
		if !ok || start == nil {
			return llm.Chunk{}, false, nil // images and tool results: nothing a Chat Completions client reads
		}
		tc := &convToolCall{index: d.tools}
		d.tools++
		d.blocks[aws.ToInt32(ev.Value.ContentBlockIndex)] = tc
		d.last = tc
		name, empty := aws.ToString(start.Value.Name), ""
		return d.emit(chat.Delta{ToolCalls: []chat.DeltaToolCall{{
			Index: tc.index, ID: aws.ToString(start.Value.ToolUseId), Type: "function",
			Function: &chat.DeltaFunction{Name: &name, Arguments: &empty},
		}}}, nil)
	case *types.ConverseStreamOutputMemberContentBlockDelta:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		switch delta := ev.Value.Delta.(type) {
		case *types.ContentBlockDeltaMemberText:
			if delta == nil || delta.Value == "" {
				return llm.Chunk{}, false, nil
			}
			return d.emit(chat.Delta{Content: &delta.Value}, nil)
		case *types.ContentBlockDeltaMemberToolUse:
			if delta == nil || aws.ToString(delta.Value.Input) == "" {
				return llm.Chunk{}, false, nil
			}
			tc := d.blocks[aws.ToInt32(ev.Value.ContentBlockIndex)]
			if tc == nil {
				tc = d.last
			}
			if tc == nil {
				return llm.Chunk{}, false, nil // no tool call started: nothing to add the input to
			}
			tc.argsOut = true
			return d.emit(chat.Delta{ToolCalls: []chat.DeltaToolCall{{
				Index: tc.index, Function: &chat.DeltaFunction{Arguments: delta.Value.Input},
			}}}, nil)
		case *types.ContentBlockDeltaMemberReasoningContent:
			if delta == nil {
				return llm.Chunk{}, false, nil
			}
			text, ok := delta.Value.(*types.ReasoningContentBlockDeltaMemberText)
			if !ok || text == nil || text.Value == "" {
				return llm.Chunk{}, false, nil
			}
			return d.emit(chat.Delta{ReasoningContent: &text.Value}, nil)
		}
		return llm.Chunk{}, false, nil // citations, images, tool results
	case *types.ConverseStreamOutputMemberContentBlockStop:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		tc := d.blocks[aws.ToInt32(ev.Value.ContentBlockIndex)]
		if tc == nil || tc.argsOut {
			return llm.Chunk{}, false, nil
		}
		tc.argsOut = true
		args := "{}"
		return d.emit(chat.Delta{ToolCalls: []chat.DeltaToolCall{{
			Index: tc.index, Function: &chat.DeltaFunction{Arguments: &args},
		}}}, nil)
	case *types.ConverseStreamOutputMemberMessageStop:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		finish := converse.FinishReason(string(ev.Value.StopReason))
		return d.emit(chat.Delta{}, &finish)
	case *types.ConverseStreamOutputMemberMetadata:
		if ev == nil || ev.Value.Usage == nil {
			return llm.Chunk{}, false, nil
		}
		return d.write(chat.Chunk{ID: d.id, Object: chat.ObjectChunk, Created: d.created, Model: d.model,
			Choices: []chat.ChunkChoice{}, Usage: convUsage(ev.Value.Usage)})
	case *types.UnknownUnionMember:
		if ev == nil || !converse.IsException(ev.Tag) {
			return llm.Chunk{}, false, nil // a member added after this was written
		}
		var body converse.Error // "Message" too: encoding/json ignores case
		_ = json.Unmarshal(ev.Value, &body)
		return llm.Chunk{}, false, convFailure(ev.Tag, body.Message)
	}
	return llm.Chunk{}, false, nil
}

// convUsage is a Converse usage as the Chat Completions usage object.
func convUsage(u *types.TokenUsage) json.RawMessage {
	count := func(p *int32) int64 { return int64(max(aws.ToInt32(p), 0)) }
	input, output := count(u.InputTokens), count(u.OutputTokens)
	read, write := count(u.CacheReadInputTokens), count(u.CacheWriteInputTokens)
	prompt := input + read + write
	w := chat.Usage{PromptTokens: prompt, CompletionTokens: output, TotalTokens: prompt + output}
	if read > 0 || write > 0 {
		w.PromptTokensDetails = &chat.PromptTokensDetails{CachedTokens: read, CacheWriteTokens: write}
	}
	b, _ := json.Marshal(w) // numbers only: it always encodes
	return b
}

// emit is one chunk of one choice with delta and finish (nil: null).
func (d *converseDecoder) emit(delta chat.Delta, finish *string) (llm.Chunk, bool, error) {
	return d.write(chat.Chunk{ID: d.id, Object: chat.ObjectChunk, Created: d.created, Model: d.model,
		Choices: []chat.ChunkChoice{{Delta: delta, FinishReason: finish}}})
}

// write is the chunk c.
func (d *converseDecoder) write(c chat.Chunk) (llm.Chunk, bool, error) {
	ch, err := llm.ChatChunk(&c)
	if err != nil {
		return llm.Chunk{}, false, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream event", Err: err}
	}
	return ch, true, nil
}
