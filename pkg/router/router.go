// Package router is buzzgate's fallback router. For one request it turns a
// model and the request's preferences into an ordered list of providers (the
// plan), then calls them in order until one produces output: before the
// first text, tool call or refusal a failed or slow provider is replaced by
// the next; after it the provider is fixed and nothing is ever spliced in.
package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/internal/wait"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/tokenize"
)

// Defaults for the gateway object's bounds when the request leaves them out.
const (
	DefaultMaxAttemptsPerRoute = 2
	DefaultBackoff             = time.Second
)

// ErrIncomplete ends an answer whose provider stream stopped, without an
// error, before it said it had finished.
var ErrIncomplete = errors.New("the provider's stream ended before the answer was finished")

// Router plans and runs requests over the configured providers.
type Router struct {
	cfg       *catalog.Config
	providers map[string]llm.Provider
	// caps are the providers' Caps, read once.
	caps   map[string]llm.Caps
	health *Health
	now    func() time.Time
	tokens *tokenize.Counter

	// out holds the routes taken out after a configuration failure
	// (llm.FailConfig), until the time each comes back.
	outMu sync.Mutex
	out   map[routeKey]time.Time
}

// routeKey names a route: a provider and the upstream model it is called
// with.
type routeKey struct{ provider, model string }

// takeOut takes c's route out for the health cooldown.
func (r *Router) takeOut(c Candidate) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if r.out == nil {
		r.out = map[routeKey]time.Time{}
	}
	r.out[routeKey{c.Route.Provider, c.Route.Model}] = r.now().Add(r.cfg.Health.Cooldown.D())
}

// usable reports whether c can be called: its provider is live and its
// route is not out.
func (r *Router) usable(c Candidate) bool {
	if !r.health.Live(c.Route.Provider) {
		return false
	}
	r.outMu.Lock()
	defer r.outMu.Unlock()
	until, ok := r.out[routeKey{c.Route.Provider, c.Route.Model}]
	if !ok {
		return true
	}
	if !r.now().Before(until) {
		delete(r.out, routeKey{c.Route.Provider, c.Route.Model})
		return true
	}
	return false
}

// New returns a router over cfg's models. providers holds one adapter for
// every provider cfg declares.
func New(cfg *catalog.Config, providers map[string]llm.Provider, health *Health, now func() time.Time) (*Router, error) {
	for _, p := range cfg.Providers {
		if providers[p.Name] == nil {
			return nil, fmt.Errorf("router: no adapter for provider %q", p.Name)
		}
	}
	if health == nil {
		health = NewHealth(cfg.Health.FailureThreshold, cfg.Health.Cooldown.D(), now)
	}
	if now == nil {
		now = time.Now
	}
	caps := make(map[string]llm.Caps, len(providers))
	for name, p := range providers {
		caps[name] = p.Caps()
	}
	return &Router{cfg: cfg, providers: providers, caps: caps, health: health, now: now}, nil
}

// CountWith makes the router count the tokens of an answer whose provider
// reported no usage with c (nil: one token per four bytes). Call it before
// the first request.
func (r *Router) CountWith(c *tokenize.Counter) { r.tokens = c }

// Policy is what the calling project imposes on routing.
type Policy struct {
	// Demand is the request's data-policy demand (already the stricter of
	// the request's and the project's).
	Demand llm.DataDemand
	// Residency is "anywhere" or "eu".
	Residency string
}

// Candidate is one provider in a request's plan.
type Candidate struct {
	// Model is the id of the model whose route this is: the requested
	// model's, or one of its fallbacks' (catalog.Model.Fallbacks).
	Model    string
	Route    catalog.Route
	Provider *catalog.Provider
	adapter  llm.Provider
	caps     llm.Caps
}

// Plan is the ordered list of providers one request may call: the requested
// model's routes, then those of each of its fallback models. A candidate's
// index is its route depth.
type Plan struct {
	// Model is the requested model.
	Model      *catalog.Model
	Candidates []Candidate
	// emptyReason says why no candidate is left, when none is.
	emptyReason string
	// retry are the request's bounds on its calls (its "gateway" object).
	retry llm.GatewayOptions
	// tools are the billable server tools the request declares
	// (PriceTools), proto the protocol it declares them in.
	tools []llm.ServerTool
	proto llm.Proto
}

