package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// HeaderIdempotencyKey is the header that makes a request exactly-once.
const HeaderIdempotencyKey = "Idempotency-Key"

// chat serves POST /api/v1/chat/completions. The order of checks is the
// contract: authentication, the body (read whole within
// server.body_timeout, then admission, in gateway.Service.Run), request
// validation (body, model, provider names), then the idempotency lookup,
// then balance and limits, then routing. Whatever is refused before the
// lookup stores nothing, so a retry with the same key runs normally.
func (s *Server) chat(w *recorder, r *http.Request, id string, log *gateway.Log) {
	p, err := s.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	log.Add(slog.String("project", p.Project.ID), slog.String("key_id", p.keyID))
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := llm.DecodeChatRequest(body)
	if err != nil {
		writeError(w, err)
		return
	}
	log.Add(slog.String("model", req.Model+req.Suffix), slog.Bool("stream", req.Stream))
	demand := req.Demand(p.Policy)
	plan, err := s.router.Plan(req, router.Policy{Demand: demand, Residency: p.Project.Residency})
	if err != nil {
		writeError(w, err)
		return
	}
	g := &gateway.Request{ID: id, Caller: &p.Caller, Model: req.Model, Plan: plan, Chat: req, Demand: demand,
		IncludeUsage: req.IncludeUsage, Log: log}
	if keys := r.Header.Values(HeaderIdempotencyKey); len(keys) > 0 {
		if len(keys) > 1 || keys[0] == "" || len(keys[0]) > idempotency.MaxKeyLength {
			writeError(w, llm.Errorf(llm.CodeInvalidRequest, HeaderIdempotencyKey, "send one Idempotency-Key header, a non-empty string of at most %d bytes", idempotency.MaxKeyLength))
			return
		}
		fp, err := idempotency.Fingerprint(r.Method, r.URL.Path, body)
		if err != nil {
			writeError(w, llm.Errorf(llm.CodeInvalidRequest, "", "a request with an Idempotency-Key needs an unambiguous JSON body: %v", err))
			return
		}
		g.IdempotencyKey, g.Fingerprint = keys[0], fp
	}
	codec := &chatCodec{requestID: id, req: req, keyed: g.IdempotencyKey != ""}
	s.svc.Run(r.Context(), g, newWire(w, s.cfg.Server.WriteTimeout.D(), writeError), codec)
}
