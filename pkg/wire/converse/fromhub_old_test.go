package converse

// The translation as it read the body before the request view: the oracle
// of TestFromHubAsBefore.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// JSON objects go to the SDK as documents of their decoded values, numbers
// kept as written; the SDK writes an object's keys sorted.
func oldFromHub(modelID string, chatBody []byte) (in *bedrockruntime.ConverseStreamInput, dropped []string, err error) {
	top, err := jsonobj.Parse(chatBody)
	if err != nil {
		return nil, nil, Refuse("the request body is not a JSON object")
	}
	for _, k := range refused {
		if refuses(k, top[k]) {
			return nil, nil, Refuse(k + " is not supported on Bedrock Converse")
		}
	}
	if modelID == "" {
		modelID, _ = top.Str("model")
	}
	in = &bedrockruntime.ConverseStreamInput{ModelId: aws.String(modelID)}

	if err := oldTurns(in, top["messages"]); err != nil {
		return nil, nil, err
	}
	if in.InferenceConfig, err = oldInference(top); err != nil {
		return nil, nil, err
	}
	if in.ToolConfig, err = oldToolConfig(top["tools"], top["tool_choice"]); err != nil {
		return nil, nil, err
	}

	dropped = llm.UnreadFields(chatBody, readFields)
	if msgs, err := list(top["messages"], "messages"); err == nil {
		for _, raw := range msgs {
			if m, err := jsonobj.Parse(raw); err == nil && !jsonobj.IsNull(m["name"]) {
				dropped = append(dropped, "messages[].name")
				break
			}
		}
	}
	return in, dropped, nil
}

// turns fills the system prompt and the turns from messages.
func oldTurns(in *bedrockruntime.ConverseStreamInput, raw json.RawMessage) error {
	msgs, err := list(raw, "messages")
	if err != nil {
		return err
	}
	var system []string
	for i, rawMsg := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		m, err := jsonobj.Parse(rawMsg)
		if err != nil {
			return Refuse(at + " must be an object")
		}
		role, _ := m.Str("role")
		switch role {
		case "system", "developer":
			text, err := plainContent(m["content"], at)
			if err != nil {
				return err
			}
			if text != "" {
				system = append(system, text)
			}
		case "user":
			blocks, err := content(m["content"], at)
			if err != nil {
				return err
			}
			in.Messages = AppendTurn(in.Messages, types.ConversationRoleUser, blocks)
		case "assistant":
			blocks, err := content(m["content"], at)
			if err != nil {
				return err
			}
			calls, err := list(m["tool_calls"], at+".tool_calls")
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
			text, err := plainContent(m["content"], at)
			if err != nil {
				return err
			}
			id, _ := m.Str("tool_call_id")
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
	if len(system) > 0 {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: strings.Join(system, "\n\n")}}
	}
	return nil
}

// toolConfig translates tools and tool_choice; nil when there are no tools,
// or tool_choice is none.
func oldToolConfig(rawTools, rawChoice json.RawMessage) (*types.ToolConfiguration, error) {
	list, err := list(rawTools, "tools")
	if err != nil {
		return nil, err
	}
	var tools []types.Tool
	for i, raw := range list {
		t, err := oldTool(raw, fmt.Sprintf("tools[%d]", i))
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	choice, none, err := toolChoice(rawChoice)
	if err != nil {
		return nil, err
	}
	if len(tools) == 0 || none {
		return nil, nil
	}
	return &types.ToolConfiguration{Tools: tools, ToolChoice: choice}, nil
}

func oldTool(raw json.RawMessage, at string) (types.Tool, error) {
	t, err := jsonobj.Parse(raw)
	if err != nil {
		return nil, Refuse(at + " must be a tool object")
	}
	if typ, _ := t.Str("type"); typ != "function" {
		return nil, Refuse(fmt.Sprintf("%s.type %s is not supported on Bedrock Converse", at, Quote(typ)))
	}
	fn, err := jsonobj.Parse(t["function"])
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

// inference translates the sampling and length parameters; nil when
// the request sets none.
func oldInference(top jsonobj.Object) (*types.InferenceConfiguration, error) {
	var c types.InferenceConfiguration
	set := false
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		v := top[k]
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
		v := top[p.k]
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
	if stop := bytes.TrimSpace(top["stop"]); !jsonobj.IsNull(stop) {
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
