package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// DefaultMaxTokens is the max_tokens sent when the request sets neither
// max_completion_tokens nor max_tokens: Anthropic requires the field, OpenAI
// does not.
const DefaultMaxTokens = 4096

// DroppedFields are the Chat Completions fields that have no Messages
// counterpart and are left out of the upstream request: hints that do not
// change what the answer is (the gateway names those a client set in the
// answer's x-gateway-dropped header, docs/translation.md). A field that
// would change the answer and has no counterpart is refused instead
// (RefusedFields).
var DroppedFields = []string{
	"presence_penalty", "frequency_penalty", "seed", "service_tier", "store", "metadata",
	"prediction", "prompt_cache_key", "prompt_cache_retention", "safety_identifier",
	"verbosity", "web_search_options",
}

// RefusedFields are the Chat Completions fields a request toward Messages
// is refused for (a 400 naming the field, no call), when set to more than
// their default: n above 1, logprobs true, top_logprobs above 0, a
// non-empty logit_bias, audio output, and the legacy functions.
var RefusedFields = []string{"n", "logprobs", "top_logprobs", "logit_bias", "audio", "modalities", "functions", "function_call"}

// Reasoning budgets: Chat's reasoning_effort as Messages' thinking
// budget_tokens, and back (docs/translation.md#reasoning).
const (
	BudgetLow    = 1024
	BudgetMedium = 4096
	BudgetHigh   = 16384
)

// ThinkingBudget is the thinking budget_tokens for a reasoning_effort; 0
// for none (unknown, "none" or "minimal": no thinking).
func ThinkingBudget(effort string) int64 {
	switch effort {
	case "low":
		return BudgetLow
	case "medium":
		return BudgetMedium
	case "high", "xhigh", "max":
		return BudgetHigh
	}
	return 0
}

// OutputTool is the name of the tool a JSON output (response_format
// json_object) is forced through when the schema has no name of its own.
const OutputTool = "json_output"

// readFields are the top-level Chat Completions fields FromHub reads (or
// the gateway sets); the others are left out and named (Dropped).
var readFields = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range []string{
		"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
		"top_k", "stop", "tools", "tool_choice", "parallel_tool_calls", "user",
		"reasoning_effort", "response_format", "n", "logprobs", "top_logprobs", "logit_bias",
		"audio", "modalities", "functions", "function_call", "stream", "stream_options",
	} {
		m[k] = true
	}
	return m
}()

// FromHub turns the gateway's upstream request, a Chat Completions
// body, into a streaming Messages API body. A request it cannot express
// (a content part or tool of a kind Messages has no counterpart for,
// malformed messages) is an *llm.ProviderError of class FailRejected, as the
// upstream's own 400 would be.
//
// The translation:
//
//   - system and developer messages, wherever they are, become the top-level
//     system prompt, joined by a blank line;
//   - user and assistant messages become turns of text and image blocks; an
//     image_url part with a data: URL becomes a base64 image source, an
//     http(s) URL a url source;
//   - an assistant's tool_calls become tool_use blocks (arguments parsed as
//     the input object); tool messages become tool_result blocks of a user
//     turn; consecutive turns of one role are merged into one, as Messages
//     requires alternating roles;
//   - tools (type function) become tools with input_schema; tool_choice
//     auto/none/required/{function} becomes auto/none/any/{tool};
//     parallel_tool_calls false sets disable_parallel_tool_use;
//   - max_completion_tokens, else max_tokens, else DefaultMaxTokens becomes
//     max_tokens; temperature, top_p and top_k pass as they are; stop
//     (a string or a list) becomes stop_sequences; user becomes
//     metadata.user_id;
//   - reasoning_effort low, medium, high becomes thinking {type: enabled,
//     budget_tokens} of BudgetLow, BudgetMedium, BudgetHigh, cut to
//     max_tokens - 1 (left out when that is under 1024, Anthropic's least,
//     when a tool is forced, which thinking does not allow, and with a
//     JSON response_format, which forces one);
//   - response_format json_schema becomes a tool of the schema's name,
//     description and schema, forced with tool_choice; json_object the same
//     with OutputTool and an open object schema; the Decoder returns that
//     tool's input as the answer's text (NewDecoder's outputTool);
//   - "stream" is always true; DroppedFields are left out; RefusedFields
//     set beyond their default refuse the request, naming the field.
//
// It also returns the name of the tool a JSON response_format is forced
// through ("" for none), and the fields the translation leaves out: the
// top-level ones it does not read (DroppedFields among them, and any it
// does not know), a message's name, and reasoning_effort beside a JSON
// response_format.
func FromHub(req *llm.UpstreamRequest) ([]byte, string, []string, error) {
	body, tool, err := translateBody(req)
	if err != nil {
		return nil, "", nil, err
	}
	dropped := llm.UnreadFields(req.Bytes(), readFields)
	in, _ := req.ChatView() // translateBody decoded it
	for _, m := range in.Messages {
		if m.HasName {
			dropped = append(dropped, "messages[].name")
			break
		}
	}
	if tool != "" && in.ReasoningEffort.Set {
		dropped = append(dropped, "reasoning_effort")
	}
	return body, tool, dropped, nil
}

