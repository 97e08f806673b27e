package upstream

import "net/http"

// Call is one streaming call as an adapter hands it to what carries it to
// its upstream: the route's model, which Body names; the body as pieces,
// sent in order; and the protocol's headers.
type Call struct {
	Model  string
	Body   [][]byte
	Header http.Header
}

// Event is one event of a streamed answer: its name and its data. Whole
// marks the one event of an answer that is no stream (an upstream that
// answered a streaming call with one JSON body): Data is that body.
type Event struct {
	Name  string
	Data  []byte
	Whole bool
}

// Events is an upstream's answer read one event at a time, whatever
// carries it: the SSE events of an HTTP answer, or the events Bedrock's
// event stream unwraps.
type Events interface {
	// Next returns the next event. An error ends the answer: io.EOF or
	// llm.ErrStreamCut when the events ended, else the failure classified
	// (a *llm.ProviderError).
	Next() (Event, error)
	// Release is called from Next's goroutine once the answer's last
	// event was read, with no Next after it: what reading holds can be
	// given back.
	Release()
	// Close ends the answer. It may be called at any time, from any
	// goroutine, more than once, and unblocks a waiting Next.
	Close() error
}
