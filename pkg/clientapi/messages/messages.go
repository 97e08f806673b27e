// Package messages is Anthropic's Messages API as a client API: its
// descriptor (API), the decoder that translates a request to Chat
// Completions, the codec that reshapes a translated answer, and the
// handling of an answer passed through.
package messages

import (
	"context"
	"slices"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
	messageswire "github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// API is Anthropic's Messages API (POST /api/v1/messages), as the
// Anthropic SDKs call it with the base URL <host>/api: the key in x-api-key
// (or Authorization: Bearer), Anthropic's request, answer, event and error
// shapes, over the same pipeline as Chat Completions. Its Idempotency-Key
// records are its own: the same key on two endpoints is two records.
var API = clientapi.API{
	Prepare: prepareMessages,
	PassCodec: func(_ clientapi.Caller, id string, _ []byte, req *llm.ChatRequest, keyed bool) gateway.Codec {
		return newMessagesCodec(id, req, keyed)
	},
	Errorf:  clientapi.WriteAnthropicError,
	Scope:   "/api/v1/messages\x00",
	Proto:   llm.ProtoMessages,
	Forward: messageswire.ForwardedHeaders,
	Hints:   mdIgnoredFields,
	Owned:   slices.Concat([]string{"model", "stream"}, llm.GatewayFields),

	ProviderObject: providerObject,
}

func newMessagesCodec(id string, req *llm.ChatRequest, keyed bool) gateway.Codec {
	return &messagesCodec{requestID: id, req: req, model: req.Model + req.Suffix, keyed: keyed}
}

// prepareMessages translates a Messages request (decodeMessagesHints);
// its codec adds the nested hints the translation dropped to those the
// answer names in x-gateway-dropped when a route of another protocol
// serves it.
func prepareMessages(_ clientapi.Caller, _ string, body []byte) ([]byte, clientapi.CodecFunc, func(context.Context) ([]byte, error), error) {
	chat, dropped, err := decodeMessagesHints(body)
	if err != nil {
		return nil, nil, nil, err
	}
	mk := func(id string, req *llm.ChatRequest, keyed bool) gateway.Codec {
		req.Dropped = append(req.Dropped, dropped...)
		return newMessagesCodec(id, req, keyed)
	}
	return chat, mk, nil, nil
}
