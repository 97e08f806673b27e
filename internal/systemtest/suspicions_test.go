package systemtest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// Whole-system checks of what a request costs and gets at the edges of its
// life: a JSON answer cut by the request's ceiling, a budget overshot by
// requests in flight, and a slow JSON answer under Lambda.

// TestTimedOutJSONAnswerIsBilled: a non-streaming request whose provider
// had started its output when the request's ceiling passed is answered 504
// request_timeout, and billed for what the provider produced up to the cut
// (the provider bills it): one ledger entry whose tokens are the prompt and
// the text read so far, at the route's prices. A keyed one leaves a
// tombstone: its retry is a 409, with no second provider call and no
// second bill.
func TestTimedOutJSONAnswerIsBilled(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		name := "unkeyed"
		if keyed {
			name = "keyed"
		}
		t.Run(name, func(t *testing.T) {
			// The ceiling leaves room for the provider call and its first
			// output on a loaded machine; the stall then lasts until it.
			g := newGateway(t, setup{extraYAML: "server: {request_timeout: 1s}\n"})
			g.ups[0].Script(providertest.Response{Text: []string{"one", " two"}, Cut: &providertest.Cut{After: 1, How: providertest.CutStall}})
			var header []string
			if keyed {
				header = []string{"Idempotency-Key", key(t)}
			}
			e := expectError(t, g.post(t, chatBody(""), header...), 504, "request_timeout", "")
			if e.Error.Type != "timeout_error" {
				t.Errorf("type %q, want timeout_error", e.Error.Type)
			}
			g.settle(t)
			tot := totals(t, g.accounts).Total
			if tot.Requests != 1 || tot.CompletionTokens < 1 || tot.PromptTokens < 1 {
				t.Fatalf("ledger %+v: want one entry for the prompt and the output produced before the cut", tot)
			}
			// p0's prices: 1 and 2 USD per million tokens (1,000 and 2,000
			// nano-USD a token).
			if want := tot.PromptTokens*1000 + tot.CompletionTokens*2000; tot.CostNanos != want {
				t.Errorf("cost %d nano-USD, want %d for %+v", tot.CostNanos, want, tot)
			}
			if !keyed {
				return
			}
			expectError(t, g.post(t, chatBody(""), header...), 409, "idempotency_replay_unavailable", "")
			g.settle(t)
			if calls, tot := g.ups[0].Calls(), totals(t, g.accounts).Total; calls != 1 || tot.Requests != 1 {
				t.Errorf("after the retry: %d provider calls, ledger %+v; want one of each", calls, tot)
			}
		})
	}
}

// TestBudgetOvershootBounded: a budget is checked, not locked, as a
// balance is. Requests that passed the check while the period's spend was
// under the budget all run, and together may spend past it: the overshoot
// is at most what the requests already in flight cost. Each is billed
// exactly once, and the first request checked after their bills is
// refused with 402 budget_exceeded before any provider call.
func TestBudgetOvershootBounded(t *testing.T) {
	for _, b := range backends {
		for _, c := range []struct {
			name string
			s    setup
		}{
			{"project", setup{projectYAML: "    budget: {amount: 0.00002, period: day}\n"}},
			{"key", setup{keyYAML: "budget: {amount: 0.00002, period: month}"}},
		} {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				store, acc := b.new(t)
				c.s.store, c.s.accounts = store, acc
				g := newGateway(t, c.s)
				// Three requests in flight at once, each costing 14,000
				// nano-USD against a budget of 20,000: all three passed
				// the check while nothing was spent.
				const n, cost, budget = 3, 14000, 20000
				arrived := make(chan int, n)
				gate := make(chan struct{})
				release := sync.OnceFunc(func() { close(gate) })
				t.Cleanup(release)
				g.ups[0].SetHandler(func(call int, _ providertest.Request) providertest.Response {
					arrived <- call
					<-gate
					return providertest.Response{}
				})
				answers := make(chan answer, n)
				for i := range n {
					go func() { answers <- call(context.Background(), g.url, chatBody(fmt.Sprintf(`"n":%d`, i))) }()
				}
				for range n {
					select {
					case <-arrived:
					case <-time.After(10 * time.Second):
						t.Fatalf("only %d of %d requests reached the provider", g.ups[0].Calls(), n)
					}
				}
				release()
				for range n {
					if a := <-answers; a.err != nil || a.status != 200 {
						t.Fatalf("a request in flight: %v %d %s", a.err, a.status, a.body)
					}
				}
				g.settle(t)
				tot := totals(t, acc).Total
				if tot.Requests != n || tot.CostNanos != n*cost {
					t.Fatalf("ledger %+v, want %d requests billed once each", tot, n)
				}
				// The overshoot happened, and is bounded by the requests in
				// flight: spend <= (spend at their check, 0) + their cost.
				if over := tot.CostNanos - budget; over <= 0 || over > n*cost {
					t.Errorf("spent %d nano-USD of a %d budget", tot.CostNanos, budget)
				}
				a := mustCall(t, g.url, chatBody(`"n":99`))
				if a.status != 402 || a.code != "budget_exceeded" {
					t.Errorf("after the in-flight requests' bills: %d %q, want 402 budget_exceeded", a.status, a.code)
				}
				if calls := g.ups[0].Calls(); calls != n {
					t.Errorf("%d provider calls, want %d: the refused request reached the provider", calls, n)
				}
			})
		}
	}
}
