package anthropic

import (
	"context"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// Transport carries a Client's Messages calls to its upstream. Open sends
// call (a Messages body; for a request passed through, with the client's
// headers to forward, messages.ForwardedHeaders) and returns its answer's
// events once the upstream accepted it, or the failure classified: a
// *llm.ProviderError, or the error of ctx once it ended. A Client made by
// New carries its calls over HTTP to the Messages API; NewOver's over t
// (Claude on Bedrock: InvokeModelWithResponseStream).
type Transport interface {
	Open(ctx context.Context, call upstream.Call) (upstream.Events, error)
}

// NewOver returns the upstream called name whose Messages calls t carries.
// It counts no tokens: CountTokens is the Messages API's, over HTTP.
func NewOver(name string, t Transport, opts ...Option) *Client {
	c := &Client{name: name, hc: upstream.HTTPClient(nil), now: time.Now, transport: t}
	for _, o := range opts {
		o(c)
	}
	return c
}

// httpTransport carries c's calls over HTTP: a POST to its endpoint with
// the anthropic-version header (Version, unless the client's is
// forwarded) and its key.
type httpTransport struct{ c *Client }

// Open implements Transport: the answer's SSE events, or a JSON body as
// one Whole event. A failed connection and a status other than 200 are
// classified here (upstream.Body.Open).
func (t httpTransport) Open(ctx context.Context, call upstream.Call) (upstream.Events, error) {
	req, err := upstream.NewRequest(ctx, t.c.endpoint, call.Body)
	if err != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "invalid upstream URL", Err: err}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	h.Set(messages.HeaderVersion, Version)
	for _, name := range messages.ForwardedHeaders {
		if v := call.Header[name]; len(v) > 0 {
			h[name] = v
		}
	}
	t.c.setKey(h)
	e := new(httpEvents)
	if err := e.body.Open(t.c.hc, req, "anthropic", llm.ProtoMessages, ErrClosed, t.c.now); err != nil {
		return nil, err
	}
	return e, nil
}

// httpEvents is a 200 answer's body: SSE events, or, when body.Events is
// nil, a Message JSON body (an upstream that ignored "stream": true), read
// whole as one event.
type httpEvents struct {
	body     upstream.Body
	jsonRead bool
}

// Next implements upstream.Events.
func (e *httpEvents) Next() (upstream.Event, error) {
	if e.body.Events == nil {
		if e.jsonRead {
			return upstream.Event{}, llm.ErrStreamCut
		}
		e.jsonRead = true
		b, err := e.body.ReadAll()
		return upstream.Event{Data: b, Whole: true}, err
	}
	ev, err := e.body.Events.Next()
	if err != nil {
		return upstream.Event{}, e.body.ReadError(err)
	}
	return upstream.Event{Name: ev.Event, Data: ev.Data}, nil
}

// Release implements upstream.Events: the SSE reader's buffer goes back.
func (e *httpEvents) Release() {
	if e.body.Events != nil {
		e.body.Events.Release()
	}
}

// Close implements upstream.Events.
func (e *httpEvents) Close() error { return e.body.Close() }
