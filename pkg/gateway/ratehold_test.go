package gateway

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/testclock"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/ratelimit"
)

// A request's count against a tpm goes where its tokens are produced: the
// minute it ends in counts its output whether or not its count followed it
// there while it ran (the answer's pieces, the timer), and a minute it
// ran in is corrected to its real output once it ends.
func TestRateHoldFollowsTheRequest(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 12, 7, 10, 0, 50, 0, time.UTC)
	key := []ratelimit.Counter{{Scope: "k", ID: "key", Limit: ratelimit.Limit{TPM: 1000}}}
	for _, c := range []struct {
		name string
		// follow: a piece of the answer goes out in the next minute.
		follow bool
	}{{"followed", true}, {"not followed", false}} {
		t.Run(c.name, func(t *testing.T) {
			clock := testclock.New(start)
			limiter := ratelimit.NewMemory()
			s := &Service{now: clock.Now, accounts: Accounts{Limiter: limiter}, log: slog.New(slog.DiscardHandler)}
			req := &Request{Caller: &Caller{Project: &catalog.Project{ID: "p"}, BillingKeyID: "key", KeyRates: billing.Rates{TPM: 1000}}, MaxOutputTokens: 300}
			if err := s.takeRate(ctx, req); err != nil {
				t.Fatal(err)
			}
			clock.Advance(20 * time.Second) // 10:01:10
			if c.follow {
				req.rate.follow()
				// The output reserve, 300, holds the new minute.
				if _, u, err := limiter.Take(ctx, clock.Now(), key, 701); !errors.Is(err, ratelimit.ErrLimited) || u[0].Tokens != 300 {
					t.Fatalf("beside the followed request: %+v, %v; want ErrLimited at 300", u, err)
				}
			}
			req.usedTokens, req.outputTokens = 10+120, 120
			s.settleRate(req)
			// The minute it ended in holds its 120 of output.
			if _, u, err := limiter.Take(ctx, clock.Now(), key, 881); !errors.Is(err, ratelimit.ErrLimited) || u[0].Tokens != 120 {
				t.Fatalf("after it ended: %+v, %v; want ErrLimited at 120", u, err)
			}
			req.rate.follow() // after the end: nothing more counted
			if _, u, err := limiter.Take(ctx, clock.Now(), key, 880); err != nil || u[0].Tokens != 1000 {
				t.Fatalf("a take of what is left: %+v, %v", u, err)
			}
		})
	}
}
