package responses

import (
	"encoding/json"
	"strings"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// Observer reads the events of a Responses stream passed through to a
// Responses client: each event becomes one llm.Chunk that carries it as it
// is (Proto llm.ProtoResponses, Event its name, Raw its data), with what the
// router reads of it set:
//
//   - Output, on the events that carry the answer: a delta event (a type
//     ending in ".delta": output_text, refusal, function_call_arguments,
//     custom_tool_call_input, reasoning_summary_text, reasoning_text, ...)
//     with a non-empty delta; an output item, added or done, that is a
//     function call, a custom or built-in tool's call, or a message or
//     reasoning item with text or encrypted content in it; an image
//     generation's partial image. response.created, response.in_progress,
//     an empty message or reasoning item, content parts and the ".done"
//     events are not output.
//   - Text, for the count when no usage comes: a delta's text, and a
//     call's name and arguments when it is added.
//   - Seen and Finished 1, and Usage (converted by ChatUsage) on the
//     terminal event,
//     response.completed or response.incomplete.
//   - ID, Model and Created, the Response's, on every event once an event
//     named them.
//
// An "error" event and response.failed are a FailTransient
// *llm.ProviderError with the upstream's message; data that is not an
// event object is a FailTransient *llm.ProviderError too. An event is read
// by its data's "type", else by its SSE name; a chunk's Event is the SSE
// name, else the data's type. The zero Observer is ready.
type Observer struct {
	identity
	events EventReader
	// usage is that of a terminal or failed Response, converted (into
	// slot).
	usage *llm.Usage
	slot  llm.UsageSlot
	done  bool
	calls toolCalls
}

// Done reports whether the terminal event has been observed.
func (o *Observer) Done() bool { return o.done }

// UsageSoFar is the usage of the terminal or failed Response observed, as
// the hub carries it, or nil: the Responses API reports usage in
// those only.
func (o *Observer) UsageSoFar() *llm.Usage { return o.usage }

// Observe reads one event: name is its SSE event name, data its data.
func (o *Observer) Observe(name string, data []byte) (llm.Chunk, error) {
	ev, err := o.events.Read(name, data)
	if err != nil {
		return llm.Chunk{}, malformed(err)
	}
	if name == "" {
		name = ev.Type
	}
	// HasChoices: every event is forwarded, none is a usage-only chunk to
	// hold back.
	c := llm.Chunk{Proto: llm.ProtoResponses, Event: name, Raw: data, HasChoices: true}
	switch ev.Type {
	case EventCreated, EventInProgress, EventQueued:
		if err := o.noteResponse(ev.Response); err != nil {
			return llm.Chunk{}, err
		}
	case EventOutputItemAdded, EventOutputItemDone:
		it, err := readItem(ev.Item)
		if err != nil {
			return llm.Chunk{}, err
		}
		c.Output = it.HasOutput()
		if ev.Type == EventOutputItemAdded {
			c.Text = it.Name + it.Arguments
		} else if isCall(it.Type) {
			o.calls.item(ev.Item)
		}
	case EventImageGenerationCallPartialImage:
		c.Output = true
	case EventCompleted, EventIncomplete:
		r, err := readResponse(ev.Response, false)
		if err != nil {
			return llm.Chunk{}, err
		}
		o.note(&r)
		o.calls.response(ev.Response)
		o.usage = o.slot.Read(ChatUsage(r.Usage, o.calls.counts))
		o.done = true
		c.Usage = o.usage
		c.Seen, c.Finished = 1, 1
	case EventFailed:
		if r, err := readResponse(ev.Response, false); err == nil {
			o.calls.response(ev.Response)
			o.usage = o.slot.Read(ChatUsage(r.Usage, o.calls.counts))
		}
		return llm.Chunk{}, failure(&ev)
	case EventError:
		return llm.Chunk{}, failure(&ev)
	default:
		// A non-empty string delta.
		if strings.HasSuffix(ev.Type, ".delta") {
			if d := llm.NonEmptyString(ev.Delta); d != "" {
				c.Output = true
				c.Text = d
			}
		}
	}
	c.ID, c.Model, c.Created = o.id, o.model, o.created
	return c, nil
}

// noteResponse takes the id, model and creation time of a Response an
// event carries.
func (o *Observer) noteResponse(raw json.RawMessage) error {
	if jsonobj.IsNull(raw) {
		return nil
	}
	r, err := readResponse(raw, false)
	if err != nil {
		return err
	}
	o.note(&r)
	return nil
}