// PriceTools keeps the candidates that can bill every server tool the
// request declares in protocol proto (llm.ServerTools): a route that would
// carry the tools to its provider (it takes the request in that protocol:
// it passes through) must price each in its tool_prices; a route that
// translates the request carries none of them (the translation drops them
// and names them in x-gateway-dropped) and needs no price. When that
// leaves no candidate, the request is refused (CodeInvalidRequest, the
// first unpriced tool's param) before any provider call.
func (p *Plan) PriceTools(proto llm.Proto, tools []llm.ServerTool) error {
	if len(tools) == 0 || len(p.Candidates) == 0 {
		return nil
	}
	p.tools, p.proto = tools, proto
	kept := p.Candidates[:0:0]
	var unpriced *llm.ServerTool
	for _, c := range p.Candidates {
		if !carries(c, proto) {
			kept = append(kept, c)
			continue
		}
		ok := true
		for i, t := range tools {
			if _, priced := c.Route.ToolPrice(t.Name); !priced {
				ok = false
				if unpriced == nil {
					unpriced = &tools[i]
				}
				break
			}
		}
		if ok {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		return llm.Errorf(llm.CodeInvalidRequest, unpriced.Param,
			"%s declares the server tool %s, which the provider bills per call, and no route of model %q has a price for it: leave the tool out, or ask the operator to price it (tool_prices.%s)",
			unpriced.Param, unpriced.Name, p.Model.ID, unpriced.Name)
	}
	p.Candidates = kept
	return nil
}

// carries reports whether c would send a request of protocol proto to its
// provider with its server tools: a route that takes the protocol as it is
// (for Chat Completions, an OpenAI one: the others translate it).
func carries(c Candidate, proto llm.Proto) bool {
	if c.caps.Native != proto {
		return false
	}
	return proto != llm.ProtoChat || c.Provider.API == "openai"
}

// toolPrices are c's prices of the server tool calls an answer counts, by
// the name they are counted under (llm.Usage.ServerToolCalls): its tool_prices,
// and for a tool the request declares under another name than it is
// counted by (Responses' web_search_preview, counted as web_search), that
// tool's price (the higher one when two declared tools share a count).
// perAnswer are the tools of the request billed once per answer that c
// carries.
func (p *Plan) toolPrices(c Candidate) (prices map[string]float64, perAnswer []string) {
	if len(c.Route.ToolPrices) == 0 {
		return nil, nil
	}
	prices = make(map[string]float64, len(c.Route.ToolPrices))
	for name, price := range c.Route.ToolPrices {
		prices[name] = price
	}
	if !carries(c, p.proto) {
		return prices, nil
	}
	declared := map[string]bool{}
	for _, t := range p.tools {
		price, _ := c.Route.ToolPrice(t.Name)
		if !declared[t.Count] || price > prices[t.Count] {
			prices[t.Count] = price
		}
		declared[t.Count] = true
		if t.PerAnswer {
			perAnswer = append(perAnswer, t.Count)
		}
	}
	return prices, perAnswer
}

// Speaks reports whether one of the plan's providers takes requests in
// protocol p as they are (llm.Caps.Native).
func (p *Plan) Speaks(proto llm.Proto) bool {
	for _, c := range p.Candidates {
		if c.caps.Native == proto {
			return true
		}
	}
	return false
}

// Target is what a plan is made from: the model a request asks for and
// its routing preferences, read from the request's body in whatever
// protocol it came (TargetOf for a Chat Completions request).
type Target struct {
	// Model is the model id without its suffix; Suffix is ":floor",
	// ":nitro" or "".
	Model, Suffix string
	// Provider is the request's "provider" object, Gateway its "gateway"
	// object (the retry bounds, allow_fallbacks).
	Provider llm.ProviderPreferences
	Gateway  llm.GatewayOptions
}

// TargetOf is the target of a request in the gateway's own form.
func TargetOf(req *llm.ChatRequest) Target {
	return Target{Model: req.Model, Suffix: req.Suffix, Provider: req.Provider, Gateway: req.Gateway}
}

// Sort is the sort the target asks for: provider.sort, else the model
// suffix's.
func (t Target) Sort() llm.Sort {
	if t.Provider.Sort != llm.SortNone {
		return t.Provider.Sort
	}
	switch t.Suffix {
	case llm.SuffixFloor:
		return llm.SortPrice
	case llm.SuffixNitro:
		return llm.SortThroughput
	}
	return llm.SortNone
}

// AllowFallbacks is false when either the gateway or the provider object
// turns fallbacks off.
func (t Target) AllowFallbacks() bool {
	if t.Gateway.AllowFallbacks != nil && !*t.Gateway.AllowFallbacks {
		return false
	}
	if t.Provider.AllowFallbacks != nil && !*t.Provider.AllowFallbacks {
		return false
	}
	return true
}

// Plan resolves the target's model and preferences. It refuses an unknown
// model (404) and an unknown provider name (400): request validation, before
// the idempotency lookup. Whether any provider is live is Start's question.
func (r *Router) Plan(t Target, pol Policy) (*Plan, error) {
	model, ok := r.cfg.Model(t.Model)
	if !ok {
		return nil, llm.Errorf(llm.CodeModelNotFound, "model", "model %q does not exist", t.Model+t.Suffix)
	}
	for _, list := range []struct {
		name  string
		names []string
	}{{"order", t.Provider.Order}, {"only", t.Provider.Only}, {"ignore", t.Provider.Ignore}} {
		for i, n := range list.names {
			if _, ok := r.cfg.Provider(n); !ok {
				return nil, llm.Errorf(llm.CodeInvalidRequest, fmt.Sprintf("provider.%s[%d]", list.name, i), "unknown provider %q", n)
			}
		}
	}

	// The plan is made for every model up front, so that each candidate's
	// protocol is known before the first call (Speaks, PriceTools) and one
	// request's ceilings span them all.
	models := []*catalog.Model{model}
	for _, id := range model.Fallbacks {
		if m, ok := r.cfg.Model(id); ok {
			models = append(models, m)
		}
	}
	var (
		cands    []Candidate
		selected bool // provider.only and provider.ignore left a route
		seen     = map[routeKey]bool{}
	)
	for _, m := range models {
		group := r.modelCandidates(m, &t, pol, &selected)
		for _, c := range group {
			// A route a fallback shares with a model before it (the same
			// provider and upstream model) is not called twice.
			if k := (routeKey{c.Route.Provider, c.Route.Model}); !seen[k] {
				seen[k] = true
				cands = append(cands, c)
			}
		}
	}
	if !selected {
		return nil, llm.Errorf(llm.CodeInvalidRequest, "provider", "provider.only and provider.ignore leave no provider for model %q", model.ID)
	}
	if len(cands) == 0 {
		// Not refused here: the plan is valid, it just has nobody to call.
		// Start answers 503 no_live_provider, after the idempotency lookup,
		// as it does when every provider is in its cool-down.
		return &Plan{Model: model, retry: t.Gateway, emptyReason: fmt.Sprintf("no provider of model %q meets the data policy (%s) and residency (%s) of this request", model.ID, pol.Demand, residencyName(pol.Residency))}, nil
	}
	if !t.AllowFallbacks() {
		cands = cands[:1]
	}
	return &Plan{Model: model, Candidates: cands, retry: t.Gateway}, nil
}

// modelCandidates is model m's routes that the request's provider object
// and the project's policy allow, in the order the request asks for.
// selected is set when provider.only and provider.ignore leave a route.
func (r *Router) modelCandidates(m *catalog.Model, t *Target, pol Policy, selected *bool) []Candidate {
	cands := make([]Candidate, 0, len(m.Routes))
	for _, rt := range m.Routes {
		if len(t.Provider.Only) > 0 && !slices.Contains(t.Provider.Only, rt.Provider) {
			continue
		}
		if slices.Contains(t.Provider.Ignore, rt.Provider) {
			continue
		}
		*selected = true
		p, _ := r.cfg.Provider(rt.Provider)
		if !meetsDemand(p, pol.Demand) || !meetsResidency(p, pol.Residency) {
			continue
		}
		cands = append(cands, Candidate{Model: m.ID, Route: rt, Provider: p, adapter: r.providers[rt.Provider], caps: r.caps[rt.Provider]})
	}
	r.sortCandidates(cands, t.Sort())
	if len(t.Provider.Order) > 0 {
		rank := func(c Candidate) int {
			if i := slices.Index(t.Provider.Order, c.Route.Provider); i >= 0 {
				return i
			}
			return len(t.Provider.Order)
		}
		sort.SliceStable(cands, func(i, j int) bool { return rank(cands[i]) < rank(cands[j]) })
	}
	return cands
}

func residencyName(s string) string {
	if s == "" {
		return "anywhere"
	}
	return s
}

// meetsDemand: a provider that collects no data (deny) keeps none either, so
// it also meets a zero-retention demand.
func meetsDemand(p *catalog.Provider, d llm.DataDemand) bool {
	switch d {
	case llm.DemandZDR:
		return p.ZDR || p.DataCollection == "deny"
	case llm.DemandDeny:
		return p.DataCollection == "deny"
	}
	return true
}

func meetsResidency(p *catalog.Provider, residency string) bool {
	return residency != "eu" || p.Region == "eu"
}

// sortCandidates orders by the request's sort, stably, so the preset order
// breaks ties. Unmeasured providers sort first under latency and throughput,
// so that they get measured.
func (r *Router) sortCandidates(c []Candidate, s llm.Sort) {
	switch s {
	case llm.SortPrice:
		sort.SliceStable(c, func(i, j int) bool {
			return c[i].Route.InputPrice+c[i].Route.OutputPrice < c[j].Route.InputPrice+c[j].Route.OutputPrice
		})
	case llm.SortLatency:
		lat := make(map[string]time.Duration, len(c))
		for _, x := range c {
			lat[x.Route.Provider], _ = r.health.stats(x.Route.Provider)
		}
		sort.SliceStable(c, func(i, j int) bool { return lat[c[i].Route.Provider] < lat[c[j].Route.Provider] })
	case llm.SortThroughput:
		tp := make(map[string]float64, len(c))
		for _, x := range c {
			l, t := r.health.stats(x.Route.Provider)
			if l == 0 && t == 0 {
				t = 1e18
			}
			tp[x.Route.Provider] = t
		}
		sort.SliceStable(c, func(i, j int) bool { return tp[c[i].Route.Provider] > tp[c[j].Route.Provider] })
	}
}

// Attempt is one provider call, for logs and metrics.
type Attempt struct {
	Provider string
	// Model is the route's upstream model.
	Model  string
	Depth  int
	Class  llm.FailureClass
	Status int
	// Message is the adapter's description of the failure (for the log;
	// an adapter keeps secrets out of it); Cause the error beneath it (a
	// connection's, a decoder's), cut to 200 bytes, or "".
	Message, Cause string
}

// Start calls the plan's providers in order until one produces its first
// output, and returns the answer positioned there. A failure before any
// output moves to the next provider; a provider's 400 stops at once; a 429
// puts the provider aside, to be called again after the backoff within
// max_attempts_per_route. The total number of calls is at most
// max_total_attempts (8), the bounds the plan's target sets. ctx carries
// the request's ceiling.
func (r *Router) Start(ctx context.Context, plan *Plan, req *llm.ChatRequest) (*Answer, []Attempt, error) {
	maxTotal := plan.retry.MaxTotalAttempts
	if maxTotal <= 0 || maxTotal > llm.MaxCallsPerRequest {
		maxTotal = llm.MaxCallsPerRequest
	}
	perRoute := plan.retry.MaxAttemptsPerRoute
	if perRoute <= 0 {
		perRoute = DefaultMaxAttemptsPerRoute
	}
	backoff := DefaultBackoff
	if plan.retry.BackoffSet {
		backoff = plan.retry.Backoff
	}

	if len(plan.Candidates) == 0 {
		return nil, nil, llm.Errorf(llm.CodeNoLiveProvider, "", "%s", plan.emptyReason)
	}
	live := false
	for _, c := range plan.Candidates {
		if r.usable(c) {
			live = true
			break
		}
	}
	if !live {
		return nil, nil, &llm.Error{Code: llm.CodeNoLiveProvider, Message: fmt.Sprintf("no provider of model %q is live; try again shortly", plan.Model.ID), RetryAfter: r.retryIn(plan)}
	}

	var (
		attempts  []Attempt
		calls     = make([]int, len(plan.Candidates))
		throttled []int
		hint      time.Duration
		ups       = map[bodyKey]*llm.UpstreamRequest{}
		nThrottle int
	)
	try := func(i int) (*Answer, error) {
		c := plan.Candidates[i]
		proto, header := llm.ProtoChat, map[string][]string(nil)
		if req.Native != nil && c.caps.Native == req.Native.Proto {
			proto, header = req.Native.Proto, req.Native.Header
		} else if req.ChatErr != nil {
			return nil, nil // this route cannot serve the request (Plan.Speaks)
		}
		// Routes of one protocol and upstream model are sent one request,
		// so that what an adapter reads of it (the joined body, its Chat
		// Completions view) is read once.
		key := bodyKey{proto, c.Route.Model}
		up, ok := ups[key]
		if !ok {
			var (
				body [][]byte
				err  error
			)
			if proto == llm.ProtoChat {
				body, err = req.UpstreamParts(c.Route.Model)
				if err != nil && req.Native != nil && req.ChatErr != nil {
					return nil, nil // no Chat Completions form: this route cannot serve it
				}
			} else {
				body, err = req.Native.BodyFor(c.Route.Model)
			}
			if err != nil {
				return nil, err
			}
			up = &llm.UpstreamRequest{Model: c.Route.Model, Proto: proto, Header: header, Parts: body}
			ups[key] = up
		}
		calls[i]++
		ans, err := r.attempt(ctx, c, i, up)
		if ans != nil {
			ans.Calls = len(attempts) + 1
			if up.Proto == llm.ProtoChat {
				ans.Translation = req.Translation()
			}
			ans.toolPrices, ans.perAnswer = plan.toolPrices(c)
			return ans, nil
		}
		var pe *llm.ProviderError
		if !errors.As(err, &pe) {
			return nil, r.ctxError(err) // the request's own context ended
		}
		at := Attempt{Provider: c.Route.Provider, Model: c.Route.Model, Depth: i, Class: pe.Class, Status: pe.Status, Message: pe.Message}
		if pe.Err != nil {
			at.Cause = pe.Err.Error()
			if len(at.Cause) > 200 {
				at.Cause = strings.ToValidUTF8(at.Cause[:200], "")
			}
		}
		attempts = append(attempts, at)
		switch pe.Class {
		case llm.FailRejected:
			msg := pe.Message
			if msg == "" {
				msg = "no reason given"
			}
			return nil, &llm.Error{Code: llm.CodeProviderRejected, Message: "provider rejected the request: " + msg, Cause: pe}
		case llm.FailThrottled:
			nThrottle++
			hint = max(hint, pe.RetryAfter)
			throttled = append(throttled, i)
		case llm.FailTimeout:
			r.health.Timeout(c.Route.Provider, c.Provider.FirstTokenTimeout.D())
		case llm.FailConfig:
			// The provider may be fine for its other models: only this
			// route goes out.
			r.takeOut(c)
		default:
			r.health.Failure(c.Route.Provider)
		}
		return nil, nil
	}

	for i := range plan.Candidates {
		if len(attempts) >= maxTotal {
			break
		}
		if !r.usable(plan.Candidates[i]) {
			continue
		}
		if ans, err := try(i); ans != nil || err != nil {
			return ans, attempts, err
		}
	}
	for len(throttled) > 0 && len(attempts) < maxTotal {
		again := throttled[:0:0]
		for _, i := range throttled {
			if calls[i] < perRoute {
				again = append(again, i)
			}
		}
		throttled = nil
		if len(again) == 0 {
			break
		}
		if err := wait.Sleep(ctx, nil, nil, backoff); err != nil {
			return nil, attempts, r.ctxError(err)
		}
		for _, i := range again {
			if len(attempts) >= maxTotal {
				break
			}
			if ans, err := try(i); ans != nil || err != nil {
				return ans, attempts, err
			}
		}
	}

	switch {
	case ctx.Err() != nil:
		return nil, attempts, r.ctxError(ctx.Err())
	case len(attempts) == 0:
		return nil, attempts, &llm.Error{Code: llm.CodeNoLiveProvider, Message: fmt.Sprintf("no provider of model %q is live; try again shortly", plan.Model.ID), RetryAfter: r.retryIn(plan)}
	case nThrottle == len(attempts):
		return nil, attempts, &llm.Error{Code: llm.CodeUnavailableRoute, Message: fmt.Sprintf("every provider of model %q that was tried is throttled", plan.Model.ID), RetryAfter: max(hint, backoff, time.Second)}
	}
	return nil, attempts, &llm.Error{Code: llm.CodeAllProvidersFailed, Message: fmt.Sprintf("every provider of model %q that was tried failed (%d calls)", plan.Model.ID, len(attempts))}
}

// bodyKey names one upstream body of a request: routes to the same model in
// the same protocol send the same bytes.
type bodyKey struct {
	proto llm.Proto
	model string
}

// retryIn is the Retry-After of a 503 no_live_provider: the time left until
// the first of the plan's providers is out of its cool-down (a second at
// least), not the whole cool-down.
func (r *Router) retryIn(plan *Plan) time.Duration {
	names := make([]string, len(plan.Candidates))
	for i, c := range plan.Candidates {
		names[i] = c.Route.Provider
	}
	return max(r.health.RetryIn(names...), time.Second)
}

// ctxError turns the end of the request's context into its error: the
// ceiling is a 504; a cancellation (the client went away) stays as it is.
func (r *Router) ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &llm.Error{Code: llm.CodeRequestTimeout, Message: "the request reached its time limit", Cause: err}
	}
	return err
}

