package llm

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// Assembler builds a chat.completion from the chunks of a streamed answer:
// the gateway calls providers streaming even for a non-streaming client, so
// that fallback and first_token_timeout work the same for both.
type Assembler struct {
	id, model, fingerprint, serviceTier string
	created                             int64
	choices                             map[int]*choiceAcc
}

type choiceAcc struct {
	role         string
	content      strings.Builder
	hasContent   bool
	refusal      strings.Builder
	hasRefusal   bool
	toolCalls    map[int]*toolCallAcc
	function     *functionAcc
	finishReason string
	// reasoning is a reasoning model's thinking (reasoning_content or
	// reasoning, when a string); stopReason the stop sequence that ended
	// the choice, when the upstream says (vLLM's stop_reason).
	reasoning    strings.Builder
	hasReasoning bool
	stopReason   string
	logprobs     struct {
		content, refusal []json.RawMessage
		seen             bool
	}
}

// toolCallAcc is a tool call as its deltas build it.
type toolCallAcc struct {
	id, typ  string
	function functionAcc
}

// functionAcc is a function's name and arguments as deltas build them.
type functionAcc struct {
	name, arguments strings.Builder
}

func (f *functionAcc) function() chat.Function {
	return chat.Function{Name: f.name.String(), Arguments: f.arguments.String()}
}

// Add takes one chunk's JSON.
func (a *Assembler) Add(raw []byte) error {
	var h chunkHead
	if err := decodeChunk(raw, &h, nil); err != nil {
		return err
	}
	c := h.chunk(raw)
	a.add(&c)
	return nil
}

// AddChunk takes a chunk: its typed fields, or, for a chunk made with only
// Raw, Raw decoded.
func (a *Assembler) AddChunk(c *Chunk) error {
	if c.undecoded() {
		return a.Add(c.Raw)
	}
	a.add(c)
	return nil
}

func (a *Assembler) add(w *Chunk) {
	if a.choices == nil {
		a.choices = map[int]*choiceAcc{}
	}
	if a.id == "" {
		a.id = w.ID
	}
	if a.model == "" {
		a.model = w.Model
	}
	if a.created == 0 {
		a.created = w.Created
	}
	if w.SystemFingerprint != "" {
		a.fingerprint = w.SystemFingerprint
	}
	if w.ServiceTier != "" {
		a.serviceTier = w.ServiceTier
	}
	for i := range w.Choices {
		ch := &w.Choices[i]
		if ch.Index < 0 || ch.Index > 1024 {
			continue
		}
		c := a.choices[ch.Index]
		if c == nil {
			c = &choiceAcc{}
			a.choices[ch.Index] = c
		}
		d := &ch.Delta
		if d.Role != "" {
			c.role = d.Role
		}
		if d.Content != nil {
			c.content.WriteString(*d.Content)
			c.hasContent = true
		}
		if d.Refusal != nil {
			c.refusal.WriteString(*d.Refusal)
			c.hasRefusal = true
		}
		for _, tc := range d.ToolCalls {
			if tc.Index < 0 || tc.Index > 1024 {
				continue
			}
			if c.toolCalls == nil {
				c.toolCalls = map[int]*toolCallAcc{}
			}
			t := c.toolCalls[tc.Index]
			if t == nil {
				t = &toolCallAcc{typ: "function"}
				c.toolCalls[tc.Index] = t
			}
			if tc.ID != "" {
				t.id = tc.ID
			}
			if tc.Type != "" {
				t.typ = tc.Type
			}
			t.function.name.WriteString(tc.Function.Name)
			t.function.arguments.WriteString(tc.Function.Arguments)
		}
		if text := d.Thinking(); text != "" {
			c.reasoning.WriteString(text)
			c.hasReasoning = true
		}
		if ch.StopSequence != nil {
			c.stopReason = *ch.StopSequence
		}
		if d.FunctionCall != nil {
			if c.function == nil {
				c.function = &functionAcc{}
			}
			c.function.name.WriteString(d.FunctionCall.Name)
			c.function.arguments.WriteString(d.FunctionCall.Arguments)
		}
		if ch.Logprobs != nil {
			c.logprobs.seen = true
			c.logprobs.content = append(c.logprobs.content, ch.Logprobs.Content...)
			c.logprobs.refusal = append(c.logprobs.refusal, ch.Logprobs.Refusal...)
		}
		if ch.FinishReason != "" {
			c.finishReason = ch.FinishReason
		}
	}
}

// jsonNull is a choice's logprobs, and its message's refusal, when it has
// none. (Shared: nothing appends to it.)
var jsonNull = json.RawMessage("null")

// Completion returns the chat.completion JSON with usage. finishOverride,
// when not empty, replaces every choice's finish_reason (the gateway marks a
// cut answer "incomplete").
func (a *Assembler) Completion(usage Usage, finishOverride string) ([]byte, error) {
	out, err := a.completion(usage, finishOverride)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// Answer returns the chat.completion with usage as a value, for the
// client APIs that reshape it.
func (a *Assembler) Answer(usage Usage) (*chat.Completion, error) {
	return a.completion(usage, "")
}

// completion is the answer as the structure encoding/json would encode.
func (a *Assembler) completion(usage Usage, finishOverride string) (*chat.Completion, error) {
	u, err := usage.appendJSON(make([]byte, 0, 96))
	if err != nil {
		return nil, err
	}
	out := chat.Completion{
		ID: a.id, Object: chat.ObjectCompletion, Created: a.created, Model: a.model,
		Usage: u, SystemFingerprint: a.fingerprint, ServiceTier: a.serviceTier,
		Choices: make([]chat.Choice, 0, max(len(a.choices), 1)),
	}
	idx := make([]int, 0, len(a.choices))
	for i := range a.choices {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	if len(idx) == 0 {
		// An answer with no choice chunk at all still gets one empty choice,
		// as clients index choices[0].
		idx = append(idx, 0)
		a.choices = map[int]*choiceAcc{0: {}}
	}
	for _, i := range idx {
		c := a.choices[i]
		role := c.role
		if role == "" {
			role = "assistant"
		}
		m := chat.Message{Role: role, Refusal: jsonNull}
		if c.hasContent || (!c.hasRefusal && len(c.toolCalls) == 0 && c.function == nil) {
			s := c.content.String()
			m.Content = &s
		}
		if c.hasRefusal {
			m.Refusal = AppendString(nil, c.refusal.String())
		}
		if len(c.toolCalls) > 0 {
			ti := make([]int, 0, len(c.toolCalls))
			for k := range c.toolCalls {
				ti = append(ti, k)
			}
			sort.Ints(ti)
			for _, k := range ti {
				t := c.toolCalls[k]
				m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: t.id, Type: t.typ, Function: t.function.function()})
			}
		}
		if c.function != nil {
			f := c.function.function()
			m.FunctionCall = &f
		}
		if c.hasReasoning {
			s := c.reasoning.String()
			m.ReasoningContent = &s
		}
		cw := chat.Choice{Index: i, Message: m, Logprobs: jsonNull}
		if c.stopReason != "" {
			stop := c.stopReason
			cw.StopReason = &stop
		}
		if c.logprobs.seen {
			lp := chat.Logprobs{Content: c.logprobs.content, Refusal: c.logprobs.refusal}
			if cw.Logprobs, err = json.Marshal(lp); err != nil {
				return nil, err
			}
		}
		fr := c.finishReason
		if finishOverride != "" {
			fr = finishOverride
		}
		if fr != "" {
			cw.FinishReason = &fr
		}
		out.Choices = append(out.Choices, cw)
	}
	return &out, nil
}
