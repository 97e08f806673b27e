package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/ratelimit"
)

// countingLedger counts its Account reads.
type countingLedger struct {
	billing.Ledger
	accounts int
}

func (l *countingLedger) Account(ctx context.Context, project, keyID string) (billing.Account, error) {
	l.accounts++
	return l.Ledger.Account(ctx, project, keyID)
}

// TestAdmitFree: a request that is never billed takes the generations'
// slots and one request of the project's and the key's rpm, no tokens of
// a tpm; it reads the account only when the project's limits may be the
// admin tool's.
func TestAdmitFree(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 7, 10, 0, 1, 0, time.UTC)
	ledger := &countingLedger{Ledger: memledger.New(memledger.Options{})}
	svc := New(Config{MaxInFlight: 2}, nil, nil, Accounts{Ledger: ledger, Limiter: ratelimit.NewMemory()}, nil, nil, func() time.Time { return now })
	caller := &Caller{Project: &catalog.Project{ID: "p", RPM: 2, TPM: 1}, BillingKeyID: "k", KeyRates: billing.Rates{RPM: 5}}

	a1, err := svc.AdmitFree(ctx, caller, apiHeaders{})
	if err != nil {
		t.Fatal(err)
	}
	if a1.Header["x-ratelimit-remaining-requests"] != "1" || a1.Header["x-ratelimit-remaining-tokens"] != "1" || a1.Header["api-requests-remaining"] != "1" {
		t.Errorf("headers %v: want one request of two left, and the one token of the tpm", a1.Header)
	}
	a2, err := svc.AdmitFree(ctx, &Caller{Project: &catalog.Project{ID: "q"}, BillingKeyID: "k2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.admit(nil); err == nil {
		t.Errorf("a generation was admitted with every slot taken")
	}
	if _, err := svc.AdmitFree(ctx, caller, nil); llm.AsError(err).Code != llm.CodeCapacity {
		t.Errorf("with every slot taken: %v, want capacity", err)
	}
	a1.Release()
	a1.Release() // a second release gives nothing back
	a3, err := svc.AdmitFree(ctx, caller, nil)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if len(svc.sem) != 2 {
		t.Errorf("%d slots held, want 2", len(svc.sem))
	}
	a3.Release()
	if _, err := svc.AdmitFree(ctx, caller, nil); llm.AsError(err).Code != llm.CodeRateLimited {
		t.Errorf("the project's third request in a minute of rpm 2: %v, want rate_limited", err)
	}
	if len(svc.sem) != 1 {
		t.Errorf("%d slots held after a refusal, want 1 (the refusal keeps none)", len(svc.sem))
	}
	a2.Release()
	// Project p has its limits in the config: no account read. Project q
	// has none: its account was read, for the admin tool's.
	if ledger.accounts != 1 {
		t.Errorf("%d account reads, want 1 (project q's)", ledger.accounts)
	}
}

// A project's own bound: its slots are taken with the instance's and given
// back with them, and the instance's slot is not kept when the project's
// bound refuses.
func TestAdmitProject(t *testing.T) {
	svc := New(Config{MaxInFlight: 3}, nil, nil, Accounts{}, nil, nil, nil)
	p := &catalog.Project{ID: "p", MaxInFlight: 1}
	a, err := svc.admit(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.admit(p); err == nil || !strings.Contains(err.Error(), "max_in_flight") {
		t.Fatalf("a second request of the project: %v, want its capacity error", err)
	}
	other, err := svc.admit(&catalog.Project{ID: "q"})
	if err != nil {
		t.Fatalf("another project: %v", err)
	}
	if len(svc.sem) != 2 {
		t.Errorf("%d instance slots held, want 2 (the refusal kept none)", len(svc.sem))
	}
	a.Release()
	if _, err := svc.admit(p); err != nil {
		t.Errorf("after the release: %v", err)
	}
	other.Release()
}
