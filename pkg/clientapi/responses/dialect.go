package responses

import (
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

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
