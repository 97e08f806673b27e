package gateway

import (
	"context"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

// Admitted is a request admitted by AdmitFree.
type Admitted struct {
	slot Admission
	// Header are the rate-limit headers for the answer (x-ratelimit-*,
	// and the client API's own, rh); nil when no limit applies.
	Header map[string]string
	// Account is the account read to find the project's limits (nil when
	// none was read), which the caller may use rather than read it again.
	Account *billing.Account
}

// Release gives the admission slot back; only its first call does.
func (a *Admitted) Release() { a.slot.Release() }

// AdmitFree admits a request of c that generates nothing and is never
// billed (a token count, a usage report) as a generation is admitted:
// one of the server.max_in_flight slots and of the project's
// max_in_flight (429 capacity when none is free, without waiting), and
// one request of the project's and the key's rpm (429 rate_limited when
// one is used up this minute). It reserves no tokens of a tpm, since it
// makes none, and checks no balance or budget, since it costs nothing.
// The account is read only when the project's limits may be the admin
// tool's (a config project without rpm, tpm or budget); that read
// failing is 503 billing_unavailable. The caller releases the slot.
func (s *Service) AdmitFree(ctx context.Context, c *Caller, rh RateHeaders) (*Admitted, error) {
	slot, err := s.admit(c.Project)
	if err != nil {
		return nil, err
	}
	a := &Admitted{slot: slot}
	req := &Request{Caller: c, RateHeaders: rh, free: true}
	if s.accounts.Limiter != nil {
		rates := ProjectRates(c.Project, billing.Account{})
		if rates == (billing.Rates{}) && s.accounts.Ledger != nil {
			acct, err := s.Account(ctx, c)
			if err != nil {
				a.Release()
				return nil, err
			}
			a.Account, rates = &acct, ProjectRates(c.Project, acct)
		}
		req.projectRates = rates
	}
	if err := s.takeRate(ctx, req); err != nil {
		a.Release()
		return nil, err
	}
	a.Header = req.rateHeaders
	return a, nil
}
