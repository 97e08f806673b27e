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
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// API is one client API the gateway speaks: what the HTTP layer checks of
// its requests (Spec), how they become the gateway's own (a Chat
// Completions request, llm.ChatRequest), and how answers and errors go
// back in its shapes. Everything between is the same pipeline
// (gateway.Service) for every API.
type API interface {
	// Spec is what the HTTP layer checks of the API's requests.
	Spec() *Spec
	// WriteError writes err in the API's error envelope and returns the
	// status it wrote.
	WriteError(w http.ResponseWriter, err error) int
	// ProviderObject finds the first reference in a request body to an
	// object stored in the provider's account (objects.go); such a
	// request goes only to providers with provider_objects: allow.
	ProviderObject(body []byte) (ObjectRef, bool)
	// Translate reads the client's body as the gateway's own request: chat
	// is its Chat Completions form (llm.Hub: the body, and the members the
	// translation wrote it from), and t what else the translation made
	// (nil: the body is already that, as a Chat Completions one is). Its
	// error refuses the request (a field the translation refuses, named).
	Translate(c Caller, requestID string, body []byte) (chat llm.Hub, t Translation, err error)
	// Codec is the codec of req served in the API's own protocol: passed
	// through as the client sent body (req is then the request
	// llm.NewRoutingRequest read from it, NewNative), or a Chat Completions
	// request on any route.
	Codec(c Caller, requestID string, body []byte, req *llm.ChatRequest, keyed bool) gateway.Codec
}

// Spec is what the HTTP layer checks of an API's requests before it
// decodes them, and how it keeps them apart.
type Spec struct {
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
	// RateHeaders, when set, adds the API's own rate-limit headers to the
	// gateway's x-ratelimit-*.
	RateHeaders gateway.RateHeaders
}

// Translation is what a client API's translation to the gateway's own
// form keeps of a request besides its Chat Completions body.
type Translation interface {
	// Codec is the codec of req, the decoded Chat Completions body, for
	// answers from a route of another protocol than the client's.
	Codec(requestID string, req *llm.ChatRequest, keyed bool) gateway.Codec
	// Resolver completes the request from state outside its body
	// (gateway.Resolver: the Responses API's previous_response_id), or is
	// nil when the body is the whole request.
	Resolver() gateway.Resolver
}

// Caller is what an API's Translate knows of the authenticated caller.
type Caller struct {
	// Project is the caller's project id.
	Project string
}

// Native is a request that a route of its own protocol can serve as the
// client sent it: it is translated to the gateway's own form, once, only
// when a route of another protocol is tried (llm.Translator), and it
// encodes the answer of either kind (gateway.Codec): passed through, with
// its API's Codec, or translated, with the codec its translation made,
// which the answer carries (router.Answer.Translation).
type Native struct {
	api       API
	caller    Caller
	requestID string
	body      []byte
	dropped   []string
	keyed     bool

	pass gateway.Codec
}

// NewNative returns the codec of req, the request llm.NewRoutingRequest
// read from body for requestID and planned, and makes it req's translator
// (llm.ChatRequest.TranslateWith). dropped are the hints its translation
// leaves out (Spec.Hints that the body sets); keyed says whether it has an
// Idempotency-Key.
func NewNative(api API, c Caller, requestID string, body []byte, dropped []string, req *llm.ChatRequest, keyed bool) *Native {
	n := &Native{api: api, caller: c, requestID: requestID, body: body, dropped: dropped, keyed: keyed,
		pass: api.Codec(c, requestID, body, req, keyed)}
	req.TranslateWith(n)
	return n
}

// Translate makes the request's Chat Completions form (llm.Translator),
// with the codec of the answers to it as its llm.Translation. It is read
// from the members the translation wrote (llm.Hub.Request) for a request
// without an Idempotency-Key, whose body llm.RequestMembers checked for a
// member name given twice at any depth (a keyed one's fingerprint checks
// it later, so its Chat Completions form is decoded, to be refused first).
func (n *Native) Translate() (*llm.ChatRequest, llm.Translation, error) {
	chat, t, err := n.api.Translate(n.caller, n.requestID, n.body)
	if err != nil {
		return nil, nil, err
	}
	full, err := chat.Request(!n.keyed)
	if err != nil {
		return nil, nil, err
	}
	full.Dropped = n.dropped
	if t == nil {
		return full, nil, nil
	}
	return full, t.Codec(n.requestID, full, n.keyed), nil
}

// Answer encodes ans with the codec of its protocol: a translated answer
// with the codec Translate made, which it carries.
func (n *Native) Answer(ans *router.Answer, out gateway.Emitter) gateway.Result {
	if c, ok := ans.Translation.(gateway.Codec); ok && ans.Proto == llm.ProtoChat {
		return c.Answer(ans, out)
	}
	return n.pass.Answer(ans, out)
}

// JoinBroken is the pass-through codec's: a joined or replayed stream is
// the one the first call wrote.
func (n *Native) JoinBroken(reason string) idempotency.Event { return n.pass.JoinBroken(reason) }
