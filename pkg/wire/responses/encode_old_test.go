package responses

// The translation as it read the body before the request view: the oracle
// of TestEncodeRequestAsBefore.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// Dropped names the fields of a Chat Completions body that EncodeRequest
// leaves out (for the answer's x-gateway-dropped): the top-level ones it
// does not read (DroppedFields among them, and any it does not know), and
// a message's name.
func oldDropped(body []byte) []string {
	dropped := llm.UnreadFields(body, readFields)
	var in struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &in) == nil {
		for _, m := range in.Messages {
			if name, ok := m["name"]; ok && string(name) != "null" {
				dropped = append(dropped, "messages[].name")
				break
			}
		}
	}
	return dropped
}

// EncodeRequest turns the gateway's upstream request, a Chat Completions
// body, into a streaming Responses body, as the package doc's table says. A
// request it cannot express is a FailRejected *llm.ProviderError naming the
// field, as the upstream's own 400 would be, and nothing is sent. Every key
// is read exactly as written (a "Model" is not "model"), so that what is sent
// depends on the body's members, never on their order.
func oldEncodeRequest(req *llm.UpstreamRequest) ([]byte, error) {
	top, err := jsonobj.Parse(req.Bytes())
	if err != nil {
		return nil, rejected("the request body is not a JSON object", err)
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !translated[k] {
			if msg := refusedField(k, top[k]); msg != "" {
				return nil, rejected(msg, nil)
			}
		}
	}
	out := Request{Model: req.Model, Stream: true}
	if out.Model == "" {
		out.Model, _ = top.Str("model")
	}

	if err := oldTranslateMessages(&out, top["messages"]); err != nil {
		return nil, err
	}
	tools, err := list(top["tools"], "tools")
	if err != nil {
		return nil, err
	}
	for i, raw := range tools {
		t, err := oldTranslateTool(raw, fmt.Sprintf("tools[%d]", i))
		if err != nil {
			return nil, err
		}
		out.Tools = append(out.Tools, t)
	}
	if tc := top["tool_choice"]; !jsonobj.IsNull(tc) {
		if out.ToolChoice, err = toolChoice(tc); err != nil {
			return nil, err
		}
	}
	out.ParallelToolCalls = jsonobj.NonNull(top["parallel_tool_calls"])
	if rf := top["response_format"]; !jsonobj.IsNull(rf) {
		format, err := textFormat(rf)
		if err != nil {
			return nil, err
		}
		out.Text = &Text{Format: format}
	}
	if v := jsonobj.NonNull(top["verbosity"]); v != nil {
		if out.Text == nil {
			out.Text = &Text{}
		}
		out.Text.Verbosity = v
	}
	if e := jsonobj.NonNull(top["reasoning_effort"]); e != nil {
		out.Reasoning = &Reasoning{Effort: e}
	}
	out.MaxOutputTokens = jsonobj.NonNull(top["max_completion_tokens"])
	if out.MaxOutputTokens == nil {
		out.MaxOutputTokens = jsonobj.NonNull(top["max_tokens"])
	}
	out.Temperature = jsonobj.NonNull(top["temperature"])
	out.TopP = jsonobj.NonNull(top["top_p"])
	out.User = jsonobj.NonNull(top["user"])
	out.SafetyIdentifier = jsonobj.NonNull(top["safety_identifier"])
	out.PromptCacheKey = jsonobj.NonNull(top["prompt_cache_key"])
	out.PromptCacheRetention = jsonobj.NonNull(top["prompt_cache_retention"])
	out.ServiceTier = jsonobj.NonNull(top["service_tier"])
	out.Metadata = jsonobj.NonNull(top["metadata"])
	return jsonobj.Marshal(out), nil
}

// translateMessages fills instructions and input from messages.
func oldTranslateMessages(out *Request, raw json.RawMessage) error {
	if jsonobj.IsNull(raw) || raw[0] != '[' {
		return rejected("messages must be an array", nil)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return rejected("messages must be an array", err)
	}
	var system []string
	for i, rawMsg := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		m, err := jsonobj.Parse(rawMsg)
		if err != nil {
			return rejected(at+" must be an object", err)
		}
		role, _ := m.Str("role")
		switch role {
		case "system", "developer":
			text, err := plainText(m["content"], at)
			if err != nil {
				return err
			}
			if text != "" {
				system = append(system, text)
			}
		case "user":
			content, err := userContent(m["content"], at)
			if err != nil {
				return err
			}
			out.Input = append(out.Input, InputMessage{Type: ItemMessage, Role: RoleUser, Content: content})
		case "assistant":
			if err := oldAssistantItems(out, m, at); err != nil {
				return err
			}
		case "tool":
			text, err := plainText(m["content"], at)
			if err != nil {
				return err
			}
			id, _ := m.Str("tool_call_id")
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
	out.Instructions = strings.Join(system, "\n\n")
	return nil
}

// assistantItems adds an assistant message: a message item of its text and
// refusal (none when it has neither), then a function_call item per tool
// call.
func oldAssistantItems(out *Request, m jsonobj.Object, at string) error {
	var parts []InputPart
	content := bytes.TrimSpace(m["content"])
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
	if refusal, _ := m.Str("refusal"); refusal != "" {
		parts = append(parts, InputPart{Type: PartRefusal, Refusal: &refusal})
	}
	if len(parts) > 0 {
		out.Input = append(out.Input, InputMessage{Type: ItemMessage, Role: RoleAssistant, Content: parts})
	}
	calls, err := list(m["tool_calls"], at+".tool_calls")
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

// translateTool flattens a Chat Completions function tool.
func oldTranslateTool(raw json.RawMessage, at string) (FunctionTool, error) {
	t, err := jsonobj.Parse(raw)
	if err != nil {
		return FunctionTool{}, rejected(at+" must be an object", err)
	}
	if typ, _ := t.Str("type"); typ != "function" {
		return FunctionTool{}, rejected(fmt.Sprintf("%s.type %q is not supported by this provider (OpenAI Responses): function tools only", at, typ), nil)
	}
	f, err := jsonobj.Parse(t["function"])
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