func translateBody(req *llm.UpstreamRequest) ([]byte, string, error) {
	if k := foldedKey(req.Bytes(), requestShape); k != "" {
		return nil, "", rejected(fmt.Sprintf("the request has two keys that differ only in case (%q): which one counts is ambiguous", truncate(k, 64)), nil)
	}
	in, err := req.ChatView()
	if err != nil {
		return nil, "", rejected("request body is not a valid chat completions request", err)
	}
	if err := refuseUnsupported(in); err != nil {
		return nil, "", err
	}
	out := Request{Model: req.Model, Stream: true}
	maxTokens := int64(DefaultMaxTokens)
	if out.Model == "" {
		out.Model = in.Model
	}
	switch {
	case in.MaxCompletionTokens != nil:
		maxTokens = int64(*in.MaxCompletionTokens)
	case in.MaxTokens != nil:
		maxTokens = int64(*in.MaxTokens)
	}
	out.MaxTokens = count(maxTokens)
	out.Temperature = jsontext.Value(jsonobj.NonNull(in.Temperature))
	out.TopP = jsontext.Value(jsonobj.NonNull(in.TopP))
	out.TopK = jsontext.Value(jsonobj.NonNull(in.TopK))
	if stop := jsonobj.NonNull(in.Stop); stop != nil {
		if stop[0] == '"' {
			var s string
			if err := json.Unmarshal(stop, &s); err != nil {
				return nil, "", rejected("stop must be a string or an array of strings", err)
			}
			out.StopSequences = []string{s}
		} else if err := json.Unmarshal(stop, &out.StopSequences); err != nil {
			return nil, "", rejected("stop must be a string or an array of strings", err)
		}
	}
	if in.User != "" {
		out.Metadata = &Metadata{UserID: in.User}
	}

	var system chat.SystemPrompt
	for i, m := range in.Messages {
		if m.Err != nil || m.Null {
			return nil, "", rejected(fmt.Sprintf("messages[%d] must be an object", i), m.Err)
		}
		at := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			text, err := chat.PlainContent(m.Content, at, contentBlocks, textOf)
			if err != nil {
				return nil, "", err
			}
			system.Add(text)
		case "user":
			blocks, err := contentBlocks(m.Content, at)
			if err != nil {
				return nil, "", err
			}
			out.Messages = appendTurn(out.Messages, RoleUser, blocks)
		case "assistant":
			blocks, err := contentBlocks(m.Content, at)
			if err != nil {
				return nil, "", err
			}
			for j, rawCall := range m.ToolCalls {
				b, err := toolUse(rawCall, fmt.Sprintf("%s.tool_calls[%d]", at, j))
				if err != nil {
					return nil, "", err
				}
				blocks = append(blocks, b)
			}
			out.Messages = appendTurn(out.Messages, RoleAssistant, blocks)
		case "tool":
			text, err := chat.PlainContent(m.Content, at, contentBlocks, textOf)
			if err != nil {
				return nil, "", err
			}
			if m.ToolCallID == "" {
				return nil, "", rejected(at+".tool_call_id is required", nil)
			}
			out.Messages = appendTurn(out.Messages, RoleUser, []Block{{Type: BlockToolResult, ToolUseID: m.ToolCallID, Content: &Content{Text: text}}})
		default:
			return nil, "", rejected(fmt.Sprintf("%s.role %q is not supported by this provider", at, m.Role), nil)
		}
	}
	if len(out.Messages) == 0 {
		return nil, "", rejected("messages must contain at least one user or assistant message", nil)
	}
	out.System = Content{Text: system.Text()}

	for i, raw := range in.Tools {
		t, err := translateTool(&raw, fmt.Sprintf("tools[%d]", i))
		if err != nil {
			return nil, "", err
		}
		out.Tools = append(out.Tools, t)
	}
	choice, err := toolChoice(jsonobj.NonNull(in.ToolChoice))
	if err != nil {
		return nil, "", err
	}
	if len(out.Tools) > 0 {
		if choice == nil && in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
			choice = &ToolChoice{Type: ToolChoiceAuto}
		}
		if choice != nil && choice.Type != ToolChoiceNone && in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
			choice.DisableParallelToolUse = true
		}
		out.ToolChoice = choice
	}
	outputTool, err := outputFormat(&out, jsonobj.NonNull(in.ResponseFormat))
	if err != nil {
		return nil, "", err
	}
	if budget := ThinkingBudget(in.ReasoningEffort.Value); budget > 0 && outputTool == "" && !forced(out.ToolChoice) {
		budget = min(budget, maxTokens-1)
		if budget >= BudgetLow {
			out.Thinking = &Thinking{Type: ThinkingEnabled, BudgetTokens: count(budget)}
		}
	}
	// The Messages body is about the size of the Chat Completions one.
	var body bytes.Buffer
	body.Grow(len(req.Bytes()) + 512)
	if err := MarshalWrite(&body, &out); err != nil {
		// Strings read by encoding/json and raw values it checked: they
		// always encode.
		panic("anthropic: " + err.Error())
	}
	return bytes.TrimSuffix(body.Bytes(), []byte("\n")), outputTool, nil
}

