// Package chat is OpenAI's Chat Completions API as a client API: its
// descriptor (API) and its codec. Its requests are the gateway's own shape.
package chat

import (
	"net/http"
	"slices"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// API is OpenAI's Chat Completions API (POST /api/v1/chat/completions),
// the gateway's own shape: its requests need no translation.
var API clientapi.API = api{}

type api struct{}

var spec = clientapi.Spec{
	Owned: slices.Concat([]string{"model", "stream", "stream_options"}, llm.GatewayFields),
}

func (api) Spec() *clientapi.Spec { return &spec }

func (api) WriteError(w http.ResponseWriter, err error) int { return clientapi.WriteError(w, err) }

func (api) ProviderObject(body []byte) (clientapi.ObjectRef, bool) { return providerObject(body) }

// Translate keeps the body: it is a Chat Completions one.
func (api) Translate(_ clientapi.Caller, _ string, body []byte) (llm.Hub, clientapi.Translation, error) {
	return llm.HubOf(body), nil, nil
}

func (api) Codec(_ clientapi.Caller, id string, _ []byte, req *llm.ChatRequest, keyed bool) gateway.Codec {
	return &chatCodec{requestID: id, req: req, keyed: keyed}
}
