// Package simulated is an in-process provider (api: simulated in the config).
// It answers Chat Completions requests with deterministic text, streamed
// chunk by chunk exactly as an OpenAI upstream would, so that the gateway can
// be run and demonstrated with no account and no network, and so that its
// failure handling (fallback, throttling, timeouts) can be shown on demand.
// With simulated.protocol "anthropic" it speaks the Anthropic Messages API
// instead, behind the real api: anthropic adapter (see newAnthropic).
package simulated

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/buzzgate/buzzgate/internal/wait"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

var _ llm.Provider = (*Provider)(nil)

const (
	// defaultWords is the answer length when the config gives none.
	defaultWords = 12
	// maxWords bounds the answer length so that the chunk counter cannot
	// overflow whatever the config says; no demo needs a longer answer.
	maxWords = 1 << 20
	// created is the "created" time of every chunk. A constant rather than
	// the clock, so that the same request always gets the same bytes
	// (2025-01-01T00:00:00Z).
	created int64 = 1735689600
)

// vocabulary is what answers are made of: plain ASCII words, so that the
// chunks need no JSON escaping of their own.
var vocabulary = [...]string{
	"gateway", "route", "token", "stream", "model", "provider", "latency", "fallback",
	"honey", "hive", "bee", "pollen", "meadow", "flower", "nectar", "swarm",
	"quick", "steady", "bright", "quiet", "simple", "gentle", "clever", "ready",
	"answer", "request", "chunk", "usage", "budget", "signal", "window", "harbor",
}

// ErrClosed is returned by Next once the stream has been closed.
var ErrClosed = errors.New("simulated: stream closed")

// Provider is one simulated upstream. It is safe for concurrent use: it holds
// only its configuration, and each call gets its own stream.
type Provider struct {
	name string
	cfg  catalog.Simulated
	// via, when set, answers every call: the anthropic adapter over an
	// in-process Messages transport (protocol "anthropic").
	via llm.Provider
}

// New returns the simulated provider called name, behaving as cfg says.
// Words of 0 (or less) means the default of 12.
func New(name string, cfg catalog.Simulated) *Provider {
	if cfg.Words <= 0 {
		cfg.Words = defaultWords
	}
	cfg.Words = min(cfg.Words, maxWords)
	p := &Provider{name: name, cfg: cfg}
	if cfg.Protocol == "anthropic" {
		p.via = newAnthropic(name, cfg)
	}
	return p
}

// Name returns the provider's name from the config.
func (p *Provider) Name() string { return p.name }

// ChatStream answers req. As with a real upstream, it returns as soon as the
// request is accepted (the HTTP 200): every wait for the answer itself happens
// in the stream's Next. The configured failure mode, if any, applies to every
// call, before the body is even read, as an upstream that is down or
// throttling fails whatever the request.
func (p *Provider) ChatStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	if p.via != nil {
		if req == nil {
			req = &llm.UpstreamRequest{}
		}
		return p.via.ChatStream(ctx, req)
	}
	if ctx.Err() != nil {
		return nil, p.ctxError(ctx.Err())
	}
	if err := p.fail(ctx); err != nil {
		return nil, err
	}
	var body []byte
	var routeModel string
	if req != nil {
		body, routeModel = req.Bytes(), req.Model
	}
	r, err := parseRequest(body)
	if err != nil {
		return nil, err
	}
	if r.model == "" {
		r.model = routeModel
	}

	a, seed := newAnswer(ctx, p.name, p.cfg, r.lastUser, r.contentBytes)
	return &stream{answer: a, name: p.name, id: fmt.Sprintf("chatcmpl-sim-%016x", seed), model: r.model}, nil
}

// fail returns the configured failure, or nil when the call should succeed.
func (p *Provider) fail(ctx context.Context) error {
	switch p.cfg.Fail {
	case "":
		return nil
	case "error":
		// A failing upstream takes its time before the 500, as a real one
		// does, so that the demo shows the cost of a fallback.
		if err := sleep(ctx, nil, p.cfg.FirstTokenLatency.D()); err != nil {
			return p.ctxError(err)
		}
		return &llm.ProviderError{Class: llm.FailTransient, Status: 500, Message: "simulated upstream error"}
	case "throttle":
		return &llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "simulated rate limit", RetryAfter: time.Second}
	case "reject":
		return &llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "simulated rejection"}
	case "hang":
		// No answer at all: only the caller's deadline or cancellation ends
		// the call, which is what first_token_timeout is for. The error is
		// the context's, not a ProviderError, just as an HTTP client's is.
		<-ctx.Done()
		return p.ctxError(ctx.Err())
	default:
		// The config is validated elsewhere; should an unknown mode slip
		// through, failing loudly beats silently answering.
		return &llm.ProviderError{Class: llm.FailTransient, Message: fmt.Sprintf("simulated provider %s: unknown fail mode %q", p.name, p.cfg.Fail)}
	}
}

func (p *Provider) ctxError(err error) error {
	return fmt.Errorf("simulated provider %s: %w", p.name, err)
}

// request is what the provider reads of a Chat Completions request.
type request struct {
	model string
	// lastUser is the text of the last user message.
	lastUser string
	// contentBytes is the length of all messages' text, for prompt_tokens.
	contentBytes int
}

// parseRequest decodes a Chat Completions request body. Anything it cannot
// read is the request's fault, so it is answered as an upstream's 400 would
// be. The messages never mention the body's content, which the client may
// see and the logs may keep.
func parseRequest(body []byte) (request, error) {
	var wire struct {
		Model    string            `json:"model"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return request{}, rejected("request body is not a valid chat completions request", err)
	}
	if len(wire.Messages) == 0 {
		return request{}, rejected("messages must be a non-empty array", nil)
	}
	r := request{model: wire.Model}
	for i, raw := range wire.Messages {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return request{}, rejected(fmt.Sprintf("messages[%d] must be an object with a string role", i), err)
		}
		text, err := contentText(m.Content)
		if err != nil {
			return request{}, rejected(fmt.Sprintf("messages[%d].content must be a string or an array of content parts", i), err)
		}
		r.contentBytes += len(text)
		if m.Role == "user" {
			r.lastUser = text
		}
	}
	return r, nil
}

// contentText returns a message content's text: the string itself, or the
// text parts of an array concatenated (so that parts and a string with the
// same text get the same answer). Other parts (images, audio) carry no text;
// a missing or null content (an assistant's tool calls) has none.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", err
		}
		var b []byte
		for _, part := range parts {
			var p chat.TextPart
			// A null part would decode to the zero struct without error.
			if bytes.Equal(bytes.TrimSpace(part), []byte("null")) {
				return "", errors.New("null content part")
			}
			if err := json.Unmarshal(part, &p); err != nil {
				return "", err
			}
			if p.Type == chat.PartText {
				b = append(b, p.Text...)
			}
		}
		return string(b), nil
	}
	return "", errors.New("content is neither a string nor an array")
}

func rejected(msg string, err error) error {
	return &llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: msg, Err: err}
}

// sleep waits d, unless ctx is done or done is closed first. It uses a timer
// and a select rather than time.Sleep so that a cancelled request or a closed
// stream stops waiting at once.
func sleep(ctx context.Context, done <-chan struct{}, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return wait.Sleep(ctx, done, ErrClosed, d)
}
