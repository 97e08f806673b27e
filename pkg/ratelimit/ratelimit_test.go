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
	t.Run("a request running into the next window counts there", func(t *testing.T) {
		l := newLimiter(t)
		c := []Counter{{Scope: "k", ID: "key-" + t.Name(), Limit: Limit{RPM: 10, TPM: 1000}}}
		// 100 tokens of prompt and up to 300 of output, at 10:00:30.
		tk, _, err := l.Take(ctx, now, c, 400)
		if err != nil {
			t.Fatal(err)
		}
		// Still running at 10:01:05: its output reserve counts in 10:01,
		// not as a request (rpm), with no limit check.
		next := now.Add(35 * time.Second)
		carried, err := l.Carry(ctx, tk, next, 300)
		if err != nil || carried.Window != tk.Window+1 || carried.Reserved != 300 {
			t.Fatalf("Carry = %+v, %v; want window %d, 300 reserved", carried, err, tk.Window+1)
		}
		if again, err := l.Carry(ctx, carried, next.Add(time.Second), 300); err != nil || again.Window != carried.Window || again.Reserved != 300 {
			t.Fatalf("Carry within the same window = %+v, %v; want it unchanged", again, err)
		}
		if _, u, err := l.Take(ctx, next, c, 701); !errors.Is(err, ErrLimited) || u[0].Tokens != 300 {
			t.Fatalf("a take of 701 beside the carried 300: %+v, %v; want ErrLimited at 300", u, err)
		}
		// It ends having produced 250: 10:01 is corrected, and has 750 left.
		if err := l.Adjust(ctx, carried, 250-300); err != nil {
			t.Fatal(err)
		}
		if _, u, err := l.Take(ctx, next, c, 750); err != nil || u[0].Tokens != 1000 || u[0].Requests != 1 {
			t.Fatalf("after the correction: %+v, %v; want 1000 tokens and 1 request counted", u, err)
		}
		// A request that ends in a later window than it was counted in
		// (nothing carried while it ran) counts its tokens there.
		tk2, _, err := l.Take(ctx, next.Add(50*time.Second), []Counter{{Scope: "k", ID: "key2-" + t.Name(), Limit: Limit{TPM: 1000}}}, 100)
		if err != nil {
			t.Fatal(err)
		}
		later := next.Add(3 * time.Minute)
		if _, err := l.Carry(ctx, tk2, later, 900); err != nil {
			t.Fatal(err)
		}
		if _, u, err := l.Take(ctx, later, tk2.Counters, 101); !errors.Is(err, ErrLimited) || u[0].Tokens != 900 {
			t.Fatalf("a take of 101 beside the 900 ended there: %+v, %v; want ErrLimited at 900", u, err)
		}
	})
}

func TestMemory(t *testing.T) {
	runLimiter(t, func(*testing.T) Limiter { return NewMemory() })
}