// attempt makes one provider call and reads it up to its first output. It
// returns either an answer or an error: a *llm.ProviderError for a failure of
// the provider, or the error of ctx when the request itself ended.
func (r *Router) attempt(ctx context.Context, c Candidate, depth int, up *llm.UpstreamRequest) (*Answer, error) {
	actx, cancel := context.WithCancel(ctx)
	var timedOut atomic.Bool
	var timer *time.Timer
	if t := c.Provider.FirstTokenTimeout.D(); t > 0 {
		timer = time.AfterFunc(t, func() { timedOut.Store(true); cancel() })
	}
	start := r.now()
	fail := func(err error) (*Answer, error) {
		if timer != nil {
			timer.Stop()
		}
		cancel()
		if timedOut.Load() {
			return nil, &llm.ProviderError{Class: llm.FailTimeout, Message: "no output before the first-token timeout", Err: err}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var pe *llm.ProviderError
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "the provider's stream ended before any output", Err: err}
	}

	stream, err := c.adapter.ChatStream(actx, up)
	if err != nil {
		return fail(err)
	}
	a := &Answer{
		ModelID: c.Model, Provider: c.Route.Provider, Depth: depth, Route: c.Route, Proto: up.Proto, API: c.Provider.API,
		stream: stream, cancel: cancel, health: r.health, now: r.now, tokens: r.tokens, prompt: up.Parts,
	}
	a.pending = a.firstChunks[:0]
	a.Dropped = stream.Report().Dropped
	for {
		ch, ok, err := a.read()
		if err != nil {
			stream.Close()
			if errors.Is(err, io.EOF) {
				err = llm.ErrStreamCut
			}
			return fail(err)
		}
		if !ok {
			continue // usage only
		}
		a.pending = append(a.pending, ch)
		if ch.Output || ch.Finished != 0 {
			if timer != nil && !timer.Stop() {
				stream.Close()
				return fail(context.Canceled)
			}
			a.FirstOutput = r.now().Sub(start)
			a.outputAt = r.now()
			r.health.Success(c.Route.Provider, a.FirstOutput)
			return a, nil
		}
	}
}

