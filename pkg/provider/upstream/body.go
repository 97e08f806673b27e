package upstream

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/sse"
)

// What an adapter reads of an upstream's answer.
const (
	// MaxErrorBody is how much of a non-200 answer is read.
	MaxErrorBody = 64 << 10
	// MaxEventBytes bounds one SSE event of a streamed answer (a Responses
	// terminal event carries the whole Response).
	MaxEventBytes = 16 << 20
	// MaxJSONBody bounds a whole non-streamed answer.
	MaxJSONBody = 32 << 20
)

// Body is the body of an upstream's 200 answer as an adapter's stream reads
// it: SSE events, or, when Events is nil, a JSON body (an upstream that
// ignored "stream": true) read whole. Close may be called at any time, from
// any goroutine, and unblocks a read waiting on the body.
type Body struct {
	// Events reads the body's events; nil for a JSON body.
	Events *sse.Reader

	name      string
	ctx       context.Context
	rc        io.ReadCloser
	closedErr error

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Open sends req, a call of the adapter name whose context is the
// request's, and makes b the body of its 200 answer (Init). A failed
// connection, or the end of the call's context, is classified here; a
// non-200 answer is read (up to MaxErrorBody) and classified by StatusError
// for api, at the time now gives once the answer is read.
func (b *Body) Open(hc *http.Client, req *http.Request, name string, api llm.Proto, closedErr error, now func() time.Time) error {
	ctx := req.Context()
	resp, err := Send(hc, req)
	if err != nil {
		if ctx.Err() != nil {
			return ContextError(name, ctx)
		}
		return &llm.ProviderError{Class: llm.FailTransient, Message: "connection failed", Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
		resp.Body.Close()
		return StatusError(api, resp.StatusCode, resp.Header, b, now())
	}
	b.Init(name, ctx, resp, closedErr)
	return nil
}

// Init makes b the body of resp, the 200 answer to a call of the adapter
// name whose context is ctx, read as SSE events unless its Content-Type is
// JSON. closedErr is what a read returns after Close. (A Body is a field of
// the stream that reads it, so that the stream is one allocation.)
func (b *Body) Init(name string, ctx context.Context, resp *http.Response, closedErr error) {
	b.name, b.ctx, b.rc, b.closedErr = name, ctx, resp.Body, closedErr
	if !IsJSON(resp.Header.Get("Content-Type")) {
		b.Events = sse.NewReader(resp.Body, MaxEventBytes)
	}
}

// Stopped is the error that ends the stream before its next read: the
// closed error after Close, the context's error once the call's context is
// done; nil while neither.
func (b *Body) Stopped() error {
	if b.closed.Load() {
		return b.closedErr
	}
	if b.ctx.Err() != nil {
		return ContextError(b.name, b.ctx)
	}
	return nil
}

// Closed reports whether Close was called.
func (b *Body) Closed() bool { return b.closed.Load() }

// ReadError classifies err, met reading the body (see ReadError).
func (b *Body) ReadError(err error) error {
	return ReadError(b.name, b.ctx, b.closed.Load(), b.closedErr, err)
}

// ReadAll reads a JSON body whole: at most MaxJSONBody, a larger one being
// a FailTransient error.
func (b *Body) ReadAll() ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(b.rc, MaxJSONBody+1))
	if err != nil {
		return nil, b.ReadError(err)
	}
	if len(body) > MaxJSONBody {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "upstream answer too large"}
	}
	return body, nil
}

// Close closes the body, which unblocks a read waiting on it. It is
// idempotent and safe to call concurrently with a read.
func (b *Body) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.closeErr = b.rc.Close()
	})
	return b.closeErr
}
