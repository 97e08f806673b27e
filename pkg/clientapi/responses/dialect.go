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

// deltaWriter is the itemWriter of a translated answer's stream
// (clientapi.DeltaWriter); a stop sequence is not in a Responses event.
type deltaWriter struct{ *itemWriter }

func (w deltaWriter) Text(s string)                             { w.text(s) }
func (w deltaWriter) Refusal(s string)                          { w.refusal(s) }
func (w deltaWriter) Reasoning(s string)                        { w.reasoning(s) }
func (deltaWriter) StopSequence(string)                         {}
func (w deltaWriter) ToolCall(index int, id, name, args string) { w.toolCall(index, id, name, args) }
