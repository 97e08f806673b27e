package messages

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/converse"
)

// ToConverse translates an Anthropic Messages request body (as a
// Messages client sent it, "model" already the route's, "stream": true) into a
// ConverseStream call of modelID (the body's "model" when modelID is empty).
// dropped names the fields left out as mere hints, in body order, each once.
// A field that changes the answer and that Converse cannot express is a
// *llm.ProviderError{Class: llm.FailRejected, Message: "<field> ... is not supported on Bedrock Converse"};
// a malformed one is refused the same way, naming it.
//
// The translation, field by field:
//
//	system: string | text blocks  → System text blocks (empty text left out)
//	messages[] role system        → its text appended to System after the
//	                                top-level system: its place in the
//	                                conversation is lost, as Converse has
//	                                system blocks only ahead of the turns
//	messages[] role user, assistant → turns of that role; consecutive turns of
//	                                one role merge, as Converse requires
//	                                alternating roles; the first turn must be
//	                                the user's
//	  content: string             → a text block
//	  text                        → a text block (empty text left out)
//	  image, source base64        → an image block of its bytes (png, jpeg, gif, webp)
//	  image, source url or file   → refused: Converse cannot fetch it
//	  document, source text       → a text block: its title, its context and
//	                                its data, joined by a blank line
//	  document, other sources     → refused
//	  tool_use                    → toolUse {toolUseId: id, name, input}
//	  tool_result                 → toolResult {toolUseId, content: text and image
//	                                blocks, status error when is_error}
//	  thinking                    → reasoningContent reasoningText {text, signature}
//	  redacted_thinking           → reasoningContent redactedContent (data, base64-decoded)
//	  any other block type        → refused
//	  cache_control on a block    → a cachePoint after it (after the tool_result
//	                                for one inside a tool_result's content)
//	tools[] {name, description, input_schema, strict} → toolSpec
//	  cache_control               → a cachePoint tool after it
//	  type other than custom      → dropped as tools[<type>]: a server tool (web_search_…, bash_…)
//	                                only Anthropic runs
//	tool_choice auto, any, tool   → auto, any, tool {name}; none → no toolConfig
//	                                (Converse has no choice of none)
//	max_tokens                    → inferenceConfig.maxTokens
//	temperature, top_p            → inferenceConfig, as they are
//	stop_sequences                → inferenceConfig.stopSequences (empty strings left out)
//	output_config.format json_schema → outputConfig.textFormat, the schema as JSON text
//	model, stream                 → read, not named (modelID and ConverseStream win)
//
// Dropped and named (hints: Converse has no counterpart, and the answer is
// still an answer to the request): metadata, service_tier, top_k,
// context_management, container, mcp_servers, thinking (other than
// disabled: Converse has no reasoning field common to its models, which
// reason or not on their own), output_config.effort, citations,
// cache_control.ttl other than 5m (the default lifetime; a longer one is
// left to the models that offer it), tool_choice.disable_parallel_tool_use,
// a tool's other members (tools[].defer_loading, ...), a message's members
// other than role and content (messages[].<name>), and any other top-level
// field. Other members of a block are not read. A null field is an absent
// one.
func ToConverse(modelID string, body []byte) (in *bedrockruntime.ConverseStreamInput, dropped []string, err error) {
	var req Request
	if err := Unmarshal(body, &req, converseLenient); err != nil {
		return nil, nil, converseDecodeError(body, err)
	}
	members, err := llm.Members(body)
	if err != nil {
		return nil, nil, converse.Refuse("the request body is not a JSON object")
	}
	if modelID == "" {
		modelID = req.Model
	}
	r := &converseRequest{}
	var inf types.InferenceConfiguration
	infSet := false
	last := make(map[string]json.RawMessage, len(members)) // a name's last value is the one read
	for _, m := range members {
		last[m.Key] = m.Value
	}
	seen := map[string]bool{}
	for _, m := range members {
		k := m.Key
		if seen[k] || jsonobj.IsNull(last[k]) {
			continue
		}
		seen[k] = true
		switch k {
		case "model", "stream":
		case "max_tokens":
			f := *req.MaxTokens
			if f < 1 || f > math.MaxInt32 || f != math.Trunc(f) {
				return nil, nil, converse.Refuse("max_tokens must be an integer from 1 to 2147483647")
			}
			inf.MaxTokens, infSet = aws.Int32(int32(f)), true
		case "temperature", "top_p":
			v := req.Temperature
			if k == "top_p" {
				v = req.TopP
			}
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil || v[0] == '"' || math.Abs(f) > math.MaxFloat32 {
				return nil, nil, converse.Refuse(k + " must be a number")
			}
			if k == "temperature" {
				inf.Temperature = aws.Float32(float32(f))
			} else {
				inf.TopP = aws.Float32(float32(f))
			}
			infSet = true
		case "stop_sequences":
			for _, s := range req.StopSequences {
				if s != "" {
					inf.StopSequences = append(inf.StopSequences, s)
					infSet = true
				}
			}
		case "system":
			if r.system, err = r.systemBlocks(req.System, "system"); err != nil {
				return nil, nil, err
			}
		case "messages":
			if err := r.conversation(req.Messages); err != nil {
				return nil, nil, err
			}
		case "tools":
			if err := r.toolSpecs(req.Tools); err != nil {
				return nil, nil, err
			}
		case "tool_choice":
			if err := r.toolChoice(req.ToolChoice); err != nil {
				return nil, nil, err
			}
		case "thinking":
			if req.Thinking.Type != ThinkingDisabled {
				r.drop("thinking")
			}
		case "output_config":
			if err := r.outputConfig(req.OutputConfig); err != nil {
				return nil, nil, err
			}
		default:
			r.drop(k)
		}
	}

	if len(r.turns) == 0 {
		return nil, nil, converse.Refuse("messages must contain at least one user or assistant message")
	}
	if r.turns[0].Role != types.ConversationRoleUser {
		return nil, nil, converse.Refuse("messages must start with a user message on Bedrock Converse")
	}
	in = &bedrockruntime.ConverseStreamInput{
		ModelId:      aws.String(modelID),
		Messages:     r.turns,
		System:       append(r.system, r.msgSystem...),
		OutputConfig: r.output,
	}
	if infSet {
		in.InferenceConfig = &inf
	}
	if len(r.tools) > 0 && !r.noTools {
		in.ToolConfig = &types.ToolConfiguration{Tools: r.tools, ToolChoice: r.choice}
	}
	return in, r.dropped, nil
}