// Answer is the answer of the provider that produced output first. Next
// gives its chunks in order, starting with those read before the first
// output; usage-only chunks are kept back and reported by Usage.
type Answer struct {
	// ModelID is the id of the model whose route answered: the requested
	// model, or one of its fallbacks.
	ModelID  string
	Provider string
	Depth    int
	Route    catalog.Route
	// Proto is the protocol of the answer's chunks: ProtoChat, or the
	// client's own when its request was passed through.
	Proto llm.Proto
	// Dropped are the request's fields the adapter's translation left out
	// (llm.StreamReport), nil for a request passed through.
	Dropped []string
	// Translation is what the client API's translation of the request made
	// besides its Chat Completions form (llm.Translation), for encoding
	// this answer: set when the answer's Proto is ProtoChat and the client
	// sent another protocol.
	Translation llm.Translation
	// API is the provider's upstream API (catalog.Provider.API).
	API string
	// Calls is the number of provider calls the request made, this one
	// included.
	Calls       int
	FirstOutput time.Duration

	pending     []llm.Chunk
	firstChunks [2]llm.Chunk // pending's first array: a role chunk and the first output
	stream      llm.ChunkStream
	cancel      context.CancelFunc
	health      *Health
	now         func() time.Time
	outputAt    time.Time
	tokens      *tokenize.Counter
	prompt      [][]byte // the upstream body, for counting its tokens
	// toolPrices and perAnswer are the route's prices of server tool
	// calls, and the tools billed once per answer (Plan.toolPrices).
	toolPrices map[string]float64
	perAnswer  []string

	finished   bool
	seen, done uint64 // the choices seen and finished (llm.Chunk.Seen)
	usage      *llm.Usage
	err        error
	// textLen is the length of the answer's text (llm.Chunk.Text); text
	// holds its first tokenize.ExactLimit bytes, in a buffer of textPool,
	// for counting its tokens when no usage comes.
	textLen int
	text    *[]byte
	counted struct {
		done           bool
		prompt, output int
	}
}

