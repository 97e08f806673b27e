package responses

import (
	"encoding/json"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

func malformed(err error) *llm.ProviderError {
	return &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream event", Err: err}
}

// readItem is ReadItem, its failure a malformed event.
func readItem(raw json.RawMessage) (ItemView, error) {
	it, err := ReadItem(raw)
	if err != nil {
		return it, malformed(err)
	}
	return it, nil
}

// readResponse is ReadResponse, its failure a malformed event.
func readResponse(raw json.RawMessage, output bool) (ResponseView, error) {
	r, err := ReadResponse(raw, output)
	if err != nil {
		return r, malformed(err)
	}
	return r, nil
}

// failure is the error of an "error" event or of response.failed: a
// FailTransient *llm.ProviderError with the upstream's message (the router
// falls back when it comes before any output).
func failure(ev *EventView) error {
	msg := FailureMessage(ev)
	switch {
	case msg != "":
	case ev.Type == EventFailed:
		msg = "the upstream's response failed"
	default:
		msg = "unspecified upstream error"
	}
	return &llm.ProviderError{Class: llm.FailTransient, Message: msg, Err: &llm.ChunkError{Message: msg}}
}

// identity is what a Response's chunks carry of it: its id, model and
// creation time, as the events so far named them.
type identity struct {
	id, model string
	created   int64
}

// note takes the id, model and creation time r names.
func (n *identity) note(r *ResponseView) {
	if r.ID != "" {
		n.id = r.ID
	}
	if r.Model != "" {
		n.model = r.Model
	}
	if r.CreatedAt != 0 {
		n.created = r.CreatedAt
	}
}
