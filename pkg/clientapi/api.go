// Package clientapi is what the client APIs (pkg/clientapi/chat, messages,
// responses) share, beneath them and beneath pkg/httpapi: the descriptor
// each API exports (API), the steps every codec shares (the answer's
// headers, assembling and writing a whole answer, relaying deltas, passing
// a stream through with the gateway's cost), the error envelopes and the
// one table from error code to status, the recorder and the one writer of
// answers on HTTP (Wire), and the helpers the translating decoders share.
// It imports none of the client-API packages (docs/architecture.md#packages).
package clientapi

import (
	"context"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// API is one client API the gateway speaks: how its requests become
// the gateway's own (a Chat Completions request, llm.ChatRequest), and how
// answers and errors go back in its shapes. Everything between is the same
// pipeline (gateway.Service) for every API.
type API struct {
	// Codec encodes the answer of req.
	Codec CodecFunc
	// Prepare, when set, turns the client's body into a Chat Completions
	// body and replaces Codec (nil for Chat Completions itself): the codec
	// may depend on the request, and for an API whose request needs more
	// than its body (Responses: the kept turn of its
	// previous_response_id), when
	// the body alone is not the whole request, resolve returns the whole
	// Chat Completions body; it runs after the idempotency lookup
	// (gateway.Request.Resolve).
	Prepare func(c Caller, requestID string, body []byte) (chat []byte, codec CodecFunc, resolve func(context.Context) ([]byte, error), err error)
	// Errorf writes an error in the API's envelope.
	Errorf func(w http.ResponseWriter, err error) int
	// Scope keeps this endpoint's idempotency records apart from the
	// others' ("" for Chat Completions).
	Scope string
	// Proto is the API's protocol. A request of a protocol other than Chat
	// Completions also keeps its own body (llm.Native), for the routes that
	// speak it; Forward are its headers sent on with it, and Hints the
	// top-level fields its translation to Chat Completions leaves out.
	Proto   llm.Proto
	Forward []string
	Hints   []string
	// Owned are the fields the gateway owns or sets: a key that differs
	// from one only in case, or repeats it, is refused.
	Owned []string
	// NotNative are fields whose presence keeps a request from passing
	// through (what they refer to is the gateway's: a Responses
	// previous_response_id names a turn the gateway kept).
	NotNative []string
	// ProviderObject finds the first reference in a request body to an
	// object stored in the provider's account (objects.go); such a
	// request goes only to providers with provider_objects: allow.
	ProviderObject func(body []byte) (ObjectRef, bool)
	// PassCodec, when set, is the codec of an answer passed through, for
	// an API whose Codec needs the translated request (Responses); body is
	// the client's.
	PassCodec func(c Caller, requestID string, body []byte, req *llm.ChatRequest, keyed bool) gateway.Codec
}

// Caller is what an API's Prepare knows of the authenticated caller.
type Caller struct {
	// Project is the caller's project id.
	Project string
}

// CodecFunc makes the codec of one request.
type CodecFunc func(requestID string, req *llm.ChatRequest, keyed bool) gateway.Codec
