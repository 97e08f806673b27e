package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzzgate/buzzgate/internal/storecall"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/ratelimit"
)

// takeRate counts the request against its project's and key's rpm and tpm
// (its prompt's estimate and its output reserve, outputReserve), before
// any provider call: 429 rate_limited when one has no room this minute. It
// runs after the balance check, so a request refused for money is not
// counted. Its headers (x-ratelimit-*, and the client API's own,
// Request.RateHeaders) go on the answer.
func (s *Service) takeRate(ctx context.Context, req *Request) error {
	l := s.accounts.Limiter
	c := req.Caller
	if l == nil {
		return nil
	}
	var counters []ratelimit.Counter
	if p := req.projectRates; p.RPM > 0 || p.TPM > 0 {
		counters = append(counters, ratelimit.Counter{Scope: "p", ID: c.Project.ID, Limit: ratelimit.Limit{RPM: p.RPM, TPM: p.TPM}})
	}
	if k := c.KeyRates; k.RPM > 0 || k.TPM > 0 {
		counters = append(counters, ratelimit.Counter{Scope: "k", ID: c.BillingKeyID, Limit: ratelimit.Limit{RPM: k.RPM, TPM: k.TPM}})
	}
	if len(counters) == 0 {
		return nil
	}
	var prompt int64
	if req.Chat != nil {
		prompt = int64(llm.EstimateTokens(req.Chat.Size()))
	}
	output := outputReserve(req, counters, prompt)
	reserve := prompt + output
	now := s.now()
	tctx, cancel := storecall.Bound(ctx, 10*time.Second, false)
	defer cancel()
	taken, usages, err := l.Take(tctx, now, counters, reserve)
	switch {
	case errors.Is(err, ratelimit.ErrLimited):
		u := usages[0]
		whose := "project's"
		if u.Scope == "k" {
			whose = "API key's"
		}
		what := fmt.Sprintf("requests per minute (%d)", u.Limit.RPM)
		if u.Limit.RPM == 0 || u.Requests < u.Limit.RPM {
			what = fmt.Sprintf("tokens per minute (%d; this request reserves %d: its prompt's estimate and the most output it may produce, its max output tokens or, when it sets none, what its upstream allows, times n)", u.Limit.TPM, reserve)
		}
		return &HeaderError{Err: &llm.Error{Code: llm.CodeRateLimited, Message: "the " + whose + " " + what + " are used up; retry after the minute",
			RetryAfter: max(u.Reset.Sub(now), time.Second)}, Header: rateHeaders(usages, now, req.RateHeaders)}
	case err != nil:
		return BillingUnavailable(err)
	}
	h := &rateHold{svc: s, taken: taken, output: output}
	h.window.Store(taken.Window)
	h.mu.Lock()
	h.arm(now)
	h.mu.Unlock()
	req.rate = h
	req.rateHeaders = rateHeaders(usages, now, req.RateHeaders)
	return nil
}

// outputReserve is the most output tokens the request may produce: its
// max output tokens, or when it sets none what its plan's routes allow
// (router.Plan.MaxOutputTokens: an adapter's default, a route's
// max_output_tokens), times its choices (n). When a route's allowance is
// not known, the request may use all of the tightest tpm: it reserves
// what of that its prompt leaves.
func outputReserve(req *Request, counters []ratelimit.Counter, prompt int64) int64 {
	if req.free {
		return 0
	}
	n := int64(max(req.Choices, 1))
	if req.MaxOutputTokens > 0 {
		return int64(req.MaxOutputTokens) * n
	}
	if req.Plan != nil {
		if most, ok := req.Plan.MaxOutputTokens(); ok {
			return most * n
		}
	}
	var tightest int64
	for _, c := range counters {
		if t := c.Limit.TPM; t > 0 && (tightest == 0 || t < tightest) {
			tightest = t
		}
	}
	return max(tightest-prompt, 0)
}

// settleRate corrects the request's count to the tokens its answer used
// (none when it was not answered), best effort: in the minute it ends in,
// which holds its whole reserve when it started in it, its output reserve
// when it was carried there; a request whose count did not follow it into
// the minute it ends in (it sent nothing in that minute before it ended)
// counts its output there.
func (s *Service) settleRate(req *Request) {
	h := req.rate
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	if h.timer != nil {
		h.timer.Stop()
	}
	now := s.now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	switch {
	case ratelimit.WindowOf(now) > h.taken.Window:
		if req.outputTokens > 0 {
			_, err = s.accounts.Limiter.Carry(ctx, h.taken, now, req.outputTokens)
		}
	case h.carried:
		err = s.accounts.Limiter.Adjust(ctx, h.taken, req.outputTokens-h.taken.Reserved)
	default:
		err = s.accounts.Limiter.Adjust(ctx, h.taken, req.usedTokens-h.taken.Reserved)
	}
	if err != nil {
		s.log.Warn("rate limit tokens not corrected", "request_id", req.ID, "error", err)
	}
}

