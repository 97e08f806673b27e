// Package chat is OpenAI's Chat Completions API as a client API: its
// descriptor (API) and its codec. Its requests are the gateway's own shape.
package chat

import (
	"slices"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// API is OpenAI's Chat Completions API (POST /api/v1/chat/completions),
// the gateway's own shape: its requests need no translation.
var API = clientapi.API{
	Codec: func(id string, req *llm.ChatRequest, keyed bool) gateway.Codec {
		return &chatCodec{requestID: id, req: req, keyed: keyed}
	},
	Errorf:         clientapi.WriteError,
	Owned:          slices.Concat([]string{"model", "stream", "stream_options"}, llm.GatewayFields),
	ProviderObject: providerObject,
}
