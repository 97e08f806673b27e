package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

var _ llm.TokenCounter = (*Client)(nil)

// maxCountBody bounds a count_tokens answer, or its error body, read;
// Anthropic's answer is a few bytes.
const maxCountBody = 64 << 10

// CountTokens asks the upstream to count req's input tokens: POST
// {base_url}/v1/messages/count_tokens with req.Body, whose "model" becomes
// req.Model, the client's anthropic-version (else Version) and
// anthropic-beta headers, and the provider's key in x-api-key. A 200 whose
// body is a JSON object with a whole, non-negative input_tokens is the
// answer, its body kept as sent; every other outcome is classified as
// ChatStream classifies its own: the caller's context done is its error,
// no answer is FailTransient, any other status as upstream.StatusError
// classifies it (400, and a 404 about an object the request named,
// FailRejected with the upstream's message), and a 200 that is not such an
// object FailTransient.
func (c *Client) CountTokens(ctx context.Context, req *llm.TokenCountRequest) (*llm.TokenCount, error) {
	if ctx.Err() != nil {
		return nil, upstream.ContextError("anthropic", ctx)
	}
	if c.urlErr != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "invalid upstream URL", Err: c.urlErr}
	}
	body, err := withModel(req.Body, req.Model)
	if err != nil {
		return nil, &llm.ProviderError{Class: llm.FailRejected, Message: "the count_tokens body is not a JSON object", Err: err}
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint+"/count_tokens", bytes.NewReader(body))
	if err != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "invalid upstream URL", Err: err}
	}
	h := httpReq.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	version := req.Version
	if version == "" {
		version = Version
	}
	h.Set(messages.HeaderVersion, version)
	for _, b := range req.Beta {
		h.Add(messages.HeaderBeta, b)
	}
	c.setKey(h)
	resp, err := upstream.Send(c.hc, httpReq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, upstream.ContextError("anthropic", ctx)
		}
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "connection failed", Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxCountBody))
		return nil, upstream.StatusError(llm.ProtoMessages, resp.StatusCode, resp.Header, b, c.now())
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCountBody+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, upstream.ContextError("anthropic", ctx)
	case err != nil:
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "upstream connection broken", Err: err}
	case len(b) > maxCountBody:
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "upstream answer too large"}
	}
	var count messages.TokenCount
	if err := json.Unmarshal(b, &count); err != nil || count.InputTokens == nil || *count.InputTokens < 0 || *count.InputTokens > 1<<40 {
		if err == nil {
			err = errors.New("no input_tokens")
		}
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream answer", Err: err}
	}
	return &llm.TokenCount{InputTokens: int(*count.InputTokens), Body: b}, nil
}

// withModel is the JSON object body with its "model" replaced by model,
// written first; the other top-level fields follow in their order, as
// written.
func withModel(body []byte, model string) ([]byte, error) {
	ms, err := llm.Members(body)
	if err != nil {
		return nil, err
	}
	out := make([]llm.Member, 0, len(ms)+1)
	out = append(out, llm.Member{Key: "model", KeyRaw: []byte(`"model"`), Value: llm.AppendString(nil, model)})
	for _, m := range ms {
		if m.Key != "model" {
			out = append(out, m)
		}
	}
	return llm.Splice(out, len(body)+len(model), nil), nil
}
