package billing_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

func TestBalanceAndCredit(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	if got := billing.Balance(nil, 5); got != nil {
		t.Errorf("Balance of no credit = %d, want nil (unlimited)", *got)
	}
	if got := billing.Balance(n(100), 130); got == nil || *got != -30 {
		t.Errorf("Balance(100, 130) = %v, want -30 (an overshoot)", got)
	}
	if got := billing.Credit(40, nil); got != nil {
		t.Errorf("Credit with no remaining = %d, want nil (unlimited)", *got)
	}
	// SetBalance's credit leaves exactly the remaining amount.
	credit := billing.Credit(40, n(60))
	if got := billing.Balance(credit, 40); got == nil || *got != 60 {
		t.Errorf("Balance(Credit(40, 60), 40) = %v, want 60", got)
	}
}

func TestValidateSeed(t *testing.T) {
	ids, err := billing.ValidateSeed("p", map[string]*int64{"k3": nil, "k1": nil, "k2": nil})
	if err != nil || !slices.Equal(ids, []string{"k1", "k2", "k3"}) {
		t.Errorf("ValidateSeed = %v, %v; want the key ids in order", ids, err)
	}
	if _, err := billing.ValidateSeed("p", map[string]*int64{"": nil}); !errors.Is(err, billing.ErrInvalid) {
		t.Errorf("ValidateSeed with an empty key id: %v, want ErrInvalid", err)
	}
	if _, err := billing.ValidateSeed("", nil); !errors.Is(err, billing.ErrInvalid) {
		t.Errorf("ValidateSeed of an empty project: %v, want ErrInvalid", err)
	}
}

func TestCollisionDecisions(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	e := billing.Entry{RequestID: "r", Project: "p", KeyID: "k", Model: "m", Provider: "a", CostNanos: 7, At: at}
	h := billing.Hold{RequestID: "r", Project: "p", KeyID: "k", Model: "m", At: at, Deadline: at.Add(time.Minute)}
	other := e
	other.CostNanos++
	for name, c := range map[string]struct {
		err, want error
	}{
		"the same bill again":          {billing.CheckBilled(e, e), nil},
		"another bill":                 {billing.CheckBilled(e, other), billing.ErrLedgerCollision},
		"the bill of an unpriced hold": {billing.CheckPriced(h, nil, e), nil},
		"the bill at its price":        {billing.CheckPriced(h, &e, e), nil},
		"the bill at another price":    {billing.CheckPriced(h, &other, e), billing.ErrLedgerCollision},
		"the bill of another's hold":   {billing.CheckPriced(billing.Hold{RequestID: "r", Project: "q", KeyID: "k", Model: "m", At: at}, nil, e), billing.ErrLedgerCollision},
		"a hold retried, later due":    {billing.CheckHeld(h, billing.Hold{RequestID: "r", Project: "p", KeyID: "k", Model: "m", At: at, Deadline: at.Add(time.Hour)}), nil},
		"another hold":                 {billing.CheckHeld(h, billing.Hold{RequestID: "r", Project: "p", KeyID: "k2", Model: "m", At: at}), billing.ErrLedgerCollision},
		"a key imported again":         {billing.CheckImported(billing.KeyRecord{Project: "p", KeyID: "cfg_1"}, "p", "cfg_1"), nil},
		"a key of another project":     {billing.CheckImported(billing.KeyRecord{Project: "p", KeyID: "cfg_1"}, "q", "cfg_1"), billing.ErrKeyConflict},
		"a key under another id":       {billing.CheckImported(billing.KeyRecord{Project: "p", KeyID: "cfg_1"}, "p", "cfg_2"), billing.ErrKeyConflict},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", name, c.err, c.want)
		}
	}
}