// rateHold is a running request's count against its rate limits. The
// request is counted (its whole reserve) in the minute it starts in; while
// it runs, each later minute it runs in counts its output reserve as well
// (ratelimit.Limiter.Carry), from the minute's start (a timer) or from its
// first output in that minute, whichever comes first; settleRate corrects
// the last.
type rateHold struct {
	svc *Service
	// window is taken's, read without the lock on every event.
	window atomic.Int64

	mu     sync.Mutex
	taken  ratelimit.Taken
	output int64 // the output reserve, carried into each later minute
	// carried: taken is a later minute's, holding the output reserve only.
	carried bool
	done    bool
	timer   *time.Timer
}

// follow carries the count into the current minute when the request's
// minute has ended. It is called on each piece of the answer, before it is
// sent, and by the timer; a nil hold does nothing.
func (h *rateHold) follow() {
	if h == nil {
		return
	}
	now := h.svc.now()
	if ratelimit.WindowOf(now) <= h.window.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || ratelimit.WindowOf(now) <= h.taken.Window {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	taken, err := h.svc.accounts.Limiter.Carry(ctx, h.taken, now, h.output)
	if err != nil {
		// What was not counted only makes the minute laxer; the next
		// piece of the answer tries again.
		h.svc.log.Warn("rate limit tokens not carried into the next minute", "error", err)
		return
	}
	h.taken, h.carried = taken, true
	h.window.Store(taken.Window)
}

// tick is the timer's: it follows, and sets the timer again for the next
// minute's start (also when the clock had not reached this one's: a clock
// set back).
func (h *rateHold) tick() {
	h.follow()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.arm(h.svc.now())
	}
}

// arm sets the timer that carries the count into the next minute at its
// start, by the service's clock. Call it with h.mu held.
func (h *rateHold) arm(now time.Time) {
	end := time.Unix((ratelimit.WindowOf(now)+1)*int64(ratelimit.Window/time.Second), 0)
	d := end.Sub(now)
	if h.timer == nil {
		h.timer = time.AfterFunc(d, h.tick)
	} else {
		h.timer.Reset(d)
	}
}

// HeaderError is an error whose answer carries headers besides those
// of its envelope (a rate limit's, on a 429 rate_limited).
type HeaderError struct {
	Err    error
	Header map[string]string
}

func (e *HeaderError) Error() string { return e.Err.Error() }

func (e *HeaderError) Unwrap() error { return e.Err }

// RateLimit is one kind of limit a request was counted against (requests
// or tokens a minute), as its tightest counter reports it.
type RateLimit struct {
	// Kind is "requests" or "tokens".
	Kind             string
	Limit, Remaining int64
	Reset            time.Time
}

// RateHeaders adds a client API's own headers reporting a request's rate
// limits (Anthropic's anthropic-ratelimit-* on Messages) to h, which has
// the gateway's x-ratelimit-* already.
type RateHeaders interface {
	AddRateHeaders(h map[string]string, limits []RateLimit)
}

// rateHeaders reports the tightest of usages: the gateway's x-ratelimit-*
// (limit, remaining, reset as a duration such as 1.5s), for requests when
// a counter has an rpm and for tokens when one has a tpm, and the client
// API's own (api; nil: none).
func rateHeaders(usages []ratelimit.Usage, now time.Time, api RateHeaders) map[string]string {
	h := map[string]string{}
	// The tightest counter with a limit of each kind.
	var req, tok *ratelimit.Usage
	for i := range usages {
		u := &usages[i]
		if u.Limit.RPM > 0 && (req == nil || u.Limit.RPM-u.Requests < req.Limit.RPM-req.Requests) {
			req = u
		}
		if u.Limit.TPM > 0 && (tok == nil || u.Limit.TPM-u.Tokens < tok.Limit.TPM-tok.Tokens) {
			tok = u
		}
	}
	var limits [2]RateLimit
	n := 0
	set := func(kind string, limit, left int64, reset time.Time) {
		h["x-ratelimit-limit-"+kind] = strconv.FormatInt(limit, 10)
		h["x-ratelimit-remaining-"+kind] = strconv.FormatInt(left, 10)
		h["x-ratelimit-reset-"+kind] = max(reset.Sub(now), 0).Round(time.Millisecond).String()
		limits[n] = RateLimit{Kind: kind, Limit: limit, Remaining: left, Reset: reset}
		n++
	}
	if req != nil {
		r, _ := req.Remaining()
		set("requests", req.Limit.RPM, r, req.Reset)
	}
	if tok != nil {
		_, t := tok.Remaining()
		set("tokens", tok.Limit.TPM, t, tok.Reset)
	}
	if api != nil && n > 0 {
		api.AddRateHeaders(h, limits[:n])
	}
	return h
}
