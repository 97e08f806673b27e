package llm

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// ChatChunk is c, a chat.completion.chunk an adapter made from its
// upstream's typed events, as the Chunk the pipeline reads: what
// ParseChunk would read of c's JSON is taken from c's fields, never parsed
// back, and Raw is c's JSON, written once as OpenAI writes it (compact,
// without HTML escaping). c's strings are valid UTF-8 (as a JSON decoder
// gives them) and c.Usage, when set, is compact JSON (as json.Marshal
// writes it). The error is the encoder's, for a value it
// cannot write.
func ChatChunk(c *chat.Chunk) (Chunk, error) {
	b := chunkBuffers.Get().(*bytes.Buffer)
	defer chunkBuffers.Put(b)
	b.Reset()
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return Chunk{}, err
	}
	raw := bytes.Clone(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	w := newDeltaWire(len(c.Choices))
	w.ID, w.Model, w.Created, w.SystemFingerprint, w.ServiceTier, w.Usage =
		c.ID, c.Model, c.Created, c.SystemFingerprint, c.ServiceTier, c.Usage
	for i := range c.Choices {
		if err := w.Choices[i].from(&c.Choices[i]); err != nil {
			return Chunk{}, err
		}
	}
	ch := Chunk{Raw: raw, ID: c.ID, Model: c.Model, Created: c.Created, HasChoices: len(c.Choices) > 0, parsed: w}
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
		ch.Usage = c.Usage
	}
	for i := range c.Choices {
		ch.addChoice(&c.Choices[i])
	}
	return ch, nil
}

// newDeltaWire is a decoded chunk of n choices; one of a single choice (a
// translation's every chunk but its usage) is one allocation.
func newDeltaWire(n int) *deltaWire {
	if n != 1 {
		return &deltaWire{Choices: make([]deltaChoiceWire, n)}
	}
	one := new(struct {
		w deltaWire
		c [1]deltaChoiceWire
	})
	one.w.Choices = one.c[:]
	return &one.w
}

// chunkBuffers are the buffers ChatChunk encodes in: the chunk keeps a copy
// of its own size, not the buffer.
var chunkBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// addChoice reads one choice of a chunk as parseChunk reads it: its
// output and text, its bit, and its finish_reason.
func (c *Chunk) addChoice(ch *chat.ChunkChoice) {
	d := &ch.Delta
	for _, s := range [...]*string{d.Content, d.Refusal, d.ReasoningContent} {
		if s != nil && *s != "" {
			c.Output = true
			c.addText(*s)
		}
	}
	if len(d.ToolCalls) > 0 {
		c.Output = true
		for _, tc := range d.ToolCalls {
			if f := tc.Function; f != nil {
				c.addText(deref(f.Name))
				c.addText(deref(f.Arguments))
			}
		}
	}
	bit := uint64(1) << min(max(ch.Index, 0), 63)
	c.Seen |= bit
	if ch.FinishReason != nil && *ch.FinishReason != "" {
		c.Finished |= bit
		if c.FinishReason == "" {
			c.FinishReason = *ch.FinishReason
		}
	}
}

// from makes w the choice ch, as decodeDelta would read it from ch's JSON.
func (w *deltaChoiceWire) from(ch *chat.ChunkChoice) error {
	d := &ch.Delta
	w.Index, w.FinishReason = ch.Index, ch.FinishReason
	w.Delta = deltaDeltaWire{Role: d.Role, Content: d.Content, Refusal: d.Refusal}
	var err error
	if d.ReasoningContent != nil {
		if w.Delta.ReasoningContent, err = json.Marshal(*d.ReasoningContent); err != nil {
			return err
		}
	}
	if ch.StopReason != nil {
		if w.StopReason, err = json.Marshal(*ch.StopReason); err != nil {
			return err
		}
	}
	if len(ch.Logprobs) > 0 && string(ch.Logprobs) != "null" {
		w.Logprobs = new(deltaLogprobsWire)
		if err := json.Unmarshal(ch.Logprobs, w.Logprobs); err != nil {
			return err
		}
	}
	if len(d.ToolCalls) > 0 {
		w.Delta.ToolCalls = make([]deltaToolCallWire, len(d.ToolCalls))
		for i, tc := range d.ToolCalls {
			t := deltaToolCallWire{Index: tc.Index, ID: tc.ID, Type: tc.Type}
			if f := tc.Function; f != nil {
				t.Function = FunctionCall{Name: deref(f.Name), Arguments: deref(f.Arguments)}
			}
			w.Delta.ToolCalls[i] = t
		}
	}
	return nil
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