// converseLenient reads a request as the translation takes it: a member it
// does not check read as absent when of another JSON type (a string that
// is not one as "", a flag as set only when true), and a cache_control,
// thinking or metadata that is no such object as one with nothing set (its
// presence is what counts). A text's string, a list's strings and the
// members the translation needs of a type are read strictly: their errors
// are converseDecodeError's.
var converseLenient = jsonv2.JoinUnmarshalers(
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, s *string) error {
		last := dec.StackPointer().LastToken()
		if dec.PeekKind() == '"' || last == "text" || isArrayIndex(last) {
			return errors.ErrUnsupported
		}
		*s = ""
		return dec.SkipValue()
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, b *bool) error {
		*b = dec.PeekKind() == 't'
		return dec.SkipValue()
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *CacheControl) error {
		type plain CacheControl
		return readPresent(dec, (*plain)(v))
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *Thinking) error {
		type plain Thinking
		return readPresent(dec, (*plain)(v))
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *Metadata) error {
		type plain Metadata
		return readPresent(dec, (*plain)(v))
	}),
)

// readPresent reads the next value into v, or leaves v its zero value
// when it is not one.
func readPresent[T any](dec *jsontext.Decoder, v *T) error {
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	var t T
	if jsonv2.Unmarshal(raw, &t, dec.Options()) == nil {
		*v = t
	}
	return nil
}

// isArrayIndex reports whether a JSON pointer's token is an array index.
func isArrayIndex(tok string) bool {
	_, err := strconv.Atoi(tok)
	return err == nil && tok != ""
}

// converseDecodeError is the rejection of a body the request's types cannot
// read, naming the member at fault as the translation's own checks do.
func converseDecodeError(body []byte, err error) error {
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) || se.JSONPointer == "" || !json.Valid(body) {
		return converse.Refuse("the request body is not a JSON object")
	}
	var at, shape string
	var msgIndex int
	for tok := range se.JSONPointer.Tokens() {
		if i, err := strconv.Atoi(tok); err == nil {
			at += fmt.Sprintf("[%d]", i)
			shape += "[]"
			if shape == "messages[]" {
				msgIndex = i
			}
			continue
		}
		if at != "" {
			at, shape = at+".", shape+"."
		}
		at, shape = at+tok, shape+tok
	}
	switch shape {
	case "stop_sequences", "stop_sequences[]":
		return converse.Refuse("stop_sequences must be an array of strings")
	case "messages[].content", "messages[].content[]":
		if roleAt(body, msgIndex) == RoleSystem {
			// A system message's content reads as the top-level system's.
			shape = "system" + strings.TrimPrefix(shape, "messages[].content")
		}
	}
	if want, ok := converseWants[shape]; ok {
		return converse.Refuse(at + " must be " + want)
	}
	if strings.HasSuffix(shape, ".text") {
		return converse.Refuse(at + " must be a string")
	}
	return converse.Refuse(at + " is not valid")
}

// converseWants is what a member must be, by its shape (its path with
// the array indexes left out), for converseDecodeError.
var converseWants = map[string]string{
	"max_tokens":                            "an integer from 1 to 2147483647",
	"messages":                              "an array",
	"tools":                                 "an array",
	"messages[]":                            "an object",
	"tool_choice":                           "an object",
	"output_config":                         "an object",
	"output_config.format":                  "an object",
	"messages[].content[].source":           "an object",
	"messages[].content[].content[].source": "an object",
	"tools[]":                               "a tool object",
	"system":                                "a string or an array of text blocks",
	"messages[].content":                    "a string or an array of content blocks",
	"messages[].content[].content":          "a string or an array of content blocks",
	"system[]":                              "a text block",
	"messages[].content[]":                  "a content block object",
	"messages[].content[].content[]":        "a content block object",
}

