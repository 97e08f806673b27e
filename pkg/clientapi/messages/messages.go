// Package messages is Anthropic's Messages API as a client API: its
// descriptor (API), whose translation of a request is pkg/wire/messages'
// ToHub, and the codec that reads an answer, translated or passed
// through, and writes it with pkg/wire/messages.
package messages

import (
	"net/http"
	"slices"
	"strconv"
	"time"

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
var API clientapi.API = api{}

type api struct{}

var spec = clientapi.Spec{
	Scope:   "/api/v1/messages\x00",
	Proto:   llm.ProtoMessages,
	Forward: messageswire.ForwardedHeaders,
	Hints:   messageswire.IgnoredFields,
	Owned:   slices.Concat([]string{"model", "stream"}, llm.GatewayFields),

	RateHeaders: rateHeaders{},
}

func (api) Spec() *clientapi.Spec { return &spec }

func (api) WriteError(w http.ResponseWriter, err error) int {
	return clientapi.WriteAnthropicError(w, err)
}

func (api) ProviderObject(body []byte) (clientapi.ObjectRef, bool) { return providerObject(body) }

func (api) Codec(_ clientapi.Caller, id string, _ []byte, req *llm.ChatRequest, keyed bool) gateway.Codec {
	return newMessagesCodec(id, req, keyed)
}

func newMessagesCodec(id string, req *llm.ChatRequest, keyed bool) gateway.Codec {
	return &messagesCodec{requestID: id, req: req, model: req.Model + req.Suffix, keyed: keyed}
}

// Translate translates a Messages request (messageswire.ToHub).
func (api) Translate(_ clientapi.Caller, _ string, body []byte) (llm.Hub, clientapi.Translation, error) {
	chat, dropped, err := messageswire.ToHub(body)
	if err != nil {
		return llm.Hub{}, nil, err
	}
	return chat, translation{dropped: dropped}, nil
}

// translation is what a Messages request's translation keeps: the nested
// hints it dropped, which its codec adds to those the answer names in
// x-gateway-dropped when a route of another protocol serves it.
type translation struct{ dropped []string }

func (t translation) Codec(id string, req *llm.ChatRequest, keyed bool) gateway.Codec {
	req.Dropped = append(req.Dropped, t.dropped...)
	return newMessagesCodec(id, req, keyed)
}

func (translation) Resolver() gateway.Resolver { return nil }

// rateHeaders are Anthropic's anthropic-ratelimit-* headers, which the
// Anthropic SDKs read: limit, remaining, and reset as an RFC 3339 time.
type rateHeaders struct{}

func (rateHeaders) AddRateHeaders(h map[string]string, limits []gateway.RateLimit) {
	for _, l := range limits {
		h["anthropic-ratelimit-"+l.Kind+"-limit"] = strconv.FormatInt(l.Limit, 10)
		h["anthropic-ratelimit-"+l.Kind+"-remaining"] = strconv.FormatInt(l.Remaining, 10)
		h["anthropic-ratelimit-"+l.Kind+"-reset"] = l.Reset.UTC().Format(time.RFC3339)
	}
}
