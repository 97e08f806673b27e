package responses

import (
	"encoding/json"
	"strings"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// Decoder turns the events of a Responses stream into OpenAI
// chat.completion.chunk values, as the package doc's table says, so that the
// rest of the gateway sees a Responses upstream as any other. Items are
// followed by their output_index, or by their id when an event has no
// index; what an item's done event (or the terminal Response's output)
// holds that no delta streamed is emitted then, so a server that streams
// whole items still answers. The zero Decoder is not usable; use
// NewDecoder.
type Decoder struct {
	identity
	events EventReader
	slot   llm.UsageSlot // where a chunk's usage is read into

	byIndex map[int]*itemState
	byID    map[string]*itemState
	tools   int // function calls so far: the next one's tool call index

	started bool // the role chunk is out
	usage   json.RawMessage
	calls   toolCalls
	done    bool
}

// itemState is what the decoder keeps of one output item.
type itemState struct {
	kind string
	tool int // a function call's tool call index
	// What was emitted of it: arguments, text or refusal, reasoning.
	argsOut, textOut, reasoningOut bool
	// summary is the summary part the last reasoning delta belonged to.
	summary int
}

// NewDecoder returns a Decoder whose chunks carry created as their
// "created" time until the Response names its own.
func NewDecoder(created int64) *Decoder {
	return &Decoder{identity: identity{created: created}, byIndex: map[int]*itemState{}, byID: map[string]*itemState{}}
}

// Done reports whether the terminal event has been decoded.
func (d *Decoder) Done() bool { return d.done }

// UsageSoFar is the usage of the terminal or failed Response decoded, as
// the hub carries it, or nil: the Responses API reports usage in those
// only.
func (d *Decoder) UsageSoFar() *llm.Usage { return llm.ReadUsage(d.usage) }

// Decode reads one event's data (name is its SSE event name, used when the
// data has no "type") and returns the chunks it becomes, none for most
// events. An "error" event and response.failed are a FailTransient
// *llm.ProviderError with the upstream's message; data that is not an event
// object, or a known event whose item or Response is not an object, is a
// FailTransient *llm.ProviderError too. After the terminal event, Done is
// true and later events are ignored.
func (d *Decoder) Decode(name string, data []byte) ([]llm.Chunk, error) {
	if d.done {
		return nil, nil
	}
	ev, err := d.events.Read(name, data)
	if err != nil {
		return nil, malformed(err)
	}
	var out []llm.Chunk
	switch ev.Type {
	case EventCreated, EventInProgress, EventQueued:
		if !jsonobj.IsNull(ev.Response) {
			r, err := readResponse(ev.Response, false)
			if err != nil {
				return nil, err
			}
			d.note(&r)
		}
		if ev.Type == EventCreated {
			return d.start(nil)
		}
	case EventOutputItemAdded:
		it, err := readItem(ev.Item)
		if err != nil {
			return nil, err
		}
		st := d.lookup(Index(ev.OutputIndex), it.ID)
		if st != nil {
			return nil, nil // added twice: the first counts
		}
		st = d.register(Index(ev.OutputIndex), it.ID, it.Type)
		if it.Type == ItemFunctionCall {
			return d.startCall(out, st, &it, false)
		}
	case EventOutputTextDelta, EventRefusalDelta:
		s := String(ev.Delta)
		if s == "" {
			return nil, nil
		}
		d.follow(&ev, ItemMessage).textOut = true
		if ev.Type == EventRefusalDelta {
			return d.emit(out, chat.Delta{Refusal: &s}, nil)
		}
		return d.emit(out, chat.Delta{Content: &s}, nil)
	case EventFunctionCallArgumentsDelta, EventFunctionCallArgumentsDone:
		st := d.lookup(Index(ev.OutputIndex), String(ev.ItemID))
		if st == nil || st.kind != ItemFunctionCall {
			return nil, nil
		}
		if ev.Type == EventFunctionCallArgumentsDelta {
			s := String(ev.Delta)
			if s == "" {
				return nil, nil
			}
			st.argsOut = true
			return d.emitArgs(out, st, s)
		}
		if s := String(ev.Arguments); !st.argsOut && s != "" {
			st.argsOut = true
			return d.emitArgs(out, st, s)
		}
	case EventReasoningSummaryTextDelta, EventReasoningTextDelta:
		s := String(ev.Delta)
		if s == "" {
			return nil, nil
		}
		st := d.follow(&ev, ItemReasoning)
		part := Index(ev.SummaryIndex)
		if ev.Type == EventReasoningSummaryTextDelta && st.reasoningOut && part > st.summary {
			s = "\n\n" + s // a new summary part
		}
		st.reasoningOut, st.summary = true, part
		return d.emit(out, chat.Delta{ReasoningContent: &s}, nil)
	case EventOutputItemDone:
		it, err := readItem(ev.Item)
		if err != nil {
			return nil, err
		}
		if isCall(it.Type) {
			d.calls.item(ev.Item)
		}
		return d.itemDone(out, Index(ev.OutputIndex), &it)
	case EventCompleted, EventIncomplete:
		return d.finish(out, &ev)
	case EventFailed:
		if r, err := readResponse(ev.Response, false); err == nil {
			d.calls.response(ev.Response)
			d.usage = ChatUsage(r.Usage, d.calls.counts)
		}
		return nil, failure(&ev)
	case EventError:
		return nil, failure(&ev)
	}
	return nil, nil // content parts, the .done events, annotations, and kinds added after this was written
}

// lookup finds an item by its id, else by its output_index; nil when
// neither is known.
func (d *Decoder) lookup(idx int, id string) *itemState {
	if id != "" {
		if st := d.byID[id]; st != nil {
			return st
		}
	}
	if idx >= 0 {
		return d.byIndex[idx]
	}
	return nil
}

// follow is the item an event's delta belongs to, registered as of kind
// when no output_item.added announced it (so that its done event does not
// emit its text again).
func (d *Decoder) follow(ev *EventView, kind string) *itemState {
	idx, id := Index(ev.OutputIndex), String(ev.ItemID)
	if st := d.lookup(idx, id); st != nil {
		return st
	}
	return d.register(idx, id, kind)
}

func (d *Decoder) register(idx int, id, kind string) *itemState {
	st := &itemState{kind: kind, summary: -1}
	if idx >= 0 {
		d.byIndex[idx] = st
	}
	if id != "" {
		d.byID[id] = st
	}
	return st
}

// startCall emits a function call's first piece: its index, id, type and
// name, with the arguments the item already has (done: "{}" for none).
func (d *Decoder) startCall(out []llm.Chunk, st *itemState, it *ItemView, done bool) ([]llm.Chunk, error) {
	st.tool = d.tools
	d.tools++
	args := it.Arguments
	if args == "" && done {
		args = "{}"
	}
	st.argsOut = args != ""
	return d.emit(out, chat.Delta{ToolCalls: []chat.DeltaToolCall{{
		Index: st.tool, ID: it.CallID, Type: "function",
		Function: &chat.DeltaFunction{Name: &it.Name, Arguments: &args},
	}}}, nil)
}

func (d *Decoder) emitArgs(out []llm.Chunk, st *itemState, args string) ([]llm.Chunk, error) {
	return d.emit(out, chat.Delta{ToolCalls: []chat.DeltaToolCall{{
		Index: st.tool, Function: &chat.DeltaFunction{Arguments: &args},
	}}}, nil)
}

// itemDone emits what a finished item holds that no delta streamed: a
// function call not yet announced, or its arguments ("{}" for none); a
// message's text and refusal; a reasoning item's summary and text.
func (d *Decoder) itemDone(out []llm.Chunk, idx int, it *ItemView) ([]llm.Chunk, error) {
	st := d.lookup(idx, it.ID)
	if st == nil {
		st = d.register(idx, it.ID, it.Type)
		if it.Type == ItemFunctionCall {
			return d.startCall(out, st, it, true)
		}
	}
	var err error
	switch it.Type {
	case ItemFunctionCall:
		if st.kind == ItemFunctionCall && !st.argsOut {
			st.argsOut = true
			args := it.Arguments
			if args == "" {
				args = "{}"
			}
			return d.emitArgs(out, st, args)
		}
	case ItemMessage:
		if st.kind != ItemMessage || st.textOut {
			return out, nil
		}
		st.textOut = true
		var text, refusal strings.Builder
		for _, p := range it.Content {
			text.WriteString(p.Text)
			refusal.WriteString(p.Refusal)
		}
		if s := text.String(); s != "" {
			if out, err = d.emit(out, chat.Delta{Content: &s}, nil); err != nil {
				return nil, err
			}
		}
		if s := refusal.String(); s != "" {
			return d.emit(out, chat.Delta{Refusal: &s}, nil)
		}
	case ItemReasoning:
		if st.kind != ItemReasoning || st.reasoningOut {
			return out, nil
		}
		st.reasoningOut = true
		var parts []string
		for _, list := range [2][]PartView{it.Summary, it.Content} {
			for _, p := range list {
				if p.Text != "" {
					parts = append(parts, p.Text)
				}
			}
		}
		if s := strings.Join(parts, "\n\n"); s != "" {
			return d.emit(out, chat.Delta{ReasoningContent: &s}, nil)
		}
	}
	return out, nil
}

// finish ends the answer at response.completed or response.incomplete:
// what the Response's output holds that no event streamed, the finish
// chunk, and the usage chunk when there is usage.
func (d *Decoder) finish(out []llm.Chunk, ev *EventView) ([]llm.Chunk, error) {
	r, err := readResponse(ev.Response, true)
	if err != nil {
		return nil, err
	}
	d.note(&r)
	for i, raw := range r.Output {
		it, err := readItem(raw)
		if err != nil {
			return nil, err
		}
		if isCall(it.Type) {
			d.calls.item(raw)
		}
		if out, err = d.itemDone(out, i, &it); err != nil {
			return nil, err
		}
	}
	incomplete := ev.Type == EventIncomplete || r.Status == StatusIncomplete
	finish := FinishReason(incomplete, r.IncompleteReason, d.tools > 0)
	if out, err = d.emit(out, chat.Delta{}, &finish); err != nil {
		return nil, err
	}
	d.usage = ChatUsage(r.Usage, d.calls.counts)
	d.done = true
	if d.usage == nil {
		return out, nil
	}
	return d.emitUsage(out, d.usage)
}

// start emits the role chunk, once.
func (d *Decoder) start(out []llm.Chunk) ([]llm.Chunk, error) {
	if d.started {
		return out, nil
	}
	d.started = true
	empty := ""
	return d.chunk(out, chat.Chunk{Choices: []chat.ChunkChoice{{Delta: chat.Delta{Role: "assistant", Content: &empty}}}})
}

// emit appends one chunk of one choice with delta and finish, after the
// role chunk when it is not out yet.
func (d *Decoder) emit(out []llm.Chunk, delta chat.Delta, finish *string) ([]llm.Chunk, error) {
	out, err := d.start(out)
	if err != nil {
		return nil, err
	}
	return d.chunk(out, chat.Chunk{Choices: []chat.ChunkChoice{{Delta: delta, FinishReason: finish}}})
}

// emitUsage appends the usage-only chunk.
func (d *Decoder) emitUsage(out []llm.Chunk, usage json.RawMessage) ([]llm.Chunk, error) {
	return d.chunk(out, chat.Chunk{Choices: []chat.ChunkChoice{}, Usage: usage})
}

func (d *Decoder) chunk(out []llm.Chunk, w chat.Chunk) ([]llm.Chunk, error) {
	w.ID, w.Object, w.Created, w.Model = d.id, chat.ObjectChunk, d.created, d.model
	c, err := llm.ChatChunk(&w, &d.slot)
	if err != nil {
		return nil, malformed(err)
	}
	return append(out, c), nil
}
