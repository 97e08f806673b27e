package clientapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"

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

// PassStream relays a passed-through stream. usageEvent tells the event
// that carries the final usage (it is priced first and gets the cost at
// usagePath), broken writes the ending of a stream that failed after
// output started, and stopped the ending of one that just stopped (nil:
// nothing more is written).
type PassStream struct {
	Ans        *router.Answer
	Out        gateway.Emitter
	UsageEvent func(ch *llm.Chunk) bool
	UsagePath  []string
	Broken     func(e *llm.Error, end error) idempotency.Event
	Stopped    func(u llm.Usage) []idempotency.Event
}

func (p *PassStream) Run() gateway.Result {
	var (
		usage  llm.Usage
		priced bool
		end    error
	)
	for {
		ch, err := p.Ans.Next()
		if err != nil {
			end = err
			break
		}
		ev := idempotency.Event{Name: ch.Event, Data: ch.Raw}
		if !priced && p.UsageEvent(&ch) {
			usage, priced = p.Ans.Usage(), true
			p.Out.Price(usage)
			ev.Data = WithCost(ch.Raw, usage.Cost, p.UsagePath...)
		}
		if err := p.Out.Event(ev, true); err != nil {
			if !priced {
				usage = p.Ans.Usage()
			}
			return gateway.Result{Usage: usage, Answered: true, Err: err}
		}
	}
	if !priced {
		usage = p.Ans.Usage()
	}
	switch {
	case end == io.EOF:
		if !priced {
			p.Out.Price(usage)
		}
		return gateway.Result{Usage: usage, Answered: true}
	case errors.Is(end, context.Canceled):
		return gateway.Result{Usage: usage, Answered: true, Err: end}
	case errors.Is(end, router.ErrIncomplete):
		if !priced {
			p.Out.Price(usage)
			var evs []idempotency.Event
			if p.Stopped != nil {
				evs = p.Stopped(usage)
			}
			for _, ev := range evs {
				if p.Out.Event(ev, true) != nil {
					break
				}
			}
		}
	default:
		if !priced {
			p.Out.Price(usage)
		}
		p.Out.Event(p.Broken(CutShort(p.Ans.Provider, end), end), true)
	}
	return gateway.Result{Usage: usage, Answered: true, Err: end}
}
