package router

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// counting is a fake provider that can count tokens.
type counting struct{ *fake }

func (c counting) Caps() llm.Caps { return llm.Caps{Counter: c} }

func (counting) CountTokens(context.Context, *llm.TokenCountRequest) (*llm.TokenCount, error) {
	return &llm.TokenCount{InputTokens: 1, Body: []byte(`{"input_tokens":1}`)}, nil
}

// TestTokenCounters: the live candidates that can count, in plan order with
// their depth; a provider in its cool-down and one that cannot count are
// left out, and nothing is called.
func TestTokenCounters(t *testing.T) {
	w := newWorld(t, nil)
	providers := map[string]llm.Provider{}
	for n, f := range w.fakes {
		providers[n] = f
		if n == "b" || n == "c" || n == "d" {
			providers[n] = counting{f}
		}
	}
	r, err := New(w.cfg, providers, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func(body string) (out []string) {
		plan, err := r.Plan(TargetOf(decode(t, body)), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.TokenCounters(plan) {
			if c.Counter == nil || !reflect.DeepEqual(plan.Candidates[c.Depth].Route, c.Route) {
				t.Errorf("%s: candidate %+v", body, c)
			}
			out = append(out, c.Route.Provider)
		}
		return out
	}
	if got := names(plain); !cmp.Equal(got, []string{"b", "c", "d"}) {
		t.Errorf("plan order: %v", got)
	}
	if got := names(withGateway(`"provider":{"order":["d","a"]}`)); !cmp.Equal(got, []string{"d", "b", "c"}) {
		t.Errorf("provider.order d, a: %v", got)
	}
	for range 3 { // health.failure_threshold
		r.health.Failure("b")
	}
	if got := names(plain); !cmp.Equal(got, []string{"c", "d"}) {
		t.Errorf("b in its cool-down: %v", got)
	}
	if got := names(withGateway(`"provider":{"only":["a"]}`)); got != nil {
		t.Errorf("only a, which cannot count: %v", got)
	}
	if calls := w.calls(); len(calls) != 0 {
		t.Errorf("providers called: %v", calls)
	}
}
