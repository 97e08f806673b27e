package simulated

import (
	"encoding/json"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// Caps: the provider takes Chat Completions (with protocol "anthropic"
// too: the anthropic adapter translates them) and sets no output limit of
// its own. With protocol "anthropic" it counts tokens as an Anthropic
// upstream would: through the real adapter, against the in-process
// transport, which answers POST /v1/messages/count_tokens with the
// gateway's own estimate (messages.EstimateInputTokens), after the
// configured failure mode as every call. A provider that speaks Chat
// Completions cannot count.
func (p *Provider) Caps() llm.Caps {
	if p.via == nil {
		return llm.Caps{}
	}
	return llm.Caps{Counter: p.via.Caps().Counter}
}

// countTokensResponse is the in-process transport's answer to a
// count_tokens call.
func countTokensResponse(req *http.Request, body []byte) *http.Response {
	n := int64(messages.EstimateInputTokens(body))
	b, _ := json.Marshal(messages.TokenCount{InputTokens: &n})
	return jsonResponse(req, http.StatusOK, b)
}