// roleAt is the role of messages[i] of body, "" for none.
func roleAt(body []byte, i int) string {
	var roles struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	_ = Unmarshal(body, &roles, converseLenient)
	if i < len(roles.Messages) {
		return roles.Messages[i].Role
	}
	return ""
}

// converseRequest is a Messages request being translated.
type converseRequest struct {
	system    []types.SystemContentBlock // the top-level system
	msgSystem []types.SystemContentBlock // the system messages among the turns
	turns     []types.Message
	tools     []types.Tool
	choice    types.ToolChoice
	noTools   bool // tool_choice none
	output    *types.OutputConfig
	dropped   []string
}

// drop names a hint left out, once.
func (r *converseRequest) drop(name string) {
	if !slices.Contains(r.dropped, name) {
		r.dropped = append(r.dropped, name)
	}
}

// dropExtra names each non-null member of extra as a hint, prefix before
// its name.
func (r *converseRequest) dropExtra(extra jsontext.Value, prefix string) {
	if len(extra) == 0 {
		return
	}
	dec := jsontext.NewDecoder(bytes.NewReader(extra))
	if _, err := dec.ReadToken(); err != nil {
		return
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return
		}
		key := name.String()
		v, err := dec.ReadValue()
		if err != nil {
			return
		}
		if v.Kind() != 'n' {
			r.drop(prefix + key)
		}
	}
}

// cached reports whether a block with cc asks for a cache point after it,
// naming a lifetime other than the default as a hint.
func (r *converseRequest) cached(cc *CacheControl) bool {
	if cc == nil {
		return false
	}
	if cc.TTL != "" && cc.TTL != "5m" {
		r.drop("cache_control.ttl")
	}
	return true
}

func cachePoint() types.CachePointBlock {
	return types.CachePointBlock{Type: types.CachePointTypeDefault}
}

// systemBlocks translates a system prompt (at is where it is): a string or
// an array of text blocks, as content translates them.
func (r *converseRequest) systemBlocks(c Content, at string) ([]types.SystemContentBlock, error) {
	for i := range c.Blocks {
		if t := c.Blocks[i].Type; t != BlockText {
			return nil, converse.Refuse(fmt.Sprintf("%s[%d].type %s is not supported on Bedrock Converse", at, i, converse.Quote(t)))
		}
	}
	blocks, err := r.content(c, at)
	if err != nil {
		return nil, err
	}
	var out []types.SystemContentBlock
	for _, b := range blocks {
		switch b := b.(type) {
		case *types.ContentBlockMemberText:
			out = append(out, &types.SystemContentBlockMemberText{Value: b.Value})
		case *types.ContentBlockMemberCachePoint:
			out = append(out, &types.SystemContentBlockMemberCachePoint{Value: b.Value})
		}
	}
	return out, nil
}

// text is a text block's text, its citations named as a hint.
func (r *converseRequest) text(b *Block) string {
	if !jsonobj.IsNull(b.Citations) {
		r.drop("citations")
	}
	return b.Text
}

// conversation translates the messages into turns (and system text).
func (r *converseRequest) conversation(msgs []InputMessage) error {
	for i := range msgs {
		m := &msgs[i]
		at := fmt.Sprintf("messages[%d]", i)
		r.dropExtra(m.Extra, "messages[].")
		switch m.Role {
		case RoleSystem:
			blocks, err := r.systemBlocks(m.Content, at+".content")
			if err != nil {
				return err
			}
			r.msgSystem = append(r.msgSystem, blocks...)
		case RoleUser, RoleAssistant:
			blocks, err := r.content(m.Content, at)
			if err != nil {
				return err
			}
			r.turns = converse.AppendTurn(r.turns, types.ConversationRole(m.Role), blocks)
		default:
			return converse.Refuse(fmt.Sprintf("%s.role %s is not supported on Bedrock Converse", at, converse.Quote(m.Role)))
		}
	}
	return nil
}

// content translates a message's content: a string or an array of blocks.
func (r *converseRequest) content(c Content, at string) ([]types.ContentBlock, error) {
	if c.Blocks == nil {
		if c.Text == "" {
			return nil, nil
		}
		return []types.ContentBlock{&types.ContentBlockMemberText{Value: c.Text}}, nil
	}
	var out []types.ContentBlock
	for i := range c.Blocks {
		b := &c.Blocks[i]
		block, cacheAfter, err := r.block(b, fmt.Sprintf("%s.content[%d]", at, i))
		if err != nil {
			return nil, err
		}
		if block != nil {
			out = append(out, block)
		}
		if (r.cached(b.CacheControl) || cacheAfter) && len(out) > 0 {
			if _, ok := out[len(out)-1].(*types.ContentBlockMemberCachePoint); !ok {
				out = append(out, &types.ContentBlockMemberCachePoint{Value: cachePoint()})
			}
		}
	}
	return out, nil
}

