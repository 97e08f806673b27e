package openairesponses

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

var _ llm.Provider = (*Client)(nil)

// ErrClosed is returned by a stream's Next once Close was called: the end the
// caller asked for, not a provider failure.
var ErrClosed = fmt.Errorf("openai-responses: stream closed: %w", net.ErrClosed)

// Client is one OpenAI Responses upstream. It is safe for concurrent use.
type Client struct {
	name     string
	endpoint string
	// authValue is the Authorization header's value, made once; nil for
	// no key.
	authValue []string
	// cred, when set, gives the key at each call (WithKey).
	cred   *upstream.Credential
	hc     *http.Client
	urlErr error // a baseURL that cannot be used fails every call
	now    func() time.Time
}

// New returns the upstream called name at baseURL (such as
// "https://api.openai.com/v1"; requests go to baseURL + "/responses"),
// authenticated with apiKey as a Bearer token when it is not empty. hc nil
// means the shared client with a connection pool sized for a gateway.
// Redirects are never followed, whichever client is used.
func New(name, baseURL, apiKey string, hc *http.Client, opts ...Option) *Client {
	c := &Client{name: name, hc: upstream.HTTPClient(hc), now: time.Now}
	c.endpoint, c.urlErr = upstream.Endpoint(baseURL, "/responses")
	if apiKey != "" {
		c.authValue = []string{"Bearer " + apiKey}
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
	return func(c *Client) { c.cred = upstream.NewCredential("Bearer ", get) }
}

// Name returns the upstream's name.
func (c *Client) Name() string { return c.name }

// Caps: the upstream speaks Responses, so a Responses client's body is
// passed through to it; it sets no output limit of its own and cannot
// count tokens.
func (c *Client) Caps() llm.Caps { return llm.Caps{Native: llm.ProtoResponses} }

// Header values shared by every upstream request; never written to.
var (
	jsonType  = []string{"application/json"}
	sseAccept = []string{"text/event-stream"}
)

// ownHeaders are the request headers the adapter sets or that describe the
// connection: a forwarded header of these names is left out.
var ownHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "X-Api-Key": true, "Api-Key": true,
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true, "Accept": true, "Accept-Encoding": true,
	"Host": true, "Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Te": true, "Trailer": true,
	"Upgrade": true, "Expect": true, "Idempotency-Key": true, "X-Idempotency-Key": true,
}

// ChatStream sends req and returns the answer as a stream, or the failure
// classified:
//
//   - the caller's context done: its error, wrapped (not a ProviderError);
//   - a Chat Completions request Responses cannot express: FailRejected,
//     without a call (responses.EncodeRequest);
//   - no answer (connection refused or reset, EOF before headers):
//     FailTransient, "connection failed";
//   - 429: FailThrottled, with the retry-after-ms or retry-after hint,
//     capped at 60s;
//   - any other status but 200: as upstream.StatusError classifies it
//     (400 FailRejected with the upstream's own error message; 401, 403
//     and a 404 about the route's model FailConfig; a 404 about an object
//     the request named, such as a conversation or an item_reference,
//     FailRejected; the rest FailTransient).
//
// A body in llm.ProtoResponses is sent as it is, with req.Header's fields
// (but those the adapter sets itself and the connection's), and its events
// come back as they are; a body in llm.ProtoChat is translated, and its
// events come back as chat.completion.chunk values.
func (c *Client) ChatStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	if ctx.Err() != nil {
		return nil, ctxError(ctx)
	}
	if c.urlErr != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "invalid upstream URL", Err: c.urlErr}
	}
	var (
		pieces [][]byte
		conv   converter
	)
	switch req.Proto {
	case llm.ProtoResponses:
		pieces = req.Pieces()
		conv = &passThrough{}
	case llm.ProtoChat:
		body, err := responses.EncodeRequest(req)
		if err != nil {
			return nil, err
		}
		pieces = [][]byte{body}
		conv = &translation{dec: responses.NewDecoder(c.now().Unix()), dropped: responses.Dropped(req)}
	default:
		// A router that sends this adapter another protocol's body has a
		// bug; the next provider may still serve the request.
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "the adapter cannot send a " + req.Proto.String() + " request"}
	}
	httpReq, err := upstream.NewRequest(ctx, c.endpoint, pieces)
	if err != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "invalid upstream URL", Err: err}
	}
	h := make(http.Header, 3+len(req.Header))
	if req.Proto == llm.ProtoResponses {
		for k, v := range req.Header {
			if k = http.CanonicalHeaderKey(k); !ownHeaders[k] && len(v) > 0 {
				h[k] = v
			}
		}
	}
	h["Content-Type"], h["Accept"] = jsonType, sseAccept
	auth := c.authValue
	if c.cred != nil {
		auth = c.cred.Value()
	}
	if auth != nil {
		h["Authorization"] = auth
	}
	httpReq.Header = h
	s := &stream{conv: conv}
	if err := s.body.Open(c.hc, httpReq, "openai-responses", llm.ProtoResponses, ErrClosed, c.now); err != nil {
		return nil, err
	}
	return s, nil
}

// ctxError is the error for a call the caller's context ended.
func ctxError(ctx context.Context) error { return upstream.ContextError("openai-responses", ctx) }
