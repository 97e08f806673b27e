package responses

import (
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// passDialect is the Responses stream passed through
// (clientapi.PassDialect): the terminal event carries the final usage, in
// its response's "usage"; a stream that fails ends with an "error" event,
// and one that just stops gets nothing more.
type passDialect struct{}

var usagePath = []string{"response", "usage"}

func (passDialect) UsageEvent(ch *llm.Chunk) bool { return responsesTerminal(ch) }

func (passDialect) UsagePath() []string { return usagePath }

func (passDialect) Broken(e *llm.Error, _ error) idempotency.Event {
	return errorEvent(e.Code, e.Message)
}

func (passDialect) Stopped(llm.Usage) []idempotency.Event { return nil }
