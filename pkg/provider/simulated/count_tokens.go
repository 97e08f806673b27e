package simulated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

var _ llm.TokenCounter = (*Provider)(nil)

// CountTokens counts req's input tokens as an Anthropic upstream would,
// when the provider speaks the Anthropic protocol: through the real
// adapter, against the in-process transport, which answers POST
// /v1/messages/count_tokens with the gateway's own estimate
// (llm.EstimateMessagesTokens), after the configured failure mode as every
// call. A provider that speaks Chat Completions cannot count: its error Is
// errors.ErrUnsupported.
func (p *Provider) CountTokens(ctx context.Context, req *llm.TokenCountRequest) (*llm.TokenCount, error) {
	if tc, ok := p.via.(llm.TokenCounter); ok {
		return tc.CountTokens(ctx, req)
	}
	return nil, fmt.Errorf("simulated provider %s speaks Chat Completions, which has no token counting: %w", p.name, errors.ErrUnsupported)
}

// countTokensResponse is the in-process transport's answer to a
// count_tokens call.
func countTokensResponse(req *http.Request, body []byte) *http.Response {
	n := int64(llm.EstimateMessagesTokens(body))
	b, _ := json.Marshal(messages.TokenCount{InputTokens: &n})
	return jsonResponse(req, http.StatusOK, b)
}
