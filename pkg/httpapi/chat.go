package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// HeaderIdempotencyKey is the header that makes a request exactly-once.
const HeaderIdempotencyKey = "Idempotency-Key"

// clientAPI is one client API the gateway speaks: how its requests become
// the gateway's own (a Chat Completions request, llm.ChatRequest), and how
// answers and errors go back in its shapes. Everything between is the same
// pipeline (gateway.Service) for every API.
type clientAPI struct {
	// decode turns the client's body into a Chat Completions body; nil
	// for Chat Completions itself.
	decode func(body []byte) ([]byte, error)
	// codec encodes the answer of req.
	codec codecFunc
	// prepare, when set, replaces decode and codec: for an API whose
	// request needs more than its body (Responses: the kept turn of its
	// previous_response_id) and whose codec depends on the request. When
	// the body alone is not the whole request, resolve returns the whole
	// Chat Completions body; it runs after the idempotency lookup
	// (gateway.Request.Resolve).
	prepare func(p *principal, requestID string, body []byte) (chat []byte, codec codecFunc, resolve func(context.Context) ([]byte, error), err error)
	// errorf writes an error in the API's envelope.
	errorf func(w http.ResponseWriter, err error) int
	// scope keeps this endpoint's idempotency records apart from the
	// others' ("" for Chat Completions).
	scope string
	// apiKeyHeader: the key may come in x-api-key (Anthropic's SDKs).
	apiKeyHeader bool
}

// codecFunc makes the codec of one request.
type codecFunc func(requestID string, req *llm.ChatRequest, keyed bool) gateway.Codec

var chatAPI = clientAPI{
	codec: func(id string, req *llm.ChatRequest, keyed bool) gateway.Codec {
		return &chatCodec{requestID: id, req: req, keyed: keyed}
	},
	errorf: writeError,
}

// generate serves a generation endpoint. The order of checks is the
// contract: authentication, the body (read whole within
// server.body_timeout, then admission, in gateway.Service.Run), request
// validation (body, model, provider names), then the idempotency lookup,
// then what the body refers to (a Responses previous_response_id's kept
// turn: gateway.Request.Resolve), then balance and limits, then routing.
// Whatever is refused before the lookup stores nothing, and a refusal after
// it releases the key, so a retry with the same key runs normally.
func (s *Server) generate(w *recorder, r *http.Request, id string, log *gateway.Log, api clientAPI) {
	fail := func(err error) { api.errorf(w, err) }
	p, err := s.authenticateWith(r, api.apiKeyHeader)
	if err != nil {
		fail(err)
		return
	}
	log.Add(slog.String("project", p.Project.ID), slog.String("key_id", p.keyID))
	body, err := s.readBody(w, r)
	if err != nil {
		fail(err)
		return
	}
	// A keyed request's fingerprint covers the client's own body, as it
	// sent it; a large body's is computed while the request is decoded.
	keys := r.Header.Values(HeaderIdempotencyKey)
	var fingerprint func() (string, error)
	if len(keys) == 1 && keys[0] != "" && len(keys[0]) <= idempotency.MaxKeyLength {
		var join func()
		fingerprint, join = startFingerprint(r.Method, r.URL.Path, body)
		defer join()
	}
	chatBody, mkCodec := body, api.codec
	var resolve func(context.Context) ([]byte, error)
	switch {
	case api.prepare != nil:
		chatBody, mkCodec, resolve, err = api.prepare(p, id, body)
	case api.decode != nil:
		chatBody, err = api.decode(body)
	}
	if err != nil {
		fail(err)
		return
	}
	req, err := llm.DecodeChatRequest(chatBody)
	if err != nil {
		fail(err)
		return
	}
	log.Add(slog.String("model", req.Model+req.Suffix), slog.Bool("stream", req.Stream))
	demand := req.Demand(p.Policy)
	plan, err := s.router.Plan(req, router.Policy{Demand: demand, Residency: p.Project.Residency})
	if err != nil {
		fail(err)
		return
	}
	g := &gateway.Request{ID: id, Caller: &p.Caller, Model: req.Model, Plan: plan, Chat: req, Demand: demand,
		IncludeUsage: req.IncludeUsage, Log: log, Scope: api.scope}
	if resolve != nil {
		g.Resolve = func(ctx context.Context) (*llm.ChatRequest, error) {
			whole, err := resolve(ctx)
			if err != nil {
				return nil, err
			}
			return llm.DecodeChatRequest(whole)
		}
	}
	if len(keys) > 0 {
		if fingerprint == nil {
			fail(llm.Errorf(llm.CodeInvalidRequest, HeaderIdempotencyKey, "send one Idempotency-Key header, a non-empty string of at most %d bytes", idempotency.MaxKeyLength))
			return
		}
		fp, err := fingerprint()
		if err != nil {
			fail(llm.Errorf(llm.CodeInvalidRequest, "", "a request with an Idempotency-Key needs an unambiguous JSON body: %v", err))
			return
		}
		g.IdempotencyKey, g.Fingerprint = keys[0], fp
	}
	s.svc.Run(r.Context(), g, newWire(w, s.cfg.Server.WriteTimeout.D(), api.errorf), mkCodec(id, req, g.IdempotencyKey != ""))
}

// concurrentFingerprint is the body size from which a keyed request's
// fingerprint is computed on a goroutine of its own, while the request is
// decoded and planned: for a large body each takes about a millisecond a
// megabyte, and a second CPU (the local server's) does the two at once.
const concurrentFingerprint = 64 << 10

// startFingerprint starts the fingerprint of a keyed request's body: wait
// returns it (computing it then for a small body), join waits for the
// goroutine computing a large body's, so that it ends with the request.
func startFingerprint(method, path string, body []byte) (wait func() (string, error), join func()) {
	if len(body) < concurrentFingerprint {
		return func() (string, error) { return idempotency.Fingerprint(method, path, body) }, func() {}
	}
	var fp string
	var err error
	var panicked any
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A panic goes on in the request's goroutine, whose recovery
		// answers 500, rather than ending the process here.
		defer func() { panicked = recover() }()
		fp, err = idempotency.Fingerprint(method, path, body)
	}()
	return func() (string, error) {
		<-done
		if panicked != nil {
			panic(panicked)
		}
		return fp, err
	}, func() { <-done }
}