// count is n as a count of tokens of a Messages request.
func count(n int64) *float64 {
	f := float64(n)
	return &f
}

// refuseUnsupported refuses a request that sets a field Messages cannot
// honour (RefusedFields) beyond its default.
func refuseUnsupported(in *chat.RequestView) error {
	switch {
	case in.N != nil && string(in.N) != "1":
		return refusedField("n", "n above 1 (several choices) is not supported by this provider")
	case in.Logprobs != nil && string(in.Logprobs) != "false":
		return refusedField("logprobs", "logprobs are not supported by this provider")
	case in.TopLogprobs != nil && string(in.TopLogprobs) != "0":
		return refusedField("top_logprobs", "top_logprobs are not supported by this provider")
	case in.LogitBias != nil && string(bytes.Join(bytes.Fields(in.LogitBias), nil)) != "{}":
		return refusedField("logit_bias", "logit_bias is not supported by this provider")
	case in.Audio != nil:
		return refusedField("audio", "audio output is not supported by this provider")
	case in.Functions != nil:
		return refusedField("functions", "functions (the legacy form of tools) are not supported by this provider; send tools")
	case in.FunctionCall != nil:
		return refusedField("function_call", "function_call (the legacy form of tool_choice) is not supported by this provider; send tool_choice")
	}
	for _, m := range in.Modalities {
		if m != "text" {
			return refusedField("modalities", "modalities other than text are not supported by this provider")
		}
	}
	return nil
}

// refusedField is the refusal of a request for a field, named first in its
// message: "n: ...".
func refusedField(param, msg string) *llm.ProviderError {
	return rejected(param+": "+msg+" (param "+param+")", nil)
}

// forced reports whether a tool choice forces a tool (any, or one named).
func forced(choice *ToolChoice) bool {
	return choice != nil && (choice.Type == ToolChoiceAny || choice.Type == ToolChoiceTool)
}

