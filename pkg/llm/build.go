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
// back, but for c.Usage, which is read once (into usage, the decoder's
// slot, or allocated when nil); Raw is c's JSON, written once as OpenAI
// writes it (compact, without HTML escaping). c's strings are valid UTF-8
// (as a JSON decoder gives them) and c.Usage, when set, is compact JSON
// (as json.Marshal writes it). The error is the encoder's, for a value it
// cannot write.
func ChatChunk(c *chat.Chunk, usage *UsageSlot) (Chunk, error) {
	b := chunkBuffers.Get().(*bytes.Buffer)
	defer chunkBuffers.Put(b)
	b.Reset()
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return Chunk{}, err
	}
	raw := bytes.Clone(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	ch := Chunk{Raw: raw, ID: c.ID, Model: c.Model, Created: c.Created,
		SystemFingerprint: c.SystemFingerprint, ServiceTier: c.ServiceTier,
		Choices: make([]ChunkChoice, len(c.Choices))}
	ch.Usage = usage.Read(c.Usage)
	for i := range c.Choices {
		if err := ch.Choices[i].from(&c.Choices[i]); err != nil {
			return Chunk{}, err
		}
	}
	ch.derive()
	return ch, nil
}

// chunkBuffers are the buffers ChatChunk encodes in: the chunk keeps a copy
// of its own size, not the buffer.
var chunkBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// from makes t the choice ch, as the chunk decoder reads it from ch's JSON.
func (t *ChunkChoice) from(ch *chat.ChunkChoice) error {
	d := &ch.Delta
	t.Index, t.FinishReason, t.StopSequence = ch.Index, deref(ch.FinishReason), ch.StopReason
	t.Delta = Delta{Role: d.Role, Content: d.Content, Refusal: d.Refusal, ReasoningContent: deref(d.ReasoningContent)}
	if len(ch.Logprobs) > 0 && string(ch.Logprobs) != "null" {
		// Read as the decoder reads them from Raw, where the encoder wrote
		// them compact.
		var compact bytes.Buffer
		if err := json.Compact(&compact, ch.Logprobs); err != nil {
			return err
		}
		var l chat.Logprobs
		if err := json.Unmarshal(compact.Bytes(), &l); err != nil {
			return err
		}
		t.Logprobs = &l
	}
	if len(d.ToolCalls) > 0 {
		t.Delta.ToolCalls = make([]ToolCallDelta, len(d.ToolCalls))
		for i, tc := range d.ToolCalls {
			call := ToolCallDelta{Index: tc.Index, ID: tc.ID, Type: tc.Type}
			if f := tc.Function; f != nil {
				call.Function = chat.Function{Name: deref(f.Name), Arguments: deref(f.Arguments)}
			}
			t.Delta.ToolCalls[i] = call
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
