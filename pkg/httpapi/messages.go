package httpapi

import (
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// messagesAPI is Anthropic's Messages API (POST /api/v1/messages), as the
// Anthropic SDKs call it with the base URL <host>/api: the key in x-api-key
// (or Authorization: Bearer), Anthropic's request, answer, event and error
// shapes, over the same pipeline as Chat Completions. Its Idempotency-Key
// records are its own: the same key on two endpoints is two records.
var messagesAPI = clientAPI{
	decode: decodeMessages,
	codec: func(id string, req *llm.ChatRequest, keyed bool) gateway.Codec {
		return &messagesCodec{requestID: id, req: req, model: req.Model + req.Suffix, keyed: keyed}
	},
	errorf:  writeAnthropicError,
	scope:   "/api/v1/messages\x00",
	proto:   llm.ProtoMessages,
	forward: []string{"Anthropic-Version", "Anthropic-Beta"},
	hints:   mdIgnoredFields,
	owned:   []string{"model", "stream", "gateway", "provider"},
}
