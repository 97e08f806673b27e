package responses

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
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// responsesCodec encodes answers as the OpenAI Responses API: one Response
// object, or the Responses event sequence, as pkg/wire/responses writes
// them (fromhub.go); or the provider's own, passed through (passDialect).
type responsesCodec struct {
	requestID string
	req       *llm.ChatRequest
	// head is what the Response says of the request: its ids, the model
	// the client sent (then the one that answered), what it echoes.
	head responseswire.Head
	// keyed: the answer is recorded. A Responses stream always carries its
	// usage (in its last event), so nothing depends on it yet.
	keyed bool
	// turn, when not nil, is given the answer's output as Chat Completions
	// messages (one assistant message) once it is complete or incomplete,
	// after Price and before the last bytes, so that the turn can be kept
	// for previous_response_id. A failed answer is no turn.
	turn turnKeeping
	// store, when not nil, is the "store" of a response object: what the
	// request asked while the answer runs, whether the turn was kept once
	// it is final.
	store storeState
	// sender and items write a stream's events (stream): part of the
	// codec, which is on the heap already, as the DeltaWriter they are
	// given to needs.
	sender clientapi.EventSender
	items  responseswire.ItemWriter
}

var _ gateway.Codec = (*responsesCodec)(nil)

// turnKeeping keeps a translated answer's turn (turnKeeper): the response
// object and the output of the response id.
type turnKeeping interface {
	keepTurn(id string, response json.RawMessage, output []json.RawMessage, usage llm.Usage)
}

// storeState says a response object's "store" (turnKeeper.stored).
type storeState interface {
	stored(final bool) bool
}

func (c *responsesCodec) Answer(ans *router.Answer, out gateway.Emitter) gateway.Result {
	c.head.Model = ans.Model() // the provider's name for what answered (docs/api.md#answers)
	if ans.Proto == llm.ProtoResponses {
		if c.req.Stream {
			return clientapi.PassStream(c.requestID, c.req, ans, out, passDialect{})
		}
		return c.passResponse(ans, out)
	}
	if c.req.Stream {
		return c.stream(ans, out)
	}
	return c.response(ans, out)
}

// object is the Response with the given status and output (see
// responseswire.Head.Object), its "store" the keeper's.
func (c *responsesCodec) object(s *responseswire.Settings, status string, output []any, usage *llm.Usage) *responseswire.Response {
	r := c.head.Object(s, status, output, usage)
	if c.store != nil {
		v := c.store.stored(status != responseswire.StatusInProgress)
		r.Store = &v
	}
	return r
}

// responsesEnding is how a finished or cut answer reads: its status and
// incomplete_details.
func responsesEnding(end error, finish string) (string, *responseswire.IncompleteDetails) {
	if errors.Is(end, router.ErrIncomplete) {
		return responseswire.StatusIncomplete, &responseswire.IncompleteDetails{Reason: "interrupted"}
	}
	return responseswire.Ending(finish)
}

// keepTurn gives c.turn the turn t, whose response object is resp.
func (c *responsesCodec) keepTurn(resp json.RawMessage, t *responseswire.Turn, usage llm.Usage) {
	if c.turn == nil {
		return
	}
	b, err := t.Message()
	if err != nil {
		return
	}
	c.turn.keepTurn(c.head.ResponseID(), resp, []json.RawMessage{b}, usage)
}

// response assembles the provider's stream into one Response. The ending
// rules are chatCodec.completion's: a failure after output is an error and
// nothing is written; a stream that just stopped is an incomplete Response.
func (c *responsesCodec) response(ans *router.Answer, out gateway.Emitter) gateway.Result {
	ch, usage, res, ok, end := clientapi.AssembleChoice(ans)
	if !ok {
		return res
	}
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	status, details := responsesEnding(end, finish)
	output, turn := c.head.Output(ch, status)
	settings := c.head.Settings(c.req)
	r := c.object(&settings, status, output, &usage)
	r.IncompleteDetails = details
	body, err := json.Marshal(r)
	if err != nil {
		return gateway.Result{Usage: usage, Err: err}
	}
	return clientapi.WriteWhole(out, clientapi.AnswerHead(c.requestID, c.req, ans, "application/json"), usage, body, end, func() {
		c.keepTurn(body, &turn, usage)
	})
}

