package memledger_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/buzzgate/buzzgate/internal/gcbench"

	"testing"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/billingtest"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
)

var pepper = []byte("test pepper")

func TestLedger(t *testing.T) {
	billingtest.Run(t, func(t *testing.T) billing.Ledger { return memledger.New(memledger.Options{Pepper: pepper}) })
}

func TestKeyStore(t *testing.T) {
	billingtest.RunKeyStore(t, pepper, func(t *testing.T) billing.KeyStore {
		return memledger.New(memledger.Options{Pepper: pepper})
	})
}

func TestHolds(t *testing.T) {
	billingtest.RunHolds(t, func(t *testing.T) billingtest.Ledger { return memledger.New(memledger.Options{Pepper: pepper}) })
}

// The store keeps entries packed (no pointers); what Entry and Totals give
// back is what was billed, to the nanosecond, for any time a bill can carry.
func TestEntriesComeBackWhole(t *testing.T) {
	ctx := t.Context()
	s := memledger.New(memledger.Options{Pepper: pepper})
	ats := []time.Time{
		time.Date(2026, 12, 1, 19, 45, 1, 123456789, time.FixedZone("x", 3600)),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(2400, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Now(), // with a monotonic reading
	}
	for i, at := range ats {
		e := billing.Entry{
			RequestID: fmt.Sprintf("req-%d", i), Project: "proj", KeyID: fmt.Sprintf("key-%d", i%2),
			Model: "gpt-4o-mini", Provider: fmt.Sprintf("prov-%d", i), PromptTokens: 1 << 40, CompletionTokens: i,
			CostNanos: int64(i) * 1e12, At: at,
		}
		if err := s.Bill(ctx, e); err != nil {
			t.Fatal(err)
		}
		got, err := s.Entry(ctx, e.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if want := billing.NormalizeEntry(e); !reflect.DeepEqual(got, want) {
			t.Fatalf("Entry gave %+v, want %+v", got, want)
		}
		if err := s.Bill(ctx, e); err != nil {
			t.Fatalf("the same bill again: %v", err)
		}
		e.Provider = "other"
		if err := s.Bill(ctx, e); !errors.Is(err, billing.ErrLedgerCollision) {
			t.Fatalf("another payload under the same request id: %v", err)
		}
	}
	tot, err := s.Totals(ctx, "proj", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if tot.Total.CostNanos != 0+3e12 || tot.ByKey["key-1"].CostNanos != 3e12 || tot.ByKey["key-0"].CostNanos != 0 {
		t.Fatalf("totals %+v", tot)
	}
}

// BenchmarkCollect is the collector's work with 200,000 bills in the
// ledger (the memory ledger keeps every one): one runtime.GC a loop, which
// marks the whole heap (gcbench.Collect).
func BenchmarkCollect(b *testing.B) {
	ctx := context.Background()
	s := memledger.New(memledger.Options{Pepper: pepper})
	at := time.Now()
	for i := range 200_000 {
		e := billing.Entry{
			RequestID: fmt.Sprintf("req_%026d", i), Project: "proj", KeyID: "key_1",
			Model: "gpt-4o-mini", Provider: "openai", PromptTokens: 12, CompletionTokens: 90,
			CostNanos: 1234, At: at.Add(time.Duration(i)),
		}
		if err := s.Bill(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	gcbench.Collect(b, s)
}
