package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

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

// withCost returns the event data (a JSON object) with "cost" set in the
// usage object found at path (keys from the top), which is created when
// missing. Data that is not an object is returned as it is.
func withCost(data []byte, cost float64, path ...string) []byte {
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
		c, _ := json.Marshal(cost)
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
		v = withCost(inner, cost, path[1:]...)
	}
	return llm.Splice(ms, len(data)+32, map[string][]byte{path[0]: v})
}

// passStream relays a passed-through stream. usageEvent tells the event
// that carries the final usage (it is priced first and gets the cost at
// usagePath), broken writes the ending of a stream that failed after
// output started, and stopped the ending of one that just stopped (nil:
// nothing more is written).
type passStream struct {
	ans        *router.Answer
	out        gateway.Emitter
	usageEvent func(ch *llm.Chunk) bool
	usagePath  []string
	broken     func(e *llm.Error, end error) idempotency.Event
	stopped    func(u llm.Usage) []idempotency.Event
}

func (p *passStream) run() gateway.Result {
	var (
		usage  llm.Usage
		priced bool
		end    error
	)
	for {
		ch, err := p.ans.Next()
		if err != nil {
			end = err
			break
		}
		ev := idempotency.Event{Name: ch.Event, Data: ch.Raw}
		if !priced && p.usageEvent(&ch) {
			usage, priced = p.ans.Usage(), true
			p.out.Price(usage)
			ev.Data = withCost(ch.Raw, usage.Cost, p.usagePath...)
		}
		if err := p.out.Event(ev, true); err != nil {
			if !priced {
				usage = p.ans.Usage()
			}
			return gateway.Result{Usage: usage, Answered: true, Err: err}
		}
	}
	if !priced {
		usage = p.ans.Usage()
	}
	switch {
	case end == io.EOF:
		if !priced {
			p.out.Price(usage)
		}
		return gateway.Result{Usage: usage, Answered: true}
	case errors.Is(end, context.Canceled):
		return gateway.Result{Usage: usage, Answered: true, Err: end}
	case errors.Is(end, router.ErrIncomplete):
		if !priced {
			p.out.Price(usage)
			for _, ev := range p.stopped(usage) {
				if p.out.Event(ev, true) != nil {
					break
				}
			}
		}
	default:
		if !priced {
			p.out.Price(usage)
		}
		p.out.Event(p.broken(cutShort(p.ans.Provider, end), end), true)
	}
	return gateway.Result{Usage: usage, Answered: true, Err: end}
}

// droppedHeader names, in x-gateway-dropped, the request's fields that a
// translation to another protocol left out; nothing when the request
// passed through.
func droppedHeader(head map[string]string, req *llm.ChatRequest, ans *router.Answer) map[string]string {
	if ans.Proto == llm.ProtoChat && len(req.Dropped) > 0 {
		head["X-Gateway-Dropped"] = strings.Join(req.Dropped, ", ")
	}
	return head
}

// anthropicErrorEvent is the error event of a Messages stream that failed
// after output started.
func anthropicErrorEvent(e *llm.Error, end error) idempotency.Event {
	typ := "api_error"
	var pe *llm.ProviderError
	switch {
	case e.Code == llm.CodeRequestTimeout:
		typ = "timeout_error"
	case errors.As(end, &pe) && (pe.Status == 529 || pe.Status == http.StatusServiceUnavailable):
		typ = "overloaded_error"
	}
	b, _ := json.Marshal(anthropicEnvelope(e, typ))
	return idempotency.Event{Name: "error", Data: b}
}
