package router

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// fallbackWorld has model m (routes a, b) falling back to n (routes c, then
// a again with another upstream model) and then o (route d, and b with m's
// own upstream model, which is not called twice). c is in the eu with zero
// retention; d collects no data.
func fallbackWorld(t *testing.T, scripts map[string][]step) *world {
	t.Helper()
	cfg, err := catalog.Parse([]byte(`
providers:
  - {name: a, api: simulated, region: us}
  - {name: b, api: simulated, region: us}
  - {name: c, api: simulated, region: eu, zdr: true}
  - {name: d, api: simulated, region: eu, data_collection: deny}
models:
  - id: m
    fallbacks: [n, o]
    routes:
      - {provider: a, model: ma, input_price: 1, output_price: 1}
      - {provider: b, model: mb, input_price: 1, output_price: 1}
  - id: n
    routes:
      - {provider: c, model: nc, input_price: 8, output_price: 16}
      - {provider: a, model: na, input_price: 2, output_price: 2}
  - id: o
    fallbacks: [m]
    routes:
      - {provider: d, model: od, input_price: 5, output_price: 5}
      - {provider: b, model: mb, input_price: 5, output_price: 5}
health: {failure_threshold: 100, cooldown: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{cfg: cfg, fakes: map[string]*fake{}}
	providers := map[string]llm.Provider{}
	for _, n := range []string{"a", "b", "c", "d"} {
		s := scripts[n]
		if s == nil {
			s = []step{ok}
		}
		w.fakes[n] = &fake{name: n, script: s}
		providers[n] = w.fakes[n]
	}
	if w.r, err = New(cfg, providers, nil, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

// planned is a plan's candidates as "model/provider/upstream".
func planned(p *Plan) []string {
	var out []string
	for _, c := range p.Candidates {
		out = append(out, c.Model+"/"+c.Route.Provider+"/"+c.Route.Model)
	}
	return out
}

func TestPlanModelFallbacks(t *testing.T) {
	tests := []struct {
		name string
		body string
		pol  Policy
		want []string
	}{
		{"in order, shared route once", plain, Policy{}, []string{"m/a/ma", "m/b/mb", "n/c/nc", "n/a/na", "o/d/od"}},
		// Only the requested model's fallbacks are followed: o's own
		// fallback (m) adds nothing to a request for m, and a request for o
		// gets o's routes then m's.
		{"direct only", `{"model":"o","messages":[{"role":"user","content":"hi"}]}`, Policy{}, []string{"o/d/od", "o/b/mb", "m/a/ma"}},
		{"only applies to fallbacks", withGateway(`"provider":{"only":["c","d"]}`), Policy{}, []string{"n/c/nc", "o/d/od"}},
		{"ignore applies to fallbacks", withGateway(`"provider":{"ignore":["a"]}`), Policy{}, []string{"m/b/mb", "n/c/nc", "o/d/od"}},
		{"order sorts within each model", withGateway(`"provider":{"order":["b","a"]}`), Policy{}, []string{"m/b/mb", "m/a/ma", "n/a/na", "n/c/nc", "o/d/od"}},
		{"floor sorts within each model", `{"model":"m:floor","messages":[{"role":"user","content":"hi"}]}`, Policy{}, []string{"m/a/ma", "m/b/mb", "n/a/na", "n/c/nc", "o/d/od"}},
		{"data policy applies to fallbacks", plain, Policy{Demand: llm.DemandZDR}, []string{"n/c/nc", "o/d/od"}},
		{"residency applies to fallbacks", plain, Policy{Residency: "eu"}, []string{"n/c/nc", "o/d/od"}},
		{"allow_fallbacks false: the first route only", withGateway(`"gateway":{"routing":{"allow_fallbacks":false}}`), Policy{}, []string{"m/a/ma"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := fallbackWorld(t, nil)
			plan, err := w.r.Plan(TargetOf(decode(t, tt.body)), tt.pol)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, planned(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if plan.Model.ID != decode(t, tt.body).Model {
				t.Errorf("plan.Model = %q, want the requested model", plan.Model.ID)
			}
		})
	}

	// only/ignore that leave no route in any of the models is the
	// request's fault.
	w := fallbackWorld(t, nil)
	_, err := w.r.Plan(TargetOf(decode(t, withGateway(`"provider":{"ignore":["a","b","c","d"]}`))), Policy{})
	if e := llm.AsError(err); e.Code != llm.CodeInvalidRequest || e.Param != "provider" {
		t.Errorf("ignore everything: err = %v, want invalid_request on provider", err)
	}
}

// TestStartModelFallback: when every route of the model fails before
// output, the fallback model's routes answer, priced at their own prices
// and named in the answer.
func TestStartModelFallback(t *testing.T) {
	w := fallbackWorld(t, map[string][]step{"a": {fail500}, "b": {fail500}})
	req := decode(t, plain)
	plan, err := w.r.Plan(TargetOf(req), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ans, attempts, err := w.r.Start(context.Background(), plan, req)
	if err != nil {
		t.Fatal(err)
	}
	defer ans.Close()
	for {
		if _, err := ans.Next(); err != nil {
			break
		}
	}
	if ans.ModelID != "n" || ans.Provider != "c" || ans.Depth != 2 || ans.Calls != 3 {
		t.Errorf("answer model %q provider %q depth %d calls %d, want n, c, 2, 3", ans.ModelID, ans.Provider, ans.Depth, ans.Calls)
	}
	if len(attempts) != 2 {
		t.Errorf("failed attempts %d, want 2", len(attempts))
	}
	// n's route c: 10 prompt tokens at $8/M and 4 completion tokens at $16/M.
	if got, want := ans.Usage().Cost, (10*8.0+4*16.0)/1e6; got != want {
		t.Errorf("cost %v, want %v (the fallback route's prices)", got, want)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, w.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestStartModelFallbackStops: the rules that stop fallback within a
// model stop it across models too.
func TestStartModelFallbackStops(t *testing.T) {
	t.Run("ceiling spans models", func(t *testing.T) {
		w := fallbackWorld(t, map[string][]step{"a": {fail500}, "b": {fail500}, "c": {fail500}, "d": {fail500}})
		req := decode(t, withGateway(`"gateway":{"retry":{"max_total_attempts":3}}`))
		plan, err := w.r.Plan(TargetOf(req), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		_, attempts, err := w.r.Start(context.Background(), plan, req)
		if llm.AsError(err).Code != llm.CodeAllProvidersFailed || len(attempts) != 3 {
			t.Errorf("err %v after %d calls, want all_providers_failed after 3", err, len(attempts))
		}
	})
	t.Run("a provider's 400 is not tried elsewhere", func(t *testing.T) {
		w := fallbackWorld(t, map[string][]step{"a": {fail500}, "b": {reject}})
		req := decode(t, plain)
		plan, err := w.r.Plan(TargetOf(req), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = w.r.Start(context.Background(), plan, req)
		if llm.AsError(err).Code != llm.CodeProviderRejected {
			t.Errorf("err %v, want provider_rejected", err)
		}
		if diff := cmp.Diff(map[string]int{"a": 1, "b": 1}, w.calls()); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
	})
	t.Run("allow_fallbacks false", func(t *testing.T) {
		w := fallbackWorld(t, map[string][]step{"a": {fail500}})
		req := decode(t, withGateway(`"gateway":{"routing":{"allow_fallbacks":false}}`))
		plan, err := w.r.Plan(TargetOf(req), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = w.r.Start(context.Background(), plan, req)
		if llm.AsError(err).Code != llm.CodeAllProvidersFailed {
			t.Errorf("err %v, want all_providers_failed", err)
		}
		if diff := cmp.Diff(map[string]int{"a": 1}, w.calls()); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
	})
}

// TestStartModelFallbackHealth: a model whose providers are all in their
// cool-down is answered by its fallback without a call to them; when no
// provider of any of the models is live, the request is refused before
// any call.
func TestStartModelFallbackHealth(t *testing.T) {
	w := fallbackWorld(t, nil)
	for range 100 {
		w.r.health.Failure("a")
		w.r.health.Failure("b")
	}
	req := decode(t, plain)
	plan, err := w.r.Plan(TargetOf(req), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ans, attempts, err := w.r.Start(context.Background(), plan, req)
	if err != nil {
		t.Fatal(err)
	}
	ans.Close()
	if ans.ModelID != "n" || ans.Provider != "c" || len(attempts) != 0 {
		t.Errorf("answer from %s/%s after %d failed calls, want n/c after none", ans.ModelID, ans.Provider, len(attempts))
	}
	for range 100 {
		w.r.health.Failure("c")
		w.r.health.Failure("d")
	}
	w.fakes["c"].calls = 0
	_, _, err = w.r.Start(context.Background(), plan, req)
	if llm.AsError(err).Code != llm.CodeNoLiveProvider {
		t.Errorf("err %v, want no_live_provider", err)
	}
	if diff := cmp.Diff(map[string]int{}, w.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