// block translates one content block; nil for one left out (empty text or
// thinking). cacheAfter is true for a tool_result whose content asks for a
// cache point, which Converse has none of inside a tool result: it goes
// after the result.
func (r *converseRequest) block(b *Block, at string) (block types.ContentBlock, cacheAfter bool, err error) {
	switch b.Type {
	case BlockToolResult:
		return r.toolResult(b, at)
	case BlockDocument:
		block, err = r.document(b, at)
	default:
		block, err = r.simpleBlock(b, at)
	}
	return block, false, err
}

// simpleBlock translates a content block that is not a tool_result or a
// document.
func (r *converseRequest) simpleBlock(b *Block, at string) (types.ContentBlock, error) {
	switch b.Type {
	case BlockText:
		s := r.text(b)
		if s == "" {
			return nil, nil
		}
		return &types.ContentBlockMemberText{Value: s}, nil
	case BlockImage:
		img, err := converseImage(b, at)
		if err != nil {
			return nil, err
		}
		return &types.ContentBlockMemberImage{Value: img}, nil
	case BlockToolUse:
		input := []byte(b.Input)
		if jsonobj.IsNull(input) {
			input = []byte("{}")
		}
		if input[0] != '{' {
			return nil, converse.Refuse(at + ".input must be a JSON object")
		}
		doc, err := converse.Document(input, at+".input")
		if err != nil {
			return nil, err
		}
		return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
			ToolUseId: aws.String(b.ID), Name: aws.String(b.Name), Input: doc,
		}}, nil
	case BlockThinking:
		if b.Thinking == "" && b.Signature == "" {
			return nil, nil
		}
		rt := types.ReasoningTextBlock{Text: aws.String(b.Thinking)}
		if b.Signature != "" {
			rt.Signature = aws.String(b.Signature)
		}
		return &types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberReasoningText{Value: rt}}, nil
	case BlockRedactedThinking:
		raw, err := decodeBase64(b.Data)
		if err != nil || len(raw) == 0 {
			return nil, converse.Refuse(at + ".data must be base64")
		}
		return &types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberRedactedContent{Value: raw}}, nil
	}
	return nil, converse.Refuse(fmt.Sprintf("%s.type %s is not supported on Bedrock Converse", at, converse.Quote(b.Type)))
}

// blockSource is a block's source; a source that is no object is
// refused.
func blockSource(b *Block, at string) (*Source, error) {
	if b.Source == nil || b.Source.Name != "" {
		return nil, converse.Refuse(at + ".source must be an object")
	}
	return b.Source, nil
}

// document translates a document block of plain text into a text block of
// its title, context and data; other sources are refused.
func (r *converseRequest) document(b *Block, at string) (types.ContentBlock, error) {
	src, err := blockSource(b, at)
	if err != nil {
		return nil, err
	}
	if src.Type != SourceText {
		return nil, converse.Refuse(fmt.Sprintf("%s.source.type %s is not supported on Bedrock Converse", at, converse.Quote(src.Type)))
	}
	if !jsonobj.IsNull(b.Citations) {
		r.drop("citations")
	}
	var parts []string
	for _, s := range []string{b.Title, b.Context, src.Data} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return &types.ContentBlockMemberText{Value: strings.Join(parts, "\n\n")}, nil
}

// toolResult translates a tool_result block: its content, a string or text
// and image blocks, and is_error. cacheAfter is true when a block of its
// content has cache_control.
func (r *converseRequest) toolResult(b *Block, at string) (block types.ContentBlock, cacheAfter bool, err error) {
	if b.ToolUseID == "" {
		return nil, false, converse.Refuse(at + ".tool_use_id is required")
	}
	res := types.ToolResultBlock{ToolUseId: aws.String(b.ToolUseID)}
	if b.IsError != nil && *b.IsError {
		res.Status = types.ToolResultStatusError
	}
	switch c := b.Content; {
	case c == nil:
	case c.Blocks == nil:
		res.Content = append(res.Content, &types.ToolResultContentBlockMemberText{Value: c.Text})
	default:
		for k := range c.Blocks {
			p := &c.Blocks[k]
			pat := fmt.Sprintf("%s.content[%d]", at, k)
			switch p.Type {
			case BlockText:
				if s := r.text(p); s != "" {
					res.Content = append(res.Content, &types.ToolResultContentBlockMemberText{Value: s})
				}
			case BlockImage:
				img, err := converseImage(p, pat)
				if err != nil {
					return nil, false, err
				}
				res.Content = append(res.Content, &types.ToolResultContentBlockMemberImage{Value: img})
			default:
				return nil, false, converse.Refuse(fmt.Sprintf("%s.type %s is not supported on Bedrock Converse", pat, converse.Quote(p.Type)))
			}
			cacheAfter = r.cached(p.CacheControl) || cacheAfter
		}
	}
	if len(res.Content) == 0 {
		// Converse requires a tool result to have content.
		res.Content = []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: ""}}
	}
	return &types.ContentBlockMemberToolResult{Value: res}, cacheAfter, nil
}

