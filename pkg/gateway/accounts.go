package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/buzzgate/buzzgate/internal/storecall"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// seed puts a config project's balance and key limits into the ledger, once
// per process and, inside the ledger, only the first time ever: after that
// the ledger (the admin tool, the spend) is the truth. It also imports the
// project's config keys into the key store, by hash and with their
// ConfigKeyID, which is what lets the admin tool find a config key by its id
// and revoke it (authentication asks the key store about config keys too).
func (s *Service) seed(ctx context.Context, c *Caller) error {
	if !c.FromConfig || s.accounts.Ledger == nil {
		return nil
	}
	if _, done := s.seeded.Load(c.Project.ID); done {
		return nil
	}
	limits := make(map[string]*int64, len(c.Project.Keys))
	for _, k := range c.Project.Keys {
		limits[billing.ConfigKeyID(s.accounts.Pepper, k.Key)] = billing.USDPtrToNanos(k.Limit)
	}
	if err := s.accounts.Ledger.Seed(ctx, c.Project.ID, billing.USDPtrToNanos(c.Project.Balance), limits); err != nil {
		return err
	}
	if ks := s.accounts.Keys; ks != nil {
		for _, k := range c.Project.Keys {
			err := ks.ImportKey(ctx, c.Project.ID, billing.HashKey(s.accounts.Pepper, k.Key), billing.ConfigKeyID(s.accounts.Pepper, k.Key))
			switch {
			case errors.Is(err, billing.ErrKeyConflict):
				// The store knows the key under another project or id (a
				// key moved between projects in the config): the config
				// decides who it is, as authentication does; the store's
				// record stays as the admin tool left it.
				s.log.Warn("a config key is in the key store under another project or id", "project", c.Project.ID, "key_id", billing.ConfigKeyID(s.accounts.Pepper, k.Key))
			case err != nil:
				return err
			}
		}
	}
	s.seeded.Store(c.Project.ID, struct{}{})
	return nil
}

// Account is the caller's account as the 402 decision reads it (the
// project's balance and spend, the key's spend and limit, the current
// periods' spend), with a config project's balance and key limits seeded
// first, so that a project that has not made a request yet shows what the
// config gives it. The read is bounded as the 402 decision's is.
func (s *Service) Account(ctx context.Context, c *Caller) (billing.Account, error) {
	if s.accounts.Ledger == nil {
		return billing.Account{}, BillingUnavailable(errors.New("no ledger"))
	}
	ctx, cancel := storecall.Bound(ctx, 10*time.Second, s.ledgerLocal)
	defer cancel()
	if err := s.seed(ctx, c); err != nil {
		return billing.Account{}, BillingUnavailable(err)
	}
	acct, err := s.accounts.Ledger.Account(ctx, c.Project.ID, c.BillingKeyID)
	if err != nil {
		return billing.Account{}, BillingUnavailable(err)
	}
	return acct, nil
}

// checkBalance refuses a new request (402) when the project's prepaid
// balance or the key's limit is spent. It runs after the idempotency lookup,
// so that a replay of a completed request is served whatever the balance.
// A request of a bounded account is marked to have its bill applied with
// its price (Request.settleAtPrice).
func (s *Service) checkBalance(ctx context.Context, req *Request) error {
	c := req.Caller
	if s.accounts.Ledger == nil {
		return nil
	}
	// A store that does not answer must not hold an admission slot for the
	// request's whole ceiling: 503 after a bounded wait.
	ctx, cancel := storecall.Bound(ctx, 10*time.Second, s.ledgerLocal)
	defer cancel()
	if err := s.seed(ctx, c); err != nil {
		return BillingUnavailable(err)
	}
	acct, err := s.accounts.Ledger.Account(ctx, c.Project.ID, c.BillingKeyID)
	if err != nil {
		return BillingUnavailable(err)
	}
	switch err := acct.Check(); {
	case errors.Is(err, billing.ErrInsufficientBalance):
		return llm.Errorf(llm.CodeInsufficientBalance, "", "the project's prepaid balance is spent; add funds to continue")
	case errors.Is(err, billing.ErrKeyLimitReached):
		return llm.Errorf(llm.CodeKeyLimitReached, "", "this API key has reached its spend limit")
	case err != nil:
		return BillingUnavailable(err)
	}
	pr := ProjectRates(c.Project, acct)
	req.projectRates = pr
	now := s.now()
	if err := budgetSpent(pr.Budget, acct.PeriodSpent, "the project's", now); err != nil {
		return err
	}
	if err := budgetSpent(c.KeyRates.Budget, acct.KeyPeriodSpent, "this API key's", now); err != nil {
		return err
	}
	req.settleAtPrice = acct.BalanceNanos != nil || acct.KeyLimitNanos != nil || pr.Budget != nil || c.KeyRates.Budget != nil
	return nil
}

// ProjectRates are a project's rpm, tpm and budget: the config's, or for
// a project the config gives none of them, those the admin tool set
// (acct.ProjectRates).
func ProjectRates(p *catalog.Project, acct billing.Account) billing.Rates {
	if r := (billing.Rates{RPM: p.RPM, TPM: p.TPM, Budget: p.Budget}); r != (billing.Rates{}) {
		return r
	}
	return acct.ProjectRates
}

// budgetSpent is the 402 of a budget whose current period's spend reached
// its amount (nil: none, or not reached).
func budgetSpent(b *catalog.Budget, spent [billing.NumPeriods]int64, whose string, now time.Time) error {
	if b == nil {
		return nil
	}
	p, ok := billing.ParsePeriod(b.Period)
	if !ok || spent[p] < billing.USDToNanos(b.Amount) {
		return nil
	}
	return llm.Errorf(llm.CodeBudgetExceeded, "", "%s budget for this %s (UTC) is spent: $%s of $%s; it renews at %s",
		whose, p, llm.USD(billing.NanosToUSD(spent[p])), llm.USD(b.Amount),
		p.End(now).Format(time.RFC3339))
}
