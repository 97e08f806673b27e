// Package anthropic is the provider adapter for upstreams that speak the
// Anthropic Messages API (api: anthropic): the transport, key and headers
// of its calls. The gateway's upstream request, a Chat Completions body, is
// translated into a streaming Messages request, and the Messages event
// stream back into chat.completion.chunk values, by pkg/wire/messages
// (FromHub, Decoder), or, for a Messages request passed through, observed
// (Observer), so that the router and the HTTP layer see an Anthropic
// upstream as any other. Each call makes one attempt, with no retries of its own, and
// classifies every failure once as an *llm.ProviderError, with the same
// classes as the openai adapter; a failure caused by the caller's own context
// is returned as the context's error instead. It logs nothing.
package anthropic

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

var _ llm.Provider = (*Client)(nil)

// Version is the anthropic-version header sent with every request.
const Version = "2023-06-01"

// ErrClosed is returned by a stream's Next once Close was called.
var ErrClosed = fmt.Errorf("anthropic: stream closed: %w", net.ErrClosed)

// Client is one Anthropic Messages upstream. It is safe for concurrent use.
type Client struct {
	name     string
	endpoint string
	apiKey   string
	// cred, when set, gives the key at each call (WithKey).
	cred   *upstream.Credential
	hc     *http.Client
	urlErr error
	now    func() time.Time
	// transport carries the Messages calls: httpTransport, or NewOver's.
	transport Transport
}

// Option configures a Client.
type Option func(*Client)

// WithClock sets the clock whose time becomes the chunks' "created" (the
// Messages API sends none). The default is time.Now.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithKey reads the key with get at each call, in place of New's apiKey:
// a key rotated while the gateway runs is used from the next call on.
func WithKey(get func() string) Option {
	return func(c *Client) { c.cred = upstream.NewCredential("", get) }
}

// setKey sets the x-api-key header of a call.
func (c *Client) setKey(h http.Header) {
	if c.cred != nil {
		if v := c.cred.Value(); v != nil {
			h["X-Api-Key"] = v
		}
		return
	}
	if c.apiKey != "" {
		h.Set("X-Api-Key", c.apiKey)
	}
}

// New returns the upstream called name at baseURL, the API root such as
// "https://api.anthropic.com" (requests go to baseURL + "/v1/messages"),
// sending apiKey as x-api-key when it is not empty. hc nil means a shared
// client with a connection pool sized for a gateway. Redirects are never
// followed.
func New(name, baseURL, apiKey string, hc *http.Client, opts ...Option) *Client {
	c := &Client{name: name, apiKey: apiKey, hc: upstream.HTTPClient(hc), now: time.Now}
	c.endpoint, c.urlErr = upstream.Endpoint(baseURL, messages.PathMessages)
	c.transport = httpTransport{c}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Name returns the upstream's name.
func (c *Client) Name() string { return c.name }

// Caps: a Messages request passes through; a request that sets no output
// limit is sent with messages.DefaultMaxTokens; the upstream counts tokens
// (CountTokens).
func (c *Client) Caps() llm.Caps {
	return llm.Caps{Native: llm.ProtoMessages, MaxOutputTokens: messages.DefaultMaxTokens, Counter: c}
}

// ChatStream translates req (messages.FromHub), or passes a Messages request
// through, sends it through the Client's Transport and returns the answer
// as a stream of chat.completion.chunk values (passed through: the events
// as received), or the failure classified as the openai adapter
// classifies its own (over a NewOver transport, as that transport
// classifies it):
//
//   - the caller's context done: its error, wrapped (not a ProviderError);
//   - a request Messages cannot express: FailRejected, without a call;
//   - no answer: FailTransient, "connection failed";
//   - 429: FailThrottled, with the retry-after hint capped at 60s;
//   - any other status but 200: as upstream.StatusError classifies it
//     (400 FailRejected with the message of Anthropic's error envelope;
//     401, 403 and a 404 about the route's model FailConfig; a 404 about
//     an object the request named, such as a file, FailRejected; 529
//     overloaded_error and 5xx FailTransient).
func (c *Client) ChatStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	if ctx.Err() != nil {
		return nil, ctxError(ctx)
	}
	if c.urlErr != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "invalid upstream URL", Err: c.urlErr}
	}
	native := req.Proto == llm.ProtoMessages
	call := upstream.Call{Model: req.Model}
	var (
		outputTool string
		dropped    []string
	)
	if native {
		call.Body, call.Header = req.Pieces(), req.Header
	} else {
		body, tool, d, err := messages.FromHub(req)
		if err != nil {
			return nil, err
		}
		call.Body, outputTool, dropped = [][]byte{body}, tool, d
	}
	src, err := c.transport.Open(ctx, call)
	if err != nil {
		return nil, err
	}
	s := &stream{ctx: ctx, src: src, dropped: dropped}
	if !native {
		s.dec = messages.NewDecoder(c.now().Unix())
		s.dec.SetOutputTool(outputTool)
	}
	return s, nil
}