// converseImageTypes are the media types of an Anthropic base64 image
// source Converse takes.
var converseImageTypes = map[string]types.ImageFormat{
	"image/png":  types.ImageFormatPng,
	"image/jpeg": types.ImageFormatJpeg,
	"image/gif":  types.ImageFormatGif,
	"image/webp": types.ImageFormatWebp,
}

// converseImage translates an image block's base64 source; a url or file
// source is refused, as Converse cannot fetch it.
func converseImage(b *Block, at string) (types.ImageBlock, error) {
	src, err := blockSource(b, at)
	if err != nil {
		return types.ImageBlock{}, err
	}
	if src.Type != SourceBase64 {
		return types.ImageBlock{}, converse.Refuse(fmt.Sprintf("%s.source.type %s is not supported on Bedrock Converse, which cannot fetch an image; send it as base64", at, converse.Quote(src.Type)))
	}
	format, ok := converseImageTypes[strings.ToLower(src.MediaType)]
	if !ok {
		return types.ImageBlock{}, converse.Refuse(fmt.Sprintf("%s.source.media_type %s is not supported on Bedrock Converse (image/png, image/jpeg, image/gif, image/webp)", at, converse.Quote(src.MediaType)))
	}
	raw, err := decodeBase64(src.Data)
	if err != nil {
		return types.ImageBlock{}, converse.Refuse(at + ".source.data must be base64")
	}
	return types.ImageBlock{Format: format, Source: &types.ImageSourceMemberBytes{Value: raw}}, nil
}

// decodeBase64 decodes standard base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return base64.RawStdEncoding.DecodeString(s)
	}
	return b, nil
}

// toolSpecs translates the tools: custom tools to toolSpecs, each cache_control
// to a cachePoint after its tool.
func (r *converseRequest) toolSpecs(tools []Tool) error {
	for i := range tools {
		t := &tools[i]
		at := fmt.Sprintf("tools[%d]", i)
		if !t.Custom() {
			// A server tool (web_search_..., bash_...) that only Anthropic
			// runs: a hint, named as the translation toward Chat
			// Completions names it (docs/translation.md).
			r.drop("tools[" + ServerToolName(t.Type) + "]")
			continue
		}
		if t.Name == "" {
			return converse.Refuse(at + ".name is required")
		}
		spec := types.ToolSpecification{Name: aws.String(t.Name)}
		if t.Description != "" {
			spec.Description = aws.String(t.Description)
		}
		if t.Strict != nil && *t.Strict {
			spec.Strict = aws.Bool(true)
		}
		schema := []byte(t.InputSchema)
		if jsonobj.IsNull(schema) {
			schema = []byte(`{"type":"object","properties":{}}`)
		}
		if schema[0] != '{' {
			return converse.Refuse(at + ".input_schema must be a JSON object")
		}
		doc, err := converse.Document(schema, at+".input_schema")
		if err != nil {
			return err
		}
		spec.InputSchema = &types.ToolInputSchemaMemberJson{Value: doc}
		r.tools = append(r.tools, &types.ToolMemberToolSpec{Value: spec})
		if r.cached(t.CacheControl) {
			r.tools = append(r.tools, &types.ToolMemberCachePoint{Value: cachePoint()})
		}
		r.dropExtra(t.Extra, "tools[].")
	}
	return nil
}

// toolChoice translates tool_choice: auto, any, tool {name}; none leaves
// the tools out.
func (r *converseRequest) toolChoice(c *ToolChoice) error {
	r.choice, r.noTools = nil, false
	switch c.Type {
	case ToolChoiceAuto:
		r.choice = &types.ToolChoiceMemberAuto{}
	case ToolChoiceAny:
		r.choice = &types.ToolChoiceMemberAny{}
	case ToolChoiceTool:
		if c.Name == "" {
			return converse.Refuse("tool_choice.name is required")
		}
		r.choice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(c.Name)}}
	case ToolChoiceNone:
		r.noTools = true
	default:
		return converse.Refuse(fmt.Sprintf("tool_choice.type %s is not supported on Bedrock Converse", converse.Quote(c.Type)))
	}
	if c.DisableParallelToolUse {
		r.drop("tool_choice.disable_parallel_tool_use")
	}
	return nil
}

// outputConfig translates output_config: its json_schema format to
// Converse's textFormat; its effort is a hint.
func (r *converseRequest) outputConfig(c *OutputConfig) error {
	if c.Effort != "" {
		r.drop("output_config.effort")
	}
	r.dropExtra(c.Extra, "output_config.")
	f := c.Format
	if f == nil {
		return nil
	}
	if f.Type != "json_schema" {
		return converse.Refuse(fmt.Sprintf("output_config.format.type %s is not supported on Bedrock Converse", converse.Quote(f.Type)))
	}
	var compact bytes.Buffer
	if len(f.Schema) == 0 || f.Schema[0] != '{' || json.Compact(&compact, f.Schema) != nil {
		return converse.Refuse("output_config.format.schema must be a JSON object")
	}
	r.output = &types.OutputConfig{TextFormat: &types.OutputFormat{
		Type: types.OutputFormatTypeJsonSchema,
		Structure: &types.OutputFormatStructureMemberJsonSchema{Value: types.JsonSchemaDefinition{
			Schema: aws.String(compact.String()),
		}},
	}}
	return nil
}

