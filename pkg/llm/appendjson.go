package llm

import (
	"strconv"

	"github.com/buzzgate/buzzgate/internal/jsonstr"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// appendCompletion appends out as json.Marshal(out) encodes it, byte for
// byte (FuzzAppendCompletion compares them), without reflection: the
// chat.completion body is built once per non-streaming answer. Usage and
// Logprobs are already compact JSON from json.Marshal, so they are copied.
func appendCompletion(b []byte, out *chat.Completion) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, out.ID)
	b = append(b, `,"object":`...)
	b = appendJSONString(b, out.Object)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, out.Created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, out.Model)
	b = append(b, `,"choices":`...)
	if out.Choices == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range out.Choices {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendChoice(b, &out.Choices[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"usage":`...)
	b = appendRaw(b, out.Usage)
	if out.ServiceTier != "" {
		b = append(b, `,"service_tier":`...)
		b = appendJSONString(b, out.ServiceTier)
	}
	if out.SystemFingerprint != "" {
		b = append(b, `,"system_fingerprint":`...)
		b = appendJSONString(b, out.SystemFingerprint)
	}
	return append(b, '}')
}

func appendChoice(b []byte, c *chat.Choice) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(c.Index), 10)
	m := &c.Message
	b = append(b, `,"message":{"role":`...)
	b = appendJSONString(b, m.Role)
	b = append(b, `,"content":`...)
	b = appendStringPtr(b, m.Content)
	if m.Refusal != nil {
		b = append(b, `,"refusal":`...)
		b = append(b, m.Refusal...)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			t := &m.ToolCalls[i]
			b = append(b, '{')
			if t.ID != "" {
				b = append(b, `"id":`...)
				b = appendJSONString(b, t.ID)
				b = append(b, ',')
			}
			b = append(b, `"type":`...)
			b = appendJSONString(b, t.Type)
			b = append(b, `,"function":`...)
			b = appendFunction(b, &t.Function)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if m.FunctionCall != nil {
		b = append(b, `,"function_call":`...)
		b = appendFunction(b, m.FunctionCall)
	}
	if m.ReasoningContent != nil {
		b = append(b, `,"reasoning_content":`...)
		b = appendJSONString(b, *m.ReasoningContent)
	}
	b = append(b, `},"logprobs":`...)
	b = appendRaw(b, c.Logprobs)
	b = append(b, `,"finish_reason":`...)
	b = appendStringPtr(b, c.FinishReason)
	if c.StopReason != nil {
		b = append(b, `,"stop_reason":`...)
		b = appendJSONString(b, *c.StopReason)
	}
	return append(b, '}')
}

func appendFunction(b []byte, f *chat.Function) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, f.Name)
	b = append(b, `,"arguments":`...)
	b = appendJSONString(b, f.Arguments)
	return append(b, '}')
}

func appendRaw(b, raw []byte) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

// appendJSONString appends s quoted as encoding/json does by default (with
// <, > and & escaped for HTML).
func appendJSONString(b []byte, s string) []byte { return jsonstr.Append(b, s, true) }
