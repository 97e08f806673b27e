package messages

import (
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	messageswire "github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// passStream relays a Messages stream passed through: the provider's
// events as it sent them, message_delta with the cost in its usage.
func (c *messagesCodec) passStream(ans *router.Answer, out gateway.Emitter) gateway.Result {
	out.Start(http.StatusOK, clientapi.AnswerHead(c.requestID, c.req, ans, "text/event-stream"), true)
	return clientapi.PassStream(ans, out, passDialect{})
}

// passDialect is the Messages stream passed through
// (clientapi.PassDialect): message_delta carries the final usage, in
// "usage"; a stream that fails ends with an error event, one that stops
// with a message_delta of the usage so far.
type passDialect struct{}

var usagePath = []string{"usage"}

func (passDialect) UsageEvent(ch *llm.Chunk) bool {
	return ch.Event == messageswire.EventMessageDelta || ch.Usage != nil && ch.FinishReason != ""
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
