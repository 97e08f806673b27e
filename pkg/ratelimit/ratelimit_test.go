package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// RunLimiter is the contract of a Limiter, run on each implementation.
func runLimiter(t *testing.T, newLimiter func(t *testing.T) Limiter) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 10, 0, 30, 0, time.UTC)
	t.Run("requests", func(t *testing.T) {
		l := newLimiter(t)
		c := []Counter{{Scope: "p", ID: "proj-" + t.Name(), Limit: Limit{RPM: 3}}}
		for i := range 3 {
			if _, u, err := l.Take(ctx, now, c, 0); err != nil || u[0].Requests != int64(i+1) {
				t.Fatalf("take %d: %+v, %v", i, u, err)
			}
		}
		_, u, err := l.Take(ctx, now, c, 0)
		if !errors.Is(err, ErrLimited) || u[0].Requests != 3 || !u[0].Reset.Equal(time.Date(2026, 12, 3, 10, 1, 0, 0, time.UTC)) {
			t.Fatalf("the fourth: %+v, %v; want ErrLimited at 3 until 10:01", u, err)
		}
		if _, _, err := l.Take(ctx, now.Add(30*time.Second), c, 0); err != nil {
			t.Fatalf("the next window: %v", err)
		}
	})
	t.Run("tokens, and the all-or-none of two counters", func(t *testing.T) {
		l := newLimiter(t)
		project := Counter{Scope: "p", ID: "proj-" + t.Name(), Limit: Limit{TPM: 1000}}
		key := Counter{Scope: "k", ID: "key-" + t.Name(), Limit: Limit{TPM: 500}}
		tk, u, err := l.Take(ctx, now, []Counter{project, key}, 400)
		if err != nil || u[0].Tokens != 400 || u[1].Tokens != 400 {
			t.Fatalf("first: %+v, %v", u, err)
		}
		// The key has 100 left: refused, and the project's count is given back.
		if _, u, err := l.Take(ctx, now, []Counter{project, key}, 200); !errors.Is(err, ErrLimited) || u[0].Limit.TPM != 500 {
			t.Fatalf("second: %+v, %v; want the key's refusal", u, err)
		}
		if _, u, err := l.Take(ctx, now, []Counter{project}, 600); err != nil || u[0].Tokens != 1000 {
			t.Fatalf("the project alone: %+v, %v; want 1000 counted (the refused take gave its 200 back)", u, err)
		}
		// The first request used 100 tokens, not 400: the key has 400 left.
		if err := l.Adjust(ctx, tk, -300); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.Take(ctx, now, []Counter{key}, 400); err != nil {
			t.Fatalf("after the correction: %v", err)
		}
		if _, _, err := l.Take(ctx, now, []Counter{{Scope: "k", ID: "other-" + t.Name(), Limit: Limit{TPM: 10}}}, 11); !errors.Is(err, ErrLimited) {
			t.Fatalf("a reserve over the whole limit: %v", err)
		}
	})
}

func TestMemory(t *testing.T) {
	runLimiter(t, func(*testing.T) Limiter { return NewMemory() })
}
