package llm

import "encoding/json"

// DeltaFuncs take what a chunk's first choice adds, for the codecs that
// reshape a stream into another API's events. A nil Reasoning or
// StopSequence is not called.
type DeltaFuncs struct {
	// Text and Refusal take the content and refusal text (called for an
	// empty string too, when the chunk has the field).
	Text, Refusal func(s string)
	// Reasoning takes a reasoning model's thinking: reasoning_content, else
	// reasoning, when a non-empty string.
	Reasoning func(s string)
	// StopSequence takes the stop sequence that ended the answer, when the
	// upstream says (vLLM's stop_reason, when a string).
	StopSequence func(s string)
	ToolCall     func(index int, id, name, args string)
}

// FirstChoice passes what the chunk's choices of index 0 add to f, from
// the chunk as its parser read it, and returns the first non-empty
// finish_reason among them. A chunk that was not made by ParseChunk or a
// ChunkParser is read first; one that does not read adds nothing.
func (c *Chunk) FirstChoice(f *DeltaFuncs) (finish string) {
	w := c.parsed
	if w == nil {
		w = new(deltaWire)
		if decodeDelta(c.Raw, w, nil) != nil {
			return ""
		}
	}
	for i := range w.Choices {
		ch := &w.Choices[i]
		if ch.Index != 0 {
			continue // one answer: the first choice
		}
		d := &ch.Delta
		if f.Reasoning != nil {
			if s := stringOf(d.ReasoningContent); s != "" {
				f.Reasoning(s)
			} else if s := stringOf(d.Reasoning); s != "" {
				f.Reasoning(s)
			}
		}
		if d.Content != nil {
			f.Text(*d.Content)
		}
		if d.Refusal != nil {
			f.Refusal(*d.Refusal)
		}
		for _, tc := range d.ToolCalls {
			f.ToolCall(tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" && finish == "" {
			finish = *ch.FinishReason
		}
		if f.StopSequence != nil && len(ch.StopReason) > 0 && ch.StopReason[0] == '"' {
			var seq string
			if json.Unmarshal(ch.StopReason, &seq) == nil {
				f.StopSequence(seq)
			}
		}
	}
	return finish
}

// stringOf is a raw JSON value's string, or "" when it is not one.
func stringOf(r json.RawMessage) string {
	var s string
	if len(r) > 0 && r[0] == '"' && json.Unmarshal(r, &s) == nil {
		return s
	}
	return ""
}