// outputFormat adds the forced output tool of a JSON response_format and
// returns its name ("" for text or none).
func outputFormat(out *Request, raw json.RawMessage) (string, error) {
	if raw == nil {
		return "", nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return "", refusedField("response_format", "response_format must be an object")
	}
	t := Tool{Name: OutputTool, Description: "Give the answer as this tool's input.", InputSchema: jsontext.Value(`{"type":"object"}`)}
	switch f.Type {
	case "", "text":
		return "", nil
	case "json_object":
	case "json_schema":
		if f.JSONSchema == nil {
			return "", refusedField("response_format.json_schema", "response_format.json_schema is required")
		}
		if f.JSONSchema.Name != "" {
			t.Name = f.JSONSchema.Name
		}
		if f.JSONSchema.Description != "" {
			t.Description = f.JSONSchema.Description
		}
		if s := jsonobj.NonNull(f.JSONSchema.Schema); s != nil {
			t.InputSchema = jsontext.Value(s)
		}
	default:
		return "", refusedField("response_format.type", fmt.Sprintf("response_format.type %q is not supported by this provider", truncate(f.Type, 64)))
	}
	for _, other := range out.Tools {
		if other.Name == t.Name {
			return "", refusedField("response_format.json_schema.name", "response_format.json_schema.name is also the name of a tool")
		}
	}
	out.Tools = append(out.Tools, t)
	out.ToolChoice = &ToolChoice{Type: ToolChoiceTool, Name: t.Name}
	return t.Name, nil
}

// appendTurn adds blocks as a turn of role, merged into the last turn when
// it has the same role. A turn with no blocks is left out.
func appendTurn(msgs []InputMessage, role string, blocks []Block) []InputMessage {
	if len(blocks) == 0 {
		return msgs
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content.Blocks = append(msgs[n-1].Content.Blocks, blocks...)
		return msgs
	}
	return append(msgs, InputMessage{Role: role, Content: Content{Blocks: blocks}})
}

// textOf is a block's text; a block that is not text is refused, as the
// content of a message at may only hold text.
func textOf(b Block, at string) (string, error) {
	if b.Type != BlockText {
		return "", rejected(at+".content may only hold text for this provider", nil)
	}
	return b.Text, nil
}