// textPool holds the buffers of answers' text.
var textPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// DroppedFrom names the fields of req the answer's path left out (for
// x-gateway-dropped and the DroppedFields metric): for a request that went
// upstream in the client's own protocol, what the adapter's translation to
// its upstream left out (nothing when it passed through as it is); else the
// hints the client API's translation to Chat Completions dropped
// (req.Dropped), then those the adapter's translation did.
func (a *Answer) DroppedFrom(req *llm.ChatRequest) []string {
	if a.Proto != llm.ProtoChat {
		return a.Dropped
	}
	if len(a.Dropped) == 0 {
		return req.Dropped
	}
	return append(append([]string(nil), req.Dropped...), a.Dropped...)
}

// Model is the model the provider says it answered with: that of its first
// chunk, else the route's upstream model.
func (a *Answer) Model() string {
	if len(a.firstChunks[0].Model) > 0 {
		return a.firstChunks[0].Model
	}
	return a.Route.Model
}

// More reports whether Next will return without waiting on the provider:
// a chunk read before the first output is still pending, or the stream has
// its next chunk (or its end) buffered (llm.ChunkStream's Ready). A writer flushes
// to the client only when there is no more: a burst the provider sent at
// once goes out in one write, and nothing is held back while the provider
// is quiet. Call it from the goroutine that calls Next.
func (a *Answer) More() bool {
	if len(a.pending) > 0 {
		return true
	}
	if a.err != nil {
		return false
	}
	return a.stream.Ready()
}