// ConverseEncoder turns the events of one ConverseStream answer into the
// Anthropic Messages stream events that say the same, as Anthropic sends
// them, each a chunk of a Messages stream passed through (llm.Chunk of
// ProtoMessages: the event's name and JSON, "type" equal to the name, with
// what the gateway reads of it: whether it carries answer content, the
// text it adds, message_delta's stop reason and usage):
//
//	messageStart                   message_start (usage 0: Converse counts at the end)
//	contentBlockStart toolUse      content_block_start tool_use {id, name, input: {}}
//	contentBlockDelta text         content_block_start text (on the block's first
//	                               delta), content_block_delta text_delta
//	contentBlockDelta reasoning    content_block_start thinking (on the block's first
//	  text, signature              delta), thinking_delta, signature_delta
//	contentBlockDelta reasoning    a redacted_thinking block {data: base64}, started
//	  redactedContent              and stopped whole when the Converse block stops
//	contentBlockDelta toolUse      content_block_delta input_json_delta
//	contentBlockStop               content_block_stop
//	messageStop                    content_block_stop of any block still open; a
//	                               message_delta held until the usage comes
//	metadata                       the held message_delta with the usage, message_stop
//	an exception                   a *converse.Exception
//	anything else                  nothing (images, citations, tool results, empty deltas)
//
// Blocks are numbered in the order they start, from 0: Converse's
// contentBlockIndex when it numbers every block it sends, as it does. A
// block is stopped before the next one starts, as Anthropic sends them; a
// Converse block whose kind changes mid-block (text after reasoning) is
// stopped and goes on as a new block.
//
// Stop reasons: end_turn, tool_use, max_tokens, stop_sequence keep their
// names (stop_sequence names the sequence when the model's response fields
// give it); guardrail_intervened and content_filtered are refusal;
// model_context_window_exceeded keeps its name; anything else is end_turn.
//
// Usage: message_delta carries Anthropic's counts (input_tokens without
// the cache reads and writes, cache_read_input_tokens,
// cache_creation_input_tokens, output_tokens); its chunk's Usage is
// the Chat Completions usage converse.Decoder gives (prompt_tokens counting
// the cache reads and writes, prompt_tokens_details). When the stream ends
// without usage, message_delta says output_tokens 0 and Usage is nil, so
// that the gateway counts the tokens itself. The zero ConverseEncoder is
// not usable; use NewConverseEncoder.
type ConverseEncoder struct {
	id, model string

	started bool // message_start sent
	blocks  map[int32]*converseBlock
	open    []*converseBlock // started, not stopped, in start order
	next    int              // the next block's index

	stopped  bool // messageStop read
	stop     string
	stopSeq  *string
	metadata bool // metadata read
	usage    *types.TokenUsage
	hubUsage llm.UsageSlot // the usage as the hub carries it
	done     bool          // message_stop sent
}

// converseBlock is the Anthropic block a Converse content block is being
// sent as.
type converseBlock struct {
	index    int
	kind     string // a Block* type
	started  bool
	redacted []byte // a redacted_thinking block's data, sent at its stop
}

// NewConverseEncoder returns an encoder whose message is id, of model.
func NewConverseEncoder(id, model string) *ConverseEncoder {
	return &ConverseEncoder{id: id, model: model, blocks: map[int32]*converseBlock{}}
}

// Encode returns the events for one ConverseStream event (possibly none).
// An exception member is returned as a *converse.Exception, which the
// adapter classifies; nil members and fields are nothing.
func (e *ConverseEncoder) Encode(ev types.ConverseStreamOutput) ([]llm.Chunk, error) {
	if ex := converse.ExceptionOf(ev); ex != nil {
		return nil, ex
	}
	if e.done {
		return nil, nil
	}
	var out []llm.Chunk
	switch ev := ev.(type) {
	case *types.ConverseStreamOutputMemberMessageStart:
		if ev == nil {
			return nil, nil
		}
		out = e.begin(out)
	case *types.ConverseStreamOutputMemberContentBlockStart:
		if ev == nil || e.stopped {
			return nil, nil
		}
		start, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse)
		if !ok || start == nil {
			return nil, nil
		}
		out = e.begin(out)
		out = e.startBlock(out, aws.ToInt32(ev.Value.ContentBlockIndex), ContentBlock{
			Type: BlockToolUse, ID: aws.ToString(start.Value.ToolUseId),
			Name: aws.ToString(start.Value.Name), Input: json.RawMessage("{}"),
		})
	case *types.ConverseStreamOutputMemberContentBlockDelta:
		if ev == nil || e.stopped {
			return nil, nil
		}
		out = e.delta(out, aws.ToInt32(ev.Value.ContentBlockIndex), ev.Value.Delta)
	case *types.ConverseStreamOutputMemberContentBlockStop:
		if ev == nil || e.stopped {
			return nil, nil
		}
		if b := e.blocks[aws.ToInt32(ev.Value.ContentBlockIndex)]; b != nil {
			out = e.stopBlock(out, b)
		}
	case *types.ConverseStreamOutputMemberMessageStop:
		if ev == nil || e.stopped {
			return nil, nil
		}
		out = e.stopOpen(e.begin(out))
		for _, i := range slices.Sorted(maps.Keys(e.blocks)) {
			if b := e.blocks[i]; b != nil && b.redacted != nil {
				out = e.stopBlock(out, b)
			}
		}
		e.stopped = true
		e.stop = ConverseStopReason(string(ev.Value.StopReason))
		if e.stop == StopStopSequence {
			e.stopSeq = stopSequenceOf(ev.Value.AdditionalModelResponseFields)
		}
		if e.metadata {
			out = e.finish(out)
		}
	case *types.ConverseStreamOutputMemberMetadata:
		if ev == nil || e.metadata {
			return nil, nil
		}
		e.metadata, e.usage = true, ev.Value.Usage
		if e.stopped {
			out = e.finish(out)
		}
	}
	return out, nil
}

