package messages

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	messageswire "github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// messagesCodec encodes answers as the Anthropic Messages API: one Message
// body (messageswire.NewMessage), or Anthropic's named event sequence
// (messageswire.StreamWriter), whose stop reasons and endings that
// package's doc gives; or, for an answer of a Messages upstream, the
// provider's own events passed through (passDialect).
type messagesCodec struct {
	requestID string
	req       *llm.ChatRequest
	// model is the model id the client sent, echoed in the message.
	model string
	// keyed: the answer is recorded. A Messages stream always carries its
	// usage (in message_delta), so unlike Chat Completions nothing depends
	// on it yet.
	keyed bool
}

var _ gateway.Codec = (*messagesCodec)(nil)

func (c *messagesCodec) Answer(ans *router.Answer, out gateway.Emitter) gateway.Result {
	c.model = ans.Model() // the provider's name for what answered (docs/api.md#answers)
	if ans.Proto == llm.ProtoMessages {
		if c.req.Stream {
			return clientapi.PassStream(c.requestID, c.req, ans, out, passDialect{})
		}
		return c.passMessage(ans, out)
	}
	if c.req.Stream {
		return c.stream(ans, out)
	}
	return c.message(ans, out)
}

// message assembles the provider's stream into one Message. The ending rules
// are chatCodec.completion's; an answer whose stream just stopped has
// stop_reason null.
func (c *messagesCodec) message(ans *router.Answer, out gateway.Emitter) gateway.Result {
	ch, usage, res, ok, end := clientapi.AssembleChoice(ans)
	if !ok {
		return res
	}
	body, err := messageswire.NewMessage(c.requestID, c.model, ch, usage, end == io.EOF)
	if err != nil {
		return gateway.Result{Usage: usage, Err: err}
	}
	return clientapi.WriteWhole(out, clientapi.AnswerHead(c.requestID, c.req, ans, "application/json"), usage, body, end, nil)
}

// blockWriter is the stream's writer with the sender it writes through,
// in one allocation: a clientapi.DeltaWriter.
type blockWriter struct {
	messageswire.StreamWriter
	clientapi.EventSender
}

// stream relays the answer as Anthropic's event sequence (see messagesCodec).
func (c *messagesCodec) stream(ans *router.Answer, out gateway.Emitter) gateway.Result {
	out.Start(http.StatusOK, clientapi.AnswerHead(c.requestID, c.req, ans, "text/event-stream"), true)
	w := &blockWriter{EventSender: clientapi.EventSender{Out: out}}
	w.Init(&w.EventSender, c.requestID)
	w.Start(c.model, ans.Usage())
	finish, usage, res, gone, end := clientapi.RelayDeltas(ans, w)
	if gone {
		return res
	}
	w.CloseBlock()
	out.Price(usage)
	switch {
	case end == io.EOF, errors.Is(end, router.ErrIncomplete):
		w.End(finish, usage, end == io.EOF)
		if end == io.EOF {
			return gateway.Result{Usage: usage, Answered: true}
		}
	default:
		ev := anthropicErrorEvent(clientapi.CutShort(ans.Provider, end), end)
		w.Send(ev.Name, json.RawMessage(ev.Data))
	}
	return gateway.Result{Usage: usage, Answered: true, Err: end}
}

// JoinBroken ends a joined stream that cannot go on with the same error
// event as a provider failure after the start.
func (c *messagesCodec) JoinBroken(reason string) idempotency.Event {
	b, _ := json.Marshal(messageswire.NewError(&llm.Error{Code: llm.CodeReplayUnavailable, Message: reason}, "idempotency_error"))
	return idempotency.Event{Name: messageswire.EventError, Data: b}
}

// passDialect is the Messages stream passed through
// (clientapi.PassDialect): message_delta carries the final usage, in
// "usage"; a stream that fails ends with an error event, one that stops
// with a message_delta of the usage so far.
type passDialect struct{}

var usagePath = []string{"usage"}

func (passDialect) UsageEvent(ch *llm.Chunk) bool {
	return ch.Event == messageswire.EventMessageDelta || ch.Usage != nil && ch.Finished != 0
}

func (passDialect) UsagePath() []string { return usagePath }

func (passDialect) Broken(e *llm.Error, end error) idempotency.Event {
	return anthropicErrorEvent(e, end)
}

func (passDialect) Stopped(u llm.Usage) []idempotency.Event {
	return []idempotency.Event{{Name: messageswire.EventMessageDelta, Data: messageswire.StoppedDelta(u)}}
}

// passMessage assembles a Messages stream passed through into the Message
// the provider would have answered: message_start's message with its
// content blocks built from their start and deltas, and message_delta's
// stop reason, stop sequence and usage (with the cost). Fields the gateway
// does not know are kept: a block keeps every field of its start, and a
// delta of a type the gateway does not know appends its string fields to
// the block's fields of the same name and sets the others.
func (c *messagesCodec) passMessage(ans *router.Answer, out gateway.Emitter) gateway.Result {
	var m messageswire.Assembler
	usage, res, ok, end := clientapi.ReadWhole(ans, func(ch llm.Chunk) error {
		m.Add(ch.Raw)
		return nil
	})
	if !ok {
		return res
	}
	return clientapi.WriteWhole(out, clientapi.AnswerHead(c.requestID, c.req, ans, "application/json"), usage, m.Message(usage), end, nil)
}

// anthropicErrorEvent is the error event of a Messages stream that failed
// after output started.
func anthropicErrorEvent(e *llm.Error, end error) idempotency.Event {
	return idempotency.Event{Name: messageswire.EventError, Data: messageswire.ErrorEvent(e, end)}
}
