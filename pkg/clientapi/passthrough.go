package clientapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// A request passed through (its client API and its route speak the same
// protocol) comes back as the provider sent it: every event, with its name
// and data as received, except that the event carrying the answer's final
// usage gets the gateway's cost in its usage object
// (docs/architecture.md#protocols).

// WithCost returns the event data (a JSON object) with "cost" set in the
// usage object found at path (keys from the top), which is created when
// missing. Data that is not an object is returned as it is.
func WithCost(data []byte, cost float64, path ...string) []byte {
	ms, err := llm.Members(data)
	if err != nil {
		return data
	}
	var inner []byte
	for _, m := range ms {
		if m.Key == path[0] {
			inner = m.Value
		}
	}
	var v []byte
	if len(path) == 1 {
		c, _ := json.Marshal(llm.USD(cost))
		if len(inner) == 0 || string(inner) == "null" {
			inner = []byte("{}")
		}
		if v, err = llm.SetTopLevel(inner, map[string][]byte{"cost": c}); err != nil {
			return data
		}
	} else {
		if len(inner) == 0 || string(inner) == "null" {
			return data
		}
		v = WithCost(inner, cost, path[1:]...)
	}
	return llm.Splice(ms, len(data)+32, map[string][]byte{path[0]: v})
}

// PassDialect is what a protocol says of its own stream passed through:
// which event carries the answer's final usage, where in it, and the
// events that end a stream the gateway ends. Each protocol implements it
// once.
type PassDialect interface {
	// UsageEvent reports whether ch carries the answer's final usage: it
	// is priced first and gets the cost in the usage object at UsagePath.
	UsageEvent(ch *llm.Chunk) bool
	// UsagePath is the keys, from the top, of that event's usage object.
	UsagePath() []string
	// Broken is the event ending a stream that failed after output
	// started (e is the client's error, end the failure).
	Broken(e *llm.Error, end error) idempotency.Event
	// Stopped are the events ending a stream that just stopped before its
	// usage came (none: nothing more is written).
	Stopped(u llm.Usage) []idempotency.Event
}

// PassStream relays a passed-through stream, ans, to out, in the
// protocol of d: the answer's head for the request requestID, req, then
// the provider's events.
func PassStream(requestID string, req *llm.ChatRequest, ans *router.Answer, out gateway.Emitter, d PassDialect) gateway.Result {
	out.Start(http.StatusOK, AnswerHead(requestID, req, ans, "text/event-stream"), true)
	var (
		usage  llm.Usage
		priced bool
		end    error
	)
	for {
		ch, err := ans.Next()
		if err != nil {
			end = err
			break
		}
		ev := idempotency.Event{Name: ch.Event, Data: ch.Raw}
		if !priced && d.UsageEvent(&ch) {
			usage, priced = ans.Usage(), true
			out.Price(usage)
			ev.Data = WithCost(ch.Raw, usage.Cost, d.UsagePath()...)
		}
		if err := out.Event(ev, true); err != nil {
			if !priced {
				usage = ans.Usage()
			}
			return gateway.Result{Usage: usage, Answered: true, Err: err}
		}
	}
	if !priced {
		usage = ans.Usage()
	}
	switch {
	case end == io.EOF:
		if !priced {
			out.Price(usage)
		}
		return gateway.Result{Usage: usage, Answered: true}
	case errors.Is(end, context.Canceled):
		return gateway.Result{Usage: usage, Answered: true, Err: end}
	case errors.Is(end, router.ErrIncomplete):
		if !priced {
			out.Price(usage)
			for _, ev := range d.Stopped(usage) {
				if out.Event(ev, true) != nil {
					break
				}
			}
		}
	default:
		if !priced {
			out.Price(usage)
		}
		out.Event(d.Broken(CutShort(ans.Provider, end), end), true)
	}
	return gateway.Result{Usage: usage, Answered: true, Err: end}
}