// read returns the next chunk to forward (ok), a usage-only chunk's
// absence (!ok), or the stream's error. The chunk is returned by value: a
// pointer to it would be an allocation per chunk.
func (a *Answer) read() (ch llm.Chunk, ok bool, err error) {
	ch, err = a.stream.Next()
	if err != nil {
		return llm.Chunk{}, false, err
	}
	// A chat chunk's usage is taken out (the gateway sends it, with its
	// cost, in a chunk of its own); an event passed through goes to the
	// client as it is, its usage only noted.
	if ch.Usage != nil {
		a.usage = ch.Usage
		if ch.Proto == llm.ProtoChat {
			if !ch.HasChoices {
				return llm.Chunk{}, false, nil
			}
			ch.Raw = withoutUsage(ch.Raw)
		}
	}
	// Finished once every choice seen so far has its finish_reason (n over
	// 1: one choice's finish while another still streams is not the end).
	a.seen |= ch.Seen
	a.done |= ch.Finished
	a.finished = a.seen != 0 && a.seen&^a.done == 0
	if t := ch.Text; t != "" {
		a.keepText(t)
	}
	return ch, true, nil
}

// keepText adds t to the answer's text: its length to textLen, and as much
// of it to text as keeps that within tokenize.ExactLimit, cut on a
// character's boundary.
func (a *Answer) keepText(t string) {
	a.textLen += len(t)
	if a.text == nil {
		a.text = textPool.Get().(*[]byte)
	}
	b := *a.text
	if room := tokenize.ExactLimit - len(b); room < len(t) {
		for room > 0 && !utf8.RuneStart(t[room]) {
			room--
		}
		t = t[:max(room, 0)]
	}
	*a.text = append(b, t...)
}

