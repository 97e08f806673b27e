// Package openai is the provider adapter for upstreams that speak the OpenAI
// Chat Completions API. Each call makes one attempt, with no retries of its
// own (retrying is the router's job alone), and classifies every failure once
// as an *llm.ProviderError; a failure caused by the caller's own context is
// returned as the context's error instead, so the router can tell the two
// apart. It logs nothing.
package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	upstreamhttp "github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

var _ llm.Provider = (*Client)(nil)

// ErrClosed is returned by a stream's Next once Close was called: the end the
// caller asked for, not a provider failure.
var ErrClosed = fmt.Errorf("openai: stream closed: %w", net.ErrClosed)

// Client is one OpenAI-compatible upstream. It is safe for concurrent use.
type Client struct {
	name     string
	endpoint string
	auth     string // the Authorization header, or "" for none
	// cred, when set, gives the key at each call (WithKey).
	cred *upstreamhttp.Credential
	// authValue is auth as a header value, made once.
	authValue []string
	hc        *http.Client
	urlErr    error // a baseURL that cannot be used fails every call
	// legacyMaxTokens: the upstream takes max_tokens, not
	// max_completion_tokens (SetMaxTokensField).
	legacyMaxTokens bool
}

// SetMaxTokensField names the field the upstream reads the answer's token
// limit from: "max_completion_tokens" (OpenAI's, the default) or
// "max_tokens", for an OpenAI-compatible server that knows only the older
// name; with "max_tokens", a request's max_completion_tokens is sent as
// max_tokens (unless it sets max_tokens itself). Call it before the first
// call.
func (c *Client) SetMaxTokensField(name string) { c.legacyMaxTokens = name == "max_tokens" }

// upstreamBody is the body to send, as pieces: req's, with
// max_completion_tokens renamed for an upstream that takes max_tokens.
func (c *Client) upstreamBody(req *llm.UpstreamRequest) [][]byte {
	if !c.legacyMaxTokens {
		return req.Pieces()
	}
	body := req.Bytes()
	if !bytes.Contains(body, []byte(`"max_completion_tokens"`)) {
		return req.Pieces()
	}
	ms, err := llm.Members(body)
	if err != nil {
		return req.Pieces()
	}
	var limit []byte
	for _, m := range ms {
		switch m.Key {
		case "max_tokens":
			return req.Pieces()
		case "max_completion_tokens":
			limit = m.Value
		}
	}
	if limit == nil {
		return req.Pieces()
	}
	return llm.SpliceParts(ms, map[string][]byte{"max_completion_tokens": nil, "max_tokens": limit})
}

// New returns the upstream called name at baseURL (such as
// "https://api.openai.com/v1", no trailing slash), authenticated with apiKey
// when it is not empty. hc nil means a shared client with a connection pool
// sized for a gateway. Redirects are never followed, whichever client is used.
func New(name, baseURL, apiKey string, hc *http.Client, opts ...Option) *Client {
	c := &Client{name: name, hc: upstreamhttp.HTTPClient(hc)}
	c.endpoint, c.urlErr = upstreamhttp.Endpoint(baseURL, "/chat/completions")
	if apiKey != "" {
		c.auth = "Bearer " + apiKey
		c.authValue = []string{c.auth}
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Option configures a Client.
type Option func(*Client)

// WithKey reads the key with get at each call, in place of New's apiKey:
// a key rotated while the gateway runs is used from the next call on.
func WithKey(get func() string) Option {
	return func(c *Client) { c.cred = upstreamhttp.NewCredential("Bearer ", get) }
}

// Caps is a Chat Completions upstream's: it takes Chat Completions alone,
// sets no output limit of its own and cannot count tokens.
func (c *Client) Caps() llm.Caps { return llm.Caps{} }

// Name returns the upstream's name.
func (c *Client) Name() string { return c.name }

// ChatStream sends req's body as it is and returns the answer as a stream, or
// the failure classified:
//
//   - the caller's context done: its error, wrapped (not a ProviderError);
//   - no answer (connection refused or reset, EOF before headers):
//     FailTransient, "connection failed";
//   - 429: FailThrottled, with the retry-after-ms or retry-after hint,
//     capped at 60s;
//   - any other status but 200: as upstream.StatusError classifies it
//     (400 FailRejected with the upstream's own error message; 401, 403
//     and a 404 about the route's model FailConfig; a 404 about an object
//     the request named FailRejected; the rest FailTransient).
//
// A 200 JSON answer (an upstream that ignored "stream": true) is turned into
// the chunks it would have streamed.
func (c *Client) ChatStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxError(ctx)
	}
	if c.urlErr != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "invalid upstream URL", Err: c.urlErr}
	}
	httpReq, err := upstreamhttp.NewRequest(ctx, c.endpoint, c.upstreamBody(req))
	if err != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "invalid upstream URL", Err: err}
	}
	// net/http may resend the body (GetBody) only when the request was never
	// written to a reused connection that turned out dead, so the upstream
	// still sees at most one request.
	// The same header values for every request: one map, no per-request
	// value slices (the transport only reads them).
	auth := c.authValue
	if c.cred != nil {
		auth = c.cred.Value()
	}
	if auth != nil {
		httpReq.Header = http.Header{"Content-Type": jsonType, "Accept": sseAccept, "Authorization": auth}
	} else {
		httpReq.Header = http.Header{"Content-Type": jsonType, "Accept": sseAccept}
	}
	s := new(stream)
	if err := s.body.Open(c.hc, httpReq, "openai", llm.ProtoChat, ErrClosed, time.Now); err != nil {
		return nil, err
	}
	return s, nil
}

// Header values shared by every upstream request; never written to.
var (
	jsonType  = []string{"application/json"}
	sseAccept = []string{"text/event-stream"}
)

// ctxError is the error for a call the caller's context ended.
func ctxError(ctx context.Context) error { return upstreamhttp.ContextError("openai", ctx) }

// chunkFailure classifies an error of llm.ParseChunk.
func chunkFailure(err error) error {
	var ce *llm.ChunkError
	if errors.As(err, &ce) {
		return &llm.ProviderError{Class: llm.FailTransient, Message: ce.Message, Err: ce}
	}
	return &llm.ProviderError{Class: llm.FailTransient, Message: "malformed chunk", Err: err}
}
