package chat

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	chatwire "github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// chatCodec encodes answers as OpenAI Chat Completions: one
// chat.completion body, or chat.completion.chunk events ending with
// "data: [DONE]".
type chatCodec struct {
	requestID string
	req       *llm.ChatRequest
	// keyed: the answer is recorded, so a stream always records its usage
	// chunk (a retry that asks for usage gets it even when the first call
	// did not).
	keyed bool
}

var _ gateway.Codec = (*chatCodec)(nil)

func (c *chatCodec) Answer(ans *router.Answer, out gateway.Emitter) gateway.Result {
	if c.req.Stream {
		return c.stream(ans, out)
	}
	return c.completion(ans, out)
}

// completion assembles the provider's stream into one chat.completion.
func (c *chatCodec) completion(ans *router.Answer, out gateway.Emitter) gateway.Result {
	asm, usage, res, ok, end := clientapi.Assemble(ans)
	if !ok {
		return res
	}
	finish := ""
	if end != io.EOF {
		// The provider stopped without finishing: the client gets what was
		// produced, marked incomplete, rather than losing it.
		finish = "incomplete"
	}
	body, err := asm.Completion(usage, finish)
	if err != nil {
		return gateway.Result{Usage: usage, Err: err}
	}
	return clientapi.WriteWhole(out, clientapi.AnswerHead(c.requestID, c.req, ans, "application/json"), usage, body, end, nil)
}

// The choices of the chunks the gateway itself writes into a stream: none
// on the usage chunk, one finished choice on the last chunk of a stream
// that did not finish.
var (
	noChoices         = []chatwire.ChunkChoice{}
	incompleteChoices = finishedChoices("incomplete")
	errorChoices      = finishedChoices("error")
)

func finishedChoices(reason string) []chatwire.ChunkChoice {
	return []chatwire.ChunkChoice{{FinishReason: &reason}}
}

// stream relays the answer as SSE. The provider's chunks go out as it sent
// them; the gateway adds the usage chunk (when include_usage) and ends with
// "data: [DONE]" only when the provider finished. A provider failure after
// the start ends with a chunk whose finish_reason is "error" and which
// carries an "error" object (the Python and Node OpenAI SDKs raise it as an
// APIError, openai-go as an ssestream.StreamError); a provider stream that
// just stopped ends with finish_reason "incomplete" and no error.
func (c *chatCodec) stream(ans *router.Answer, out gateway.Emitter) gateway.Result {
	out.Start(http.StatusOK, clientapi.AnswerHead(c.requestID, c.req, ans, "text/event-stream"), true)
	tail := chatwire.Chunk{Object: chatwire.ObjectChunk}
	var end error
	for {
		ch, err := ans.Next()
		if err != nil {
			end = err
			break
		}
		if tail.ID == "" {
			tail.ID, tail.Model, tail.Created = ch.ID, ch.Model, ch.Created
		}
		if err := out.Event(idempotency.Event{Data: ch.Raw}, true); err != nil {
			return gateway.Result{Usage: ans.Usage(), Answered: true, Err: err}
		}
	}
	usage := ans.Usage()
	if errors.Is(end, context.Canceled) {
		return gateway.Result{Usage: usage, Answered: true, Err: end} // an unkeyed client is gone
	}
	out.Price(usage)
	emit := func(usageChunk, send bool) {
		b, _ := json.Marshal(tail)
		out.Event(idempotency.Event{Data: b, Usage: usageChunk}, send)
	}
	if errors.Is(end, router.ErrIncomplete) {
		tail.Choices = incompleteChoices
		emit(false, true)
	}
	if c.req.IncludeUsage || c.keyed {
		tail.Choices = noChoices
		var err error
		if tail.Usage, err = usage.MarshalJSON(); err != nil {
			// A cost that is not a number has no JSON: the event is
			// empty, as json.Marshal leaves it.
			out.Event(idempotency.Event{Usage: true}, c.req.IncludeUsage)
		} else {
			emit(true, c.req.IncludeUsage)
		}
		tail.Usage = nil
	}
	switch {
	case end == io.EOF:
		out.Event(idempotency.Event{Data: []byte("[DONE]")}, true)
		return gateway.Result{Usage: usage, Answered: true}
	case errors.Is(end, router.ErrIncomplete):
	default:
		obj := clientapi.Envelope(clientapi.CutShort(ans.Provider, end))
		obj.Type = "server_error"
		tail.Choices = errorChoices
		tail.Error = &obj
		emit(false, true)
	}
	return gateway.Result{Usage: usage, Answered: true, Err: end}
}

// JoinBroken ends a joined stream that cannot go on with the same kind of
// chunk as a provider failure after the start.
func (c *chatCodec) JoinBroken(reason string) idempotency.Event {
	obj := clientapi.Envelope(&llm.Error{Code: llm.CodeReplayUnavailable, Message: reason})
	b, _ := json.Marshal(chatwire.Chunk{Object: chatwire.ObjectChunk, Choices: errorChoices, Error: &obj})
	return idempotency.Event{Data: b}
}
