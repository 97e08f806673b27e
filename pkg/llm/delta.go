package llm

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

// FirstChoice passes what the chunk's choices of index 0 add to f, and
// returns the first non-empty finish_reason among them. A chunk made with
// only Raw is decoded first; one that does not decode adds nothing.
func (c *Chunk) FirstChoice(f *DeltaFuncs) (finish string) {
	choices := c.Choices
	if c.undecoded() {
		var h chunkHead
		if decodeChunk(c.Raw, &h, nil) != nil {
			return ""
		}
		choices = h.Choices
	}
	for i := range choices {
		ch := &choices[i]
		if ch.Index != 0 {
			continue // one answer: the first choice
		}
		d := &ch.Delta
		if f.Reasoning != nil {
			if s := d.Thinking(); s != "" {
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
		if ch.FinishReason != "" && finish == "" {
			finish = ch.FinishReason
		}
		if f.StopSequence != nil && ch.StopSequence != nil {
			f.StopSequence(*ch.StopSequence)
		}
	}
	return finish
}
