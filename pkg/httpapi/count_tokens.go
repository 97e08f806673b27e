package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/clientapi/messages"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	messageswire "github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// HeaderEstimated marks a count_tokens answer that is the gateway's own
// estimate (messageswire.EstimateInputTokens), not an upstream's count.
const HeaderEstimated = "X-Gateway-Estimated"

// countTokens serves POST /api/v1/messages/count_tokens, Anthropic's token
// counting: the body is a Messages request (max_tokens not needed), the
// answer {"input_tokens":N}, errors in Anthropic's envelope. It is not a
// generation, but it is admitted as one: authenticated, its body read, then
// admitted (gateway.AdmitFree: a server.max_in_flight slot held until it
// is answered, and one request of the project's and key's rpm) before the
// body is decoded, so that a count can neither decode nor call upstreams
// past the bounds a generation keeps. Then the body is checked (model,
// messages, the gateway's own fields) and the model planned the same way;
// nothing is billed or held, no balance or key limit is checked, an
// Idempotency-Key is ignored, and no metrics line is written.
//
// The plan's first live candidate that can count (llm.TokenCounter: an
// api: anthropic provider, or a simulated one of that protocol) is called
// once, with the client's body less the gateway's fields, the route's
// model, and the client's anthropic-version and anthropic-beta headers,
// within the provider's first_token_timeout and the request's ceiling; its
// answer is returned as it sent it, with x-gateway-model,
// x-gateway-provider and x-gateway-route-depth. The provider's 400 is passed on as 400
// provider_rejected, as on Messages. Otherwise (no candidate can count,
// none is live, the call failed or timed out) the answer is the gateway's
// estimate, with x-gateway-estimated: true.
func (s *Server) countTokens(w *clientapi.Recorder, r *http.Request, log *gateway.Log) {
	p, err := s.authenticate(r)
	if err != nil {
		clientapi.WriteAnthropicError(w, err)
		return
	}
	log.Add(slog.String("project", p.Project.ID), slog.String("key_id", p.keyID))
	body, err := s.readBody(w, r)
	if err != nil {
		clientapi.WriteAnthropicError(w, err)
		return
	}
	adm, err := s.svc.AdmitFree(r.Context(), &p.Caller, messages.API.Spec().RateHeaders)
	if err != nil {
		if r.Context().Err() != nil {
			log.ClientGone = true // nobody to answer
			return
		}
		clientapi.WriteAnthropicError(w, err)
		return
	}
	defer adm.Release()
	for k, v := range adm.Header {
		w.Header().Set(k, v)
	}
	// Planned as a Messages request is: from what routing reads of the
	// body (llm.DecodeRoutingRequest), its messages checked too.
	req, err := llm.DecodeRoutingRequest(body)
	if err != nil {
		clientapi.WriteAnthropicError(w, err)
		return
	}
	log.Add(slog.String("model", req.Model+req.Suffix))
	plan, err := s.router.Plan(router.TargetOf(req), router.Policy{Demand: req.Demand(p.Policy), Residency: p.Project.Residency})
	if err == nil {
		// The count is the provider's: the body goes upstream as for a
		// Messages request.
		err = scopeObjects(objectRef(messages.API, body), plan)
	}
	if err != nil {
		clientapi.WriteAnthropicError(w, err)
		return
	}

	reason := "no_counting_provider"
	if counters := s.router.TokenCounters(plan); len(counters) > 0 {
		count, c, err := s.callCounter(r, counters, body)
		var pe *llm.ProviderError
		switch {
		case count != nil:
			log.Add(slog.String("provider", c.Route.Provider), slog.Int("route_depth", c.Depth))
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", strconv.Itoa(len(count.Body)))
			h.Set("X-Gateway-Model", c.Model)
			h.Set("X-Gateway-Provider", c.Route.Provider)
			h.Set("X-Gateway-Route-Depth", strconv.Itoa(c.Depth))
			w.WriteHeader(http.StatusOK)
			w.Write(count.Body)
			return
		case r.Context().Err() != nil:
			log.ClientGone = true // nobody to answer
			return
		case errors.As(err, &pe) && pe.Class == llm.FailRejected:
			log.Add(slog.String("provider", c.Route.Provider))
			msg := pe.Message
			if msg == "" {
				msg = "no reason given"
			}
			clientapi.WriteAnthropicError(w, &llm.Error{Code: llm.CodeProviderRejected, Message: "provider rejected the request: " + msg, Cause: pe})
			return
		default:
			reason = "provider_failed"
			if errors.Is(err, context.DeadlineExceeded) {
				reason = "provider_timeout"
			}
			if c.Counter != nil {
				log.Add(slog.String("provider", c.Route.Provider))
			}
			if pe != nil && pe.Status != 0 {
				log.Add(slog.Int("provider_status", pe.Status))
			}
		}
	}
	log.Add(slog.Bool("estimated", true), slog.String("estimate_reason", reason))
	w.Header().Set(HeaderEstimated, "true")
	writeJSON(w, http.StatusOK, struct {
		InputTokens int `json:"input_tokens"`
	}{messageswire.EstimateInputTokens(body)})
}

// callCounter asks the first of counters (the plan's first live route
// whose adapter counts tokens) to count body.
func (s *Server) callCounter(r *http.Request, counters []router.TokenCounter, body []byte) (*llm.TokenCount, router.TokenCounter, error) {
	c := counters[0]
	up, err := withoutGatewayFields(body)
	if err != nil {
		return nil, router.TokenCounter{}, err
	}
	timeout := s.cfg.Server.RequestTimeout.D()
	if t := c.Provider.FirstTokenTimeout.D(); t > 0 && (timeout <= 0 || t < timeout) {
		timeout = t
	}
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	count, err := c.Counter.CountTokens(ctx, &llm.TokenCountRequest{Model: c.Route.Model, Body: up,
		Version: r.Header.Get("Anthropic-Version"), Beta: r.Header.Values("Anthropic-Beta")})
	return count, c, err
}

// withoutGatewayFields is the JSON object body less the fields the gateway
// owns (llm.GatewayFields), the others in their order, as written.
func withoutGatewayFields(body []byte) ([]byte, error) {
	drop := make(map[string][]byte, len(llm.GatewayFields))
	for _, k := range llm.GatewayFields {
		drop[k] = nil
	}
	return llm.SetTopLevel(body, drop)
}
