package systemtest_test

import (
	"context"
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

var _ = context.Background
var _ = time.Second