// End returns the events still owed when the stream ended cleanly: the held
// message_delta (without usage) and message_stop when messageStop came and
// metadata never did; none when they were sent, or when messageStop never
// came (the stream was cut).
func (e *ConverseEncoder) End() []llm.Chunk {
	if e.done || !e.stopped {
		return nil
	}
	return e.finish(nil)
}

// begin adds message_start when it is not sent yet.
func (e *ConverseEncoder) begin(out []llm.Chunk) []llm.Chunk {
	if e.started {
		return out
	}
	e.started = true
	zero := int64(0)
	return e.add(out, llm.Chunk{Event: EventMessageStart}, MessageStart{
		Type: EventMessageStart,
		Message: Message{
			ID: e.id, Type: TypeMessage, Role: RoleAssistant, Model: e.model,
			Content: []ContentBlock{}, Usage: &Usage{InputTokens: &zero, OutputTokens: &zero},
		},
	})
}

// delta adds the events of one content block delta of Converse block i.
func (e *ConverseEncoder) delta(out []llm.Chunk, i int32, d types.ContentBlockDelta) []llm.Chunk {
	empty := ""
	switch d := d.(type) {
	case *types.ContentBlockDeltaMemberText:
		if d == nil || d.Value == "" {
			return out
		}
		out = e.begin(out)
		out = e.startBlock(out, i, ContentBlock{Type: BlockText, Text: &empty})
		return e.blockDelta(out, i, llm.Chunk{Output: true, Text: d.Value}, Delta{Type: DeltaText, Text: &d.Value})
	case *types.ContentBlockDeltaMemberToolUse:
		if d == nil || aws.ToString(d.Value.Input) == "" {
			return out
		}
		b := e.blocks[i]
		if b == nil || b.kind != BlockToolUse || !b.started {
			return out // no tool call started: nothing to add the input to
		}
		return e.blockDelta(out, i, llm.Chunk{Output: true, Text: *d.Value.Input}, Delta{Type: DeltaInputJSON, PartialJSON: d.Value.Input})
	case *types.ContentBlockDeltaMemberReasoningContent:
		if d == nil {
			return out
		}
		thinking := ContentBlock{Type: BlockThinking, Thinking: &empty, Signature: &empty}
		switch r := d.Value.(type) {
		case *types.ReasoningContentBlockDeltaMemberText:
			if r == nil || r.Value == "" {
				return out
			}
			out = e.begin(out)
			out = e.startBlock(out, i, thinking)
			return e.blockDelta(out, i, llm.Chunk{Output: true, Text: r.Value}, Delta{Type: DeltaThinking, Thinking: &r.Value})
		case *types.ReasoningContentBlockDeltaMemberSignature:
			if r == nil || r.Value == "" {
				return out
			}
			out = e.begin(out)
			out = e.startBlock(out, i, thinking)
			return e.blockDelta(out, i, llm.Chunk{}, Delta{Type: DeltaSignature, Signature: &r.Value})
		case *types.ReasoningContentBlockDeltaMemberRedactedContent:
			if r == nil || len(r.Value) == 0 {
				return out
			}
			out = e.begin(out)
			b := e.blocks[i]
			if b != nil && b.kind != BlockRedactedThinking {
				out = e.stopBlock(out, b)
				b = nil
			}
			if b == nil {
				b = &converseBlock{kind: BlockRedactedThinking, redacted: []byte{}}
				e.blocks[i] = b
			}
			b.redacted = append(b.redacted, r.Value...)
		}
	}
	return out // citations, images, tool results
}

// startBlock starts Converse block i as block when it is not started as
// one of that kind, stopping what it was started as before.
func (e *ConverseEncoder) startBlock(out []llm.Chunk, i int32, block ContentBlock) []llm.Chunk {
	if b := e.blocks[i]; b != nil {
		if b.kind == block.Type && b.started {
			return out
		}
		out = e.stopBlock(out, b)
	}
	out = e.stopOpen(out)
	b := &converseBlock{index: e.next, kind: block.Type, started: true}
	e.next++
	e.blocks[i] = b
	e.open = append(e.open, b)
	ev := llm.Chunk{Event: EventContentBlockStart}
	if block.Type == BlockToolUse {
		ev.Output, ev.Text = true, block.Name
	}
	return e.add(out, ev, ContentBlockStart{Type: EventContentBlockStart, Index: b.index, ContentBlock: block})
}