// stream relays the answer as the Responses event sequence (see
// responsesCodec).
func (c *responsesCodec) stream(ans *router.Answer, out gateway.Emitter) gateway.Result {
	out.Start(http.StatusOK, clientapi.AnswerHead(c.requestID, c.req, ans, "text/event-stream"), true)
	s := c.head.Settings(c.req)
	c.sender = clientapi.EventSender{Out: out}
	c.items = responseswire.NewItemWriter(&c.sender, &c.head)
	w := &c.items
	w.ResponseEvent(responseswire.EventCreated, c.object(&s, responseswire.StatusInProgress, nil, nil))
	w.ResponseEvent(responseswire.EventInProgress, c.object(&s, responseswire.StatusInProgress, nil, nil))
	finish, usage, res, gone, end := clientapi.RelayDeltas(ans, w)
	if gone {
		return res
	}
	switch {
	case end == io.EOF, errors.Is(end, router.ErrIncomplete):
		status, details := responsesEnding(end, finish)
		w.CloseItem(status)
		out.Price(usage)
		r := c.object(&s, status, w.Output(), &usage)
		r.IncompleteDetails = details
		if c.turn != nil {
			if resp, err := json.Marshal(r); err == nil {
				turn := w.Turn()
				c.keepTurn(resp, &turn, usage)
			}
		}
		if c.store != nil {
			v := c.store.stored(true) // known now that keepTurn ran
			r.Store = &v
		}
		name := responseswire.EventCompleted
		if status == responseswire.StatusIncomplete {
			name = responseswire.EventIncomplete
		}
		w.ResponseEvent(name, r)
		if end == io.EOF {
			return gateway.Result{Usage: usage, Answered: true}
		}
	default:
		w.CloseItem(responseswire.StatusIncomplete)
		out.Price(usage)
		e := clientapi.CutShort(ans.Provider, end)
		r := c.object(&s, responseswire.StatusFailed, w.Output(), &usage)
		r.Error = &responseswire.Error{Code: string(e.Code), Message: e.Message}
		w.ResponseEvent(responseswire.EventFailed, r)
	}
	return gateway.Result{Usage: usage, Answered: true, Err: end}
}

// JoinBroken ends a joined or replayed stream that cannot go on with
// Responses' "error" event (there is no Response to fail; its
// sequence_number is 0, as the codec does not know the stream's count).
func (c *responsesCodec) JoinBroken(reason string) idempotency.Event {
	return errorEvent(llm.CodeReplayUnavailable, reason)
}

// errorEvent is Responses' "error" event: a stream that cannot go on.
func errorEvent(code llm.Code, message string) idempotency.Event {
	return idempotency.Event{Name: responseswire.EventError, Data: responseswire.ErrorEventData(code, message)}
}

// passResponse answers a non-streaming Responses request passed through
// with the response object of the stream's terminal event (which carries
// the whole response), its usage with the gateway's cost.
func (c *responsesCodec) passResponse(ans *router.Answer, out gateway.Emitter) gateway.Result {
	var last []byte
	usage, res, ok, end := clientapi.ReadWhole(ans, func(ch llm.Chunk) error {
		if responseswire.Terminal(&ch) || ch.Event == responseswire.EventCreated || ch.Event == responseswire.EventInProgress {
			last = ch.Raw
		}
		return nil
	})
	if !ok {
		return res
	}
	var events responseswire.EventReader
	ev, err := events.Read("", last)
	if err != nil || len(ev.Response) == 0 {
		return gateway.Result{Usage: usage, Answered: false, Err: &llm.Error{Code: llm.CodeAllProvidersFailed, Message: "provider " + ans.Provider + " sent no response object"}}
	}
	body := clientapi.WithCost(ev.Response, usage.Cost, "usage")
	return clientapi.WriteWhole(out, clientapi.AnswerHead(c.requestID, c.req, ans, "application/json"), usage, body, end, nil)
}

// passDialect is the Responses stream passed through
// (clientapi.PassDialect): the terminal event carries the final usage, in
// its response's "usage"; a stream that fails ends with an "error" event,
// and one that just stops gets nothing more.
type passDialect struct{}

func (passDialect) UsageEvent(ch *llm.Chunk) bool { return responseswire.Terminal(ch) }

func (passDialect) UsagePath() []string { return responseswire.UsagePath }

func (passDialect) Broken(e *llm.Error, _ error) idempotency.Event {
	return errorEvent(e.Code, e.Message)
}

func (passDialect) Stopped(llm.Usage) []idempotency.Event { return nil }