// withoutUsage drops a usage object that an upstream put in a chunk with
// choices: the gateway sends usage, with its cost, in a chunk of its own.
func withoutUsage(raw []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	delete(m, "usage")
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// Next returns the answer's next chunk. At the end it returns io.EOF when
// the provider finished, ErrIncomplete when its stream just stopped, or the
// failure (a *llm.ProviderError, or the request context's error) when the
// provider failed after output had started.
func (a *Answer) Next() (llm.Chunk, error) {
	if len(a.pending) > 0 {
		ch := a.pending[0]
		a.pending = a.pending[1:]
		return ch, nil
	}
	for a.err == nil {
		ch, ok, err := a.read()
		if err == nil {
			if !ok {
				continue
			}
			return ch, nil
		}
		switch {
		case errors.Is(err, io.EOF):
			a.err = io.EOF
		case errors.Is(err, llm.ErrStreamCut):
			if a.finished {
				a.err = io.EOF // a provider that omits [DONE] after finishing
			} else {
				a.err = ErrIncomplete
			}
		case a.finished && isProviderError(err):
			// The provider finished its answer (a finish_reason) and then
			// failed before its end marker: a reset, an error event. The
			// answer is whole, as after a clean close: keep it, and do not
			// hold the failure against the provider.
			a.err = io.EOF
		default:
			if isProviderError(err) {
				a.health.Failure(a.Provider)
			}
			a.err = err
		}
		if a.err == io.EOF {
			if d := a.now().Sub(a.outputAt).Seconds(); d > 0 {
				a.health.Throughput(a.Provider, float64(a.textLen)/d)
			}
		}
	}
	return llm.Chunk{}, a.err
}

// isProviderError reports whether err is a failure of the provider (a
// *llm.ProviderError), not the request's own context ending. (Its own
// function: the pointer errors.As takes escapes, an allocation wherever it
// is declared.)
func isProviderError(err error) bool {
	var pe *llm.ProviderError
	return errors.As(err, &pe)
}

// Usage is the answer's usage with its cost at the route's prices: the
// provider's own counts, or, when it sent none (a stream that broke off, or
// that the gateway stopped reading when its client left), the tokens of the
// prompt and of the text produced, counted with the model's tokenizer
// (tokenize). A stream that ended before its end with counts reported so
// far (an Anthropic upstream reports the prompt's at its start) keeps them,
// its completion counted as the larger of the reported and the counted.
func (a *Answer) Usage() llm.Usage {
	var u llm.Usage
	reported := a.usage
	if reported == nil {
		reported = a.stream.Report().Usage
	}
	if reported != nil {
		u = *reported
	}
	switch {
	case u.PromptTokens == 0 && u.CompletionTokens == 0:
		prompt, output := a.count()
		u = llm.Usage{PromptTokens: prompt, CompletionTokens: output, TotalTokens: prompt + output, Estimated: true}
	case a.err != io.EOF && !a.finished:
		// Cut short: what was produced may exceed what was reported. (A
		// finished answer's usage is the provider's, even before its end
		// marker is read: a stream passed through is priced at its last
		// event.)
		if _, output := a.count(); output > u.CompletionTokens {
			u.CompletionTokens, u.Estimated = output, true
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
	}
	if len(a.perAnswer) > 0 {
		u = withPerAnswerCalls(u, a.perAnswer)
	}
	u.Cost = llm.PriceOf(u, llm.Prices{Input: a.Route.InputPrice, Output: a.Route.OutputPrice, CacheRead: a.Route.CacheRead(),
		CacheWrite: a.Route.CacheWrite(), CacheWrite1h: a.Route.CacheWrite1h(), Tools: a.toolPrices})
	return u
}

// withPerAnswerCalls is u counting one call of each of tools that u does
// not count already (in server_tool_use, as an answer that counts its
// calls would).
func withPerAnswerCalls(u llm.Usage, tools []string) llm.Usage {
	counted := u.ServerToolCalls
	use := map[string]json.RawMessage{}
	if raw, ok := u.Extra[llm.ServerToolUse]; ok && json.Unmarshal(raw, &use) != nil {
		use = map[string]json.RawMessage{}
	}
	for _, t := range tools {
		if counted[t] == 0 {
			use[t+"_requests"] = json.RawMessage("1")
		}
	}
	b, err := json.Marshal(use)
	if err != nil {
		return u
	}
	extra := make(map[string]json.RawMessage, len(u.Extra)+1)
	for k, v := range u.Extra {
		extra[k] = v
	}
	extra[llm.ServerToolUse] = b
	u.Extra = extra
	calls := make(map[string]int, len(counted)+len(tools))
	for t, n := range counted {
		calls[t] = n
	}
	for _, t := range tools {
		if counted[t] == 0 && t != "" {
			calls[t] = 1
		}
	}
	u.ServerToolCalls = calls
	return u
}

// count is the tokens of the prompt and of the text produced so far, by the
// route model's tokenizer, counted once: the output past the text kept
// (tokenize.ExactLimit bytes) at the rate of the text kept.
func (a *Answer) count() (prompt, output int) {
	if a.counted.done {
		return a.counted.prompt, a.counted.output
	}
	a.counted.done = true
	a.counted.prompt, _ = a.tokens.Prompt(a.Route.Model, bytes.Join(a.prompt, nil))
	if a.text != nil && len(*a.text) > 0 {
		kept := *a.text
		n, _ := a.tokens.Count(a.Route.Model, string(kept))
		a.counted.output = int(int64(n) * int64(a.textLen) / int64(len(kept)))
	}
	return a.counted.prompt, a.counted.output
}

// Close ends the provider call. It is safe to call more than once.
func (a *Answer) Close() {
	a.stream.Close()
	a.cancel()
	if a.text != nil {
		if cap(*a.text) <= 64<<10 { // a large one is left to the collector
			*a.text = (*a.text)[:0]
			textPool.Put(a.text)
		}
		a.text = nil
	}
}