// blockDelta adds a content_block_delta to Converse block i.
func (e *ConverseEncoder) blockDelta(out []llm.Chunk, i int32, ev llm.Chunk, d Delta) []llm.Chunk {
	ev.Event = EventContentBlockDelta
	return e.add(out, ev, ContentBlockDelta{Type: EventContentBlockDelta, Index: e.blocks[i].index, Delta: d})
}

// stopBlock ends block b: content_block_stop for a started block; a
// redacted_thinking block is started and stopped whole.
func (e *ConverseEncoder) stopBlock(out []llm.Chunk, b *converseBlock) []llm.Chunk {
	for i, k := range e.blocks {
		if k == b {
			delete(e.blocks, i)
		}
	}
	if b.redacted != nil {
		out = e.stopOpen(out)
		b.index, b.started = e.next, true
		e.next++
		data := base64.StdEncoding.EncodeToString(b.redacted)
		b.redacted = nil
		out = e.add(out, llm.Chunk{Event: EventContentBlockStart, Output: true}, ContentBlockStart{
			Type: EventContentBlockStart, Index: b.index,
			ContentBlock: ContentBlock{Type: BlockRedactedThinking, Data: &data},
		})
	} else if i := slices.Index(e.open, b); i >= 0 {
		e.open = slices.Delete(e.open, i, i+1)
	} else {
		return out
	}
	return e.add(out, llm.Chunk{Event: EventContentBlockStop}, ContentBlockStop{Type: EventContentBlockStop, Index: b.index})
}

// stopOpen stops the blocks started and not stopped: as Anthropic sends
// them, a block ends before the next one starts.
func (e *ConverseEncoder) stopOpen(out []llm.Chunk) []llm.Chunk {
	for len(e.open) > 0 {
		out = e.stopBlock(out, e.open[0])
	}
	return out
}

// finish adds the held message_delta, with the usage when metadata gave
// it, and message_stop.
func (e *ConverseEncoder) finish(out []llm.Chunk) []llm.Chunk {
	e.done = true
	stop := e.stop
	ev := llm.Chunk{Event: EventMessageDelta, Seen: 1, Finished: 1}
	md := MessageDelta{Type: EventMessageDelta, Delta: StopDelta{StopReason: &stop, StopSequence: e.stopSeq}}
	if e.usage != nil {
		count := func(p *int32) *int64 { n := int64(max(aws.ToInt32(p), 0)); return &n }
		md.Usage = &Usage{
			InputTokens:              count(e.usage.InputTokens),
			CacheCreationInputTokens: count(e.usage.CacheWriteInputTokens),
			CacheReadInputTokens:     count(e.usage.CacheReadInputTokens),
			OutputTokens:             count(e.usage.OutputTokens),
		}
		ev.Usage = e.hubUsage.Read(converse.ChatUsage(e.usage))
	} else {
		zero := int64(0)
		md.Usage = &Usage{OutputTokens: &zero}
	}
	out = e.add(out, ev, md)
	return e.add(out, llm.Chunk{Event: EventMessageStop}, MessageStop{Type: EventMessageStop})
}

// add appends ev with data v as its JSON (compact, without HTML escaping,
// as Anthropic writes it).
func (e *ConverseEncoder) add(out []llm.Chunk, ev llm.Chunk, v any) []llm.Chunk {
	ev.Raw = jsonobj.Marshal(v) // strings, numbers and valid raw JSON only: it always encodes
	ev.Proto, ev.HasChoices, ev.ID, ev.Model = llm.ProtoMessages, true, e.id, e.model
	return append(out, ev)
}

// stopSequenceOf is the stop sequence a model names in its response
// fields ({"stop_sequence": "..."}, as Claude does on Bedrock); nil when it
// names none.
func stopSequenceOf(d document.Interface) *string {
	if d == nil {
		return nil
	}
	b, err := d.MarshalSmithyDocument()
	if err != nil {
		return nil
	}
	var fields struct {
		StopSequence string `json:"stop_sequence"`
	}
	if json.Unmarshal(b, &fields) != nil || fields.StopSequence == "" {
		return nil
	}
	return &fields.StopSequence
}

// ConverseStopReason is a Converse stop reason as a Messages stop_reason:
// the reasons the two protocols share keep their name, a guardrail or a
// content filter is a refusal, and any other reason is end_turn.
func ConverseStopReason(stopReason string) string {
	switch stopReason {
	case converse.StopEndTurn, converse.StopToolUse, converse.StopMaxTokens, converse.StopStopSequence, converse.StopModelContextWindowExceeded:
		return stopReason
	case converse.StopGuardrailIntervened, converse.StopContentFiltered:
		return StopRefusal
	}
	return StopEndTurn
}