// contentBlocks translates a message content: a string, or an array of text,
// refusal and image_url parts. Empty text is left out, as Messages rejects
// empty text blocks.
func contentBlocks(raw json.RawMessage, at string) ([]Block, error) {
	raw = bytes.TrimSpace(raw)
	if jsonobj.IsNull(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, rejected(at+".content must be a string or an array of content parts", err)
		}
		if s == "" {
			return nil, nil
		}
		return []Block{{Type: BlockText, Text: s}}, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Refusal  string `json:"refusal"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if raw[0] != '[' {
		return nil, rejected(at+".content must be a string or an array of content parts", nil)
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, rejected(at+".content must be a string or an array of content parts", err)
	}
	var blocks []Block
	for j, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, Block{Type: BlockText, Text: p.Text})
			}
		case "refusal":
			if p.Refusal != "" {
				blocks = append(blocks, Block{Type: BlockText, Text: p.Refusal})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, rejected(fmt.Sprintf("%s.content[%d].image_url is required", at, j), nil)
			}
			src, err := imageFrom(p.ImageURL.URL)
			if err != nil {
				return nil, rejected(fmt.Sprintf("%s.content[%d].image_url.url: %s", at, j, err.Error()), nil)
			}
			blocks = append(blocks, Block{Type: BlockImage, Source: src})
		default:
			return nil, rejected(fmt.Sprintf("%s.content[%d]: content part type %q is not supported by this provider", at, j, p.Type), nil)
		}
	}
	return blocks, nil
}

// imageFrom reads an image_url: a base64 data: URL or an http(s) URL.
func imageFrom(u string) (*Source, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isBase64 || mediaType == "" {
			return nil, fmt.Errorf("a data: URL must be base64 with a media type (data:image/png;base64,...)")
		}
		return &Source{Type: SourceBase64, MediaType: mediaType, Data: data}, nil
	}
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return &Source{Type: SourceURL, URL: u}, nil
	}
	return nil, fmt.Errorf("must be a data: URL or an http(s) URL")
}

// toolUse translates an assistant's tool call.
func toolUse(raw json.RawMessage, at string) (Block, error) {
	var c chat.ToolCall
	if err := json.Unmarshal(raw, &c); err != nil {
		return Block{}, rejected(at+" must be a tool call object", err)
	}
	if c.Type != "" && c.Type != "function" {
		return Block{}, rejected(fmt.Sprintf("%s.type %q is not supported by this provider", at, c.Type), nil)
	}
	input := json.RawMessage(strings.TrimSpace(c.Function.Arguments))
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if input[0] != '{' || !json.Valid(input) {
		return Block{}, rejected(at+".function.arguments must be a JSON object", nil)
	}
	return Block{Type: BlockToolUse, ID: c.ID, Name: c.Function.Name, Input: jsontext.Value(input)}, nil
}

func translateTool(t *chat.RequestViewTool, at string) (Tool, error) {
	if t.Err != nil {
		return Tool{}, rejected(at+" must be a tool object", t.Err)
	}
	if t.Type != "function" {
		return Tool{}, rejected(fmt.Sprintf("%s.type %q is not supported by this provider", at, t.Type), nil)
	}
	schema := jsonobj.NonNull(t.Function.Parameters)
	if schema == nil {
		schema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: jsontext.Value(schema), Strict: t.Function.Strict}, nil
}

// toolChoice translates tool_choice; nil means none was given.
func toolChoice(raw json.RawMessage) (*ToolChoice, error) {
	if raw == nil {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto":
			return &ToolChoice{Type: ToolChoiceAuto}, nil
		case "none":
			return &ToolChoice{Type: ToolChoiceNone}, nil
		case "required":
			return &ToolChoice{Type: ToolChoiceAny}, nil
		}
		return nil, rejected(fmt.Sprintf("tool_choice %q is not supported by this provider", s), nil)
	}
	var c struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Type != "function" || c.Function.Name == "" {
		return nil, rejected("tool_choice must be auto, none, required or a function", err)
	}
	return &ToolChoice{Type: ToolChoiceTool, Name: c.Function.Name}, nil
}

// shape names the objects of a request that FromHub decodes into
// structs: each key's value (an object, or an array of objects) is checked
// by foldedKey in turn, with the shape under it.
type shape map[string]shape

var requestShape = shape{
	"messages":        {"content": {"image_url": nil}, "tool_calls": {"function": nil}},
	"tools":           {"function": nil},
	"tool_choice":     {"function": nil},
	"response_format": {"json_schema": nil},
}

// foldedKey returns a key of an object of raw (the top level, and the
// objects sh names under it) that another key of the same object equals
// but for case, or "". encoding/json matches struct fields regardless of
// case and lets the later of two such keys win, so their order, which the
// Idempotency-Key fingerprint does not see (it sorts keys), would decide
// what the provider is sent: two bodies with one fingerprint could send two
// prompts. The objects passed on as they are (a tool's parameters, a tool
// call's arguments) are not looked into: a schema may name properties
// that differ only in case.
func foldedKey(raw json.RawMessage, sh shape) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '[':
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return ""
		}
		for _, el := range list {
			if k := foldedKey(el, sh); k != "" {
				return k
			}
		}
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return ""
		}
		seen := make(map[string]bool, len(m))
		for k := range m {
			f := fold(k)
			if seen[f] {
				return k
			}
			seen[f] = true
		}
		for k, v := range m {
			for name, under := range sh {
				if fold(k) == name {
					if found := foldedKey(v, under); found != "" {
						return found
					}
				}
			}
		}
	}
	return ""
}

// fold is the case encoding/json ignores when it matches a name (the
// Kelvin sign and the long s included).
func fold(k string) string { return strings.ToLower(strings.ToUpper(k)) }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func rejected(msg string, err error) *llm.ProviderError {
	// Status 0: no upstream was called.
	return &llm.ProviderError{Class: llm.FailRejected, Message: msg, Err: err}
}
