package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/buzzgate/buzzgate/internal/storecall"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/ratelimit"
)

// takeRate counts the request against its project's and key's rpm and tpm
// (the prompt's estimate and its max output tokens reserved), before any
// provider call: 429 rate_limited when one has no room this minute. It
// runs after the balance check, so a request refused for money is not
// counted. Its headers (x-ratelimit-*, and Anthropic's on Messages) go on
// the answer.
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
	reserve := int64(req.MaxOutputTokens)
	if req.Chat != nil {
		reserve += int64(llm.EstimateTokens(req.Chat.Size()))
	}
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
			what = fmt.Sprintf("tokens per minute (%d; this request reserves %d: its prompt's estimate and its max output tokens)", u.Limit.TPM, reserve)
		}
		return &llm.Error{Code: llm.CodeRateLimited, Message: "the " + whose + " " + what + " are used up; retry after the minute",
			RetryAfter: max(u.Reset.Sub(now), time.Second), Header: rateHeaders(usages, now, req.AnthropicRateHeaders)}
	case err != nil:
		return BillingUnavailable(err)
	}
	req.rate, req.rateHeaders = taken, rateHeaders(usages, now, req.AnthropicRateHeaders)
	return nil
}

// settleRate corrects the request's reserved tokens to the tokens its
// answer used (none when it was not answered), best effort.
func (s *Service) settleRate(req *Request) {
	if len(req.rate.Counters) == 0 || s.accounts.Limiter == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.accounts.Limiter.Adjust(ctx, req.rate, req.usedTokens-req.rate.Reserved); err != nil {
		s.log.Warn("rate limit tokens not corrected", "request_id", req.ID, "error", err)
	}
}

// rateHeaders reports the tightest of usages: OpenAI's x-ratelimit-*
// (limit, remaining, reset as a duration such as 1.5s), and with anthropic
// Anthropic's anthropic-ratelimit-* (reset as an RFC 3339 time), for
// requests when a counter has an rpm and for tokens when one has a tpm.
func rateHeaders(usages []ratelimit.Usage, now time.Time, anthropic bool) map[string]string {
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
	set := func(kind string, limit, left int64, reset time.Time) {
		h["x-ratelimit-limit-"+kind] = strconv.FormatInt(limit, 10)
		h["x-ratelimit-remaining-"+kind] = strconv.FormatInt(left, 10)
		h["x-ratelimit-reset-"+kind] = max(reset.Sub(now), 0).Round(time.Millisecond).String()
		if anthropic {
			h["anthropic-ratelimit-"+kind+"-limit"] = strconv.FormatInt(limit, 10)
			h["anthropic-ratelimit-"+kind+"-remaining"] = strconv.FormatInt(left, 10)
			h["anthropic-ratelimit-"+kind+"-reset"] = reset.UTC().Format(time.RFC3339)
		}
	}
	if req != nil {
		r, _ := req.Remaining()
		set("requests", req.Limit.RPM, r, req.Reset)
	}
	if tok != nil {
		_, t := tok.Remaining()
		set("tokens", tok.Limit.TPM, t, tok.Reset)
	}
	return h
}
