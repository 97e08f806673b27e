package messages

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// Observer reads the events of a Messages stream passed through to a
// Messages client, for what the gateway needs of them (the first output,
// the stop reason, the usage, an error event), and hands each on unchanged:
// its chunks carry the event's name and data as received. Output is any
// content: text, thinking, a tool call's input, or a block that is content
// in itself (tool_use, server_tool_use, redacted_thinking, and block types
// added after this was written). The zero Observer is ready.
type Observer struct {
	usage usageCounts
	// slot holds the usage of the stream's message_delta.
	slot llm.UsageSlot
	done bool
}

// Done reports whether message_stop has been read.
func (o *Observer) Done() bool { return o.done }

// Observe reads one event (name is the SSE event name, used when the data
// has no "type"). An error event is a FailTransient *llm.ProviderError, as
// is data that is not an event object.
func (o *Observer) Observe(name string, data []byte) (llm.Chunk, error) {
	c := llm.Chunk{Proto: llm.ProtoMessages, Event: name, Raw: data, HasChoices: true}
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return llm.Chunk{}, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream event", Err: errors.Join(errMalformed, err)}
	}
	if ev.Type == "" {
		ev.Type = name
	}
	switch ev.Type {
	case EventMessageStart:
		if ev.Message == nil {
			return llm.Chunk{}, malformedEvent("message_start without message")
		}
		c.ID, c.Model = ev.Message.ID, ev.Message.Model
		o.usage.add(ev.Message.Usage)
	case EventContentBlockStart:
		cb := ev.ContentBlock
		if cb == nil {
			return llm.Chunk{}, malformedEvent("content_block_start without content_block")
		}
		switch cb.Type {
		case BlockText:
			c.Text = cb.Text
			c.Output = c.Text != ""
		case BlockThinking:
			c.Text = cb.Thinking
			c.Output = c.Text != ""
		default:
			c.Text = cb.Name
			c.Output = true
		}
	case EventContentBlockDelta:
		if ev.Delta == nil {
			return llm.Chunk{}, malformedEvent("content_block_delta without delta")
		}
		c.Text = ev.Delta.Text + ev.Delta.Thinking + ev.Delta.PartialJSON
		c.Output = c.Text != ""
	case EventMessageDelta:
		o.usage.add(ev.Usage)
		c.Usage = o.usage.soFar(&o.slot)
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			c.Seen, c.Finished = 1, 1
		}
	case EventMessageStop:
		o.done = true
	case EventError:
		msg := "unspecified upstream error"
		if ev.Error != nil && ev.Error.Message != "" {
			msg = ev.Error.Message
		}
		return llm.Chunk{}, &llm.ProviderError{Class: llm.FailTransient, Message: msg, Err: &llm.ChunkError{Message: msg}}
	}
	return c, nil
}

// UsageSoFar is the usage reported so far, as the hub carries it, or nil.
func (o *Observer) UsageSoFar() *llm.Usage { return o.usage.soFar(nil) }

// NativeEvents turns a whole Message (an upstream that answered a streaming
// request with JSON) into the events that stream it: message_start with the
// message less its content, each block started whole and stopped, and
// message_delta with the stop reason, stop sequence and usage. Every field
// of the message and of its blocks is kept as it was. An error envelope is
// its error event.
func NativeEvents(body []byte) ([][]byte, error) {
	ms, err := llm.Members(body)
	if err != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream answer", Err: err}
	}
	var content, stop, stopSeq, usage []byte
	for _, m := range ms {
		switch m.Key {
		case "type":
			if string(m.Value) == `"`+TypeError+`"` {
				return [][]byte{body}, nil
			}
		case "content":
			content = m.Value
		case "stop_reason":
			stop = m.Value
		case "stop_sequence":
			stopSeq = m.Value
		case "usage":
			usage = m.Value
		}
	}
	var blocks []json.RawMessage
	if !jsonobj.IsNull(content) {
		if err := json.Unmarshal(content, &blocks); err != nil {
			return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream answer", Err: err}
		}
	}
	start := llm.Splice(ms, len(body), map[string][]byte{"content": []byte("[]"), "stop_reason": []byte("null"), "stop_sequence": []byte("null")})
	events := [][]byte{append(append([]byte(`{"type":"`+EventMessageStart+`","message":`), start...), '}')}
	for i, b := range blocks {
		idx := strconv.Itoa(i)
		ev := []byte(`{"type":"` + EventContentBlockStart + `","index":` + idx + `,"content_block":`)
		ev = append(append(ev, b...), '}')
		events = append(events, ev, []byte(`{"type":"`+EventContentBlockStop+`","index":`+idx+`}`))
	}
	if len(stop) == 0 || string(stop) == "null" {
		return events, nil
	}
	delta := []byte(`{"type":"` + EventMessageDelta + `","delta":{"stop_reason":`)
	delta = append(delta, stop...)
	if len(stopSeq) > 0 {
		delta = append(append(delta, `,"stop_sequence":`...), stopSeq...)
	}
	delta = append(delta, '}')
	if !jsonobj.IsNull(usage) {
		delta = append(append(delta, `,"usage":`...), usage...)
	}
	events = append(events, append(delta, '}'), []byte(`{"type":"`+EventMessageStop+`"}`))
	return events, nil
}