// ctxError is the error for a call the caller's context ended.
func ctxError(ctx context.Context) error { return upstream.ContextError("anthropic", ctx) }

// stream is an accepted call's answer: a Messages event stream, or a
// Message read whole (an upstream that ignored "stream": true).
type stream struct {
	llm.NoReports // never Ready: its events are not read ahead
	ctx           context.Context
	src           upstream.Events
	// dec translates the events into chunks, or, for a request passed
	// through (dec nil), obs observes them.
	dec *messages.Decoder
	obs messages.Observer
	// dropped are the fields the request's translation left out.
	dropped []string

	pending []llm.Chunk
	closed  atomic.Bool
	err     error
}

// Next returns the next chunk: io.EOF after message_stop, llm.ErrStreamCut
// when the answer ended before it, ErrClosed after Close, the context's
// error once the caller's context is done, and a FailTransient
// *llm.ProviderError for an error event, a malformed event or a broken
// connection. After an error every call returns the same error.
func (s *stream) Next() (llm.Chunk, error) {
	for {
		if len(s.pending) > 0 {
			c := s.pending[0]
			s.pending[0] = llm.Chunk{}
			s.pending = s.pending[1:]
			return c, nil
		}
		if s.err != nil {
			return llm.Chunk{}, s.err
		}
		if s.done() {
			s.src.Release()
			s.err = io.EOF
			continue
		}
		if err := s.stopped(); err != nil {
			return s.fail(err)
		}
		ev, err := s.src.Next()
		if err != nil {
			if stop := s.stopped(); stop != nil {
				err = stop
			} else if err == io.EOF {
				err = llm.ErrStreamCut
			}
			return s.fail(err)
		}
		if ev.Whole {
			if err := s.readWhole(ev.Data); err != nil {
				return s.fail(err)
			}
			continue
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 {
			continue
		}
		chunks, err := s.decode(ev.Name, ev.Data)
		if err != nil {
			return s.fail(err)
		}
		s.pending = chunks
	}
}

// stopped is the error that ends the answer before its next read: ErrClosed
// after Close, the context's once the call's context is done; nil while
// neither.
func (s *stream) stopped() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.ctx.Err() != nil {
		return ctxError(s.ctx)
	}
	return nil
}

func (s *stream) done() bool {
	if s.dec == nil {
		return s.obs.Done()
	}
	return s.dec.Done()
}

func (s *stream) decode(name string, data []byte) ([]llm.Chunk, error) {
	if s.dec != nil {
		return s.dec.Decode(name, data)
	}
	c, err := s.obs.Observe(name, data)
	if err != nil {
		return nil, err
	}
	return append(s.pending[:0], c), nil
}

// Report is the request's fields its translation left out, and the usage
// the events read so far reported.
func (s *stream) Report() llm.StreamReport {
	r := llm.StreamReport{Dropped: s.dropped}
	if s.dec == nil {
		r.Usage = s.obs.UsageSoFar()
	} else {
		r.Usage = s.dec.UsageSoFar()
	}
	return r
}

// readWhole decodes a whole Message answer, body, into pending chunks.
func (s *stream) readWhole(body []byte) error {
	var events [][]byte
	var err error
	if s.dec == nil {
		events, err = messages.NativeEvents(body)
	} else {
		events, err = messages.MessageEvents(body)
	}
	if err != nil {
		return err
	}
	// decode reuses pending's array: the chunks are gathered apart.
	var all []llm.Chunk
	for _, ev := range events {
		chunks, err := s.decode("", ev)
		if err != nil {
			return err
		}
		all = append(all, chunks...)
	}
	s.pending = all
	return nil
}

func (s *stream) fail(err error) (llm.Chunk, error) {
	s.err = err
	return llm.Chunk{}, err
}

// Close ends the answer, which unblocks a waiting Next. It is idempotent
// and safe to call concurrently with Next.
func (s *stream) Close() error {
	s.closed.Store(true)
	return s.src.Close()
}
