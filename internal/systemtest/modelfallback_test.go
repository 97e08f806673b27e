package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// newModelFallbackGateway serves, in front of OpenAI upstreams p0..p3 and
// an Anthropic one p4 (ups[0..4]):
//   - model a (route p0) falling back to model b (route p1), at other prices;
//   - model claude (route p4, Messages passed through) falling back to b;
//   - model wide (p0..p3) falling back to wide2 and wide3 (p0..p3 each,
//     other upstream models): 12 routes, more than one request may call.
func newModelFallbackGateway(t *testing.T) (*gateway, *memledger.Store) {
	t.Helper()
	g := &gateway{logs: &syncBuffer{}, env: map[string]string{}}
	var cfg strings.Builder
	cfg.WriteString("providers:\n")
	for i := 0; i < 4; i++ {
		up := providertest.New(t)
		g.ups = append(g.ups, up)
		fmt.Fprintf(&cfg, "  - {name: p%d, api: openai, base_url: %q}\n", i, up.URL())
	}
	claude := providertest.NewAnthropic(t)
	g.ups = append(g.ups, claude)
	fmt.Fprintf(&cfg, "  - {name: p4, api: anthropic, base_url: %q}\n", claude.URL())
	cfg.WriteString(`models:
  - id: a
    fallbacks: [b]
    routes: [{provider: p0, model: up-a, input_price: 1, output_price: 2}]
  - id: b
    routes: [{provider: p1, model: up-b, input_price: 3, output_price: 7}]
  - id: claude
    fallbacks: [b]
    routes: [{provider: p4, model: claude-up, input_price: 2, output_price: 4}]
`)
	for _, id := range []string{"wide", "wide2", "wide3"} {
		fmt.Fprintf(&cfg, "  - id: %s\n", id)
		if id == "wide" {
			cfg.WriteString("    fallbacks: [wide2, wide3]\n")
		}
		cfg.WriteString("    routes:\n")
		for i := 0; i < 4; i++ {
			fmt.Fprintf(&cfg, "      - {provider: p%d, model: %s-%d, input_price: 1, output_price: 1}\n", i, id, i)
		}
	}
	cfg.WriteString("projects:\n  - id: proj\n    keys: [{key: " + testKey + "}]\n")
	cfg.WriteString("health: {failure_threshold: 20}\n")
	c, err := catalog.Parse([]byte(cfg.String()))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, cfg.String())
	}
	g.cfg = c
	l := memledger.New(memledger.Options{})
	g.accounts = httpapi.Accounts{Ledger: l, Keys: l}
	g.url = g.instance(t, nil)
	return g, l
}

// chatUsage is the usage of a whole Chat Completions answer.
type chatUsage struct {
	Usage struct {
		PromptTokens     int     `json:"prompt_tokens"`
		CompletionTokens int     `json:"completion_tokens"`
		Cost             float64 `json:"cost"`
	} `json:"usage"`
}

// TestModelFallback: model a's only route fails with a 500 before output;
// model b answers, named in x-gateway-model, with b's provider and route
// depth, billed at b's prices in the answer and in the ledger alike; a
// retry with the same Idempotency-Key gets that answer byte for byte, its
// headers included, and calls no upstream.
func TestModelFallback(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			g, ledger := newModelFallbackGateway(t)
			g.ups[0].Script(providertest.Response{Status: 500})
			body := `{"model":"a","messages":[{"role":"user","content":"Say hello"}]}`
			if stream {
				body = `{"model":"a","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello"}]}`
			}
			first := mustCall(t, g.url, body, "Idempotency-Key", "fallback-1")
			if first.status != 200 || first.header.Get("X-Gateway-Model") != "b" || first.provider != "p1" || first.depth != "1" {
				t.Fatalf("status %d model %q provider %q depth %q: %s", first.status, first.header.Get("X-Gateway-Model"), first.provider, first.depth, first.body)
			}
			if got := g.ups[1].Requests()[0].JSON["model"]; got != "up-b" {
				t.Errorf("model b's upstream was sent model %q, want up-b", got)
			}
			var u chatUsage
			if stream {
				evs := strings.Split(strings.TrimSpace(first.body), "\n\n")
				if evs[len(evs)-1] != "data: [DONE]" {
					t.Errorf("stream ends %q", evs[len(evs)-1])
				}
				if err := json.Unmarshal([]byte(strings.TrimPrefix(evs[len(evs)-2], "data: ")), &u); err != nil {
					t.Fatalf("usage chunk %q: %v", evs[len(evs)-2], err)
				}
			} else if err := json.Unmarshal([]byte(first.body), &u); err != nil {
				t.Fatal(err)
			}
			// b's route prices: $3 per million prompt tokens, $7 per million
			// completion tokens (a's would be $1 and $2).
			want := billing.USDToNanos(float64(3*u.Usage.PromptTokens+7*u.Usage.CompletionTokens) / 1e6)
			if u.Usage.PromptTokens == 0 || billing.USDToNanos(u.Usage.Cost) != want {
				t.Errorf("usage %+v: want the cost at model b's prices, %d nano-USD", u.Usage, want)
			}
			g.settle(t)
			e, err := ledger.Entry(context.Background(), first.reqID)
			if err != nil || e.CostNanos != want || e.Provider != "p1" {
				t.Errorf("ledger entry %+v, %v; want %d nano-USD from p1", e, err, want)
			}

			again := mustCall(t, g.url, body, "Idempotency-Key", "fallback-1")
			if again.status != 200 || again.body != first.body || again.replayed != "true" || again.reqID != first.reqID {
				t.Errorf("replay: status %d replayed %q request id %q (want %q), body equal %v", again.status, again.replayed, again.reqID, first.reqID, again.body == first.body)
			}
			for _, h := range []string{"X-Gateway-Model", "X-Gateway-Provider", "X-Gateway-Route-Depth", "Content-Type"} {
				if again.header.Get(h) != first.header.Get(h) {
					t.Errorf("replay %s: %q, want %q", h, again.header.Get(h), first.header.Get(h))
				}
			}
			if diff := cmp.Diff([]int{1, 1, 0, 0, 0}, g.calls()); diff != "" {
				t.Errorf("upstream calls (-want +got):\n%s", diff)
			}
			g.settle(t)
			if tot, err := ledger.Totals(context.Background(), "proj", e.At.Add(-1), e.At.Add(1)); err != nil || tot.ByModel["a"].Requests != 1 {
				t.Errorf("ledger totals %+v, %v: want one request, under the model asked for", tot, err)
			}
		})
	}
}

// TestModelFallbackAnswerFromFirstModel: when the model's own route
// answers, its answer names it.
func TestModelFallbackAnswerFromFirstModel(t *testing.T) {
	g, _ := newModelFallbackGateway(t)
	a := mustCall(t, g.url, `{"model":"a","messages":[{"role":"user","content":"Say hello"}]}`)
	if a.status != 200 || a.header.Get("X-Gateway-Model") != "a" || a.provider != "p0" || a.depth != "0" {
		t.Errorf("status %d model %q provider %q depth %q: %s", a.status, a.header.Get("X-Gateway-Model"), a.provider, a.depth, a.body)
	}
	if diff := cmp.Diff([]int{1, 0, 0, 0, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

// TestModelFallbackCrossesProtocols: a Messages request for claude goes to
// its Anthropic route as the client wrote it; when that fails, model b's
// OpenAI route gets it translated, and the client gets a Messages answer.
func TestModelFallbackCrossesProtocols(t *testing.T) {
	g, _ := newModelFallbackGateway(t)
	g.ups[4].Script(providertest.Response{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`})
	a := callPath(t, g.url+"/api/v1/messages", `{"model":"claude","max_tokens":64,"messages":[{"role":"user","content":"Say hello"}]}`,
		"anthropic-version", "2023-06-01", "Content-Type", "application/json")
	if a.status != 200 || a.header.Get("X-Gateway-Model") != "b" || a.provider != "p1" {
		t.Fatalf("status %d model %q provider %q: %s", a.status, a.header.Get("X-Gateway-Model"), a.provider, a.body)
	}
	var m struct {
		Type    string
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal([]byte(a.body), &m); err != nil || m.Type != "message" || len(m.Content) != 1 || m.Content[0].Text != "Hello world" {
		t.Errorf("answer %s (%v): want a Messages answer from p1", a.body, err)
	}
	if diff := cmp.Diff([]int{0, 1, 0, 0, 1}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

// TestModelFallbackUntranslatable: a Messages request that only its own
// protocol can carry (a document block) goes to claude's Anthropic route;
// when that fails, model b's OpenAI route, which cannot carry it, is
// skipped without a call, and the request fails as every route tried did.
func TestModelFallbackUntranslatable(t *testing.T) {
	g, _ := newModelFallbackGateway(t)
	g.ups[4].Script(providertest.Response{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`})
	body := `{"model":"claude","max_tokens":64,"messages":[{"role":"user","content":[` +
		`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The sky is blue."}},{"type":"text","text":"What colour is the sky?"}]}]}`
	a := callPath(t, g.url+"/api/v1/messages", body, "anthropic-version", "2023-06-01", "Content-Type", "application/json")
	if a.status != 502 || !strings.Contains(a.body, "all_providers_failed") {
		t.Errorf("status %d: %s, want 502 all_providers_failed", a.status, a.body)
	}
	if diff := cmp.Diff([]int{0, 0, 0, 0, 1}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
	// The same request for b alone is refused before any call.
	a = callPath(t, g.url+"/api/v1/messages", strings.Replace(body, `"claude"`, `"b"`, 1), "anthropic-version", "2023-06-01", "Content-Type", "application/json")
	if a.status != 400 || !strings.Contains(a.body, "messages[0].content[0].type") {
		t.Errorf("model b: status %d: %s, want 400 naming the document block", a.status, a.body)
	}
}

// TestModelFallbackStops: the bounds of one request hold across its models.
func TestModelFallbackStops(t *testing.T) {
	t.Run("eight calls in all", func(t *testing.T) {
		g, _ := newModelFallbackGateway(t)
		for i := 0; i < 4; i++ {
			g.ups[i].SetDefault(providertest.Response{Status: 500})
		}
		resp := g.post(t, `{"model":"wide","messages":[{"role":"user","content":"Say hello"}]}`)
		expectError(t, resp, 502, "all_providers_failed", "")
		// wide's four routes, then wide2's four; wide3 is never reached.
		if diff := cmp.Diff([]int{2, 2, 2, 2, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
		var models []string
		for _, up := range g.ups[:4] {
			for _, r := range up.Requests() {
				models = append(models, fmt.Sprint(r.JSON["model"]))
			}
		}
		if strings.Contains(strings.Join(models, ","), "wide3") {
			t.Errorf("models called %q: wide3 is past the ceiling", models)
		}
	})
	t.Run("allow_fallbacks false", func(t *testing.T) {
		g, _ := newModelFallbackGateway(t)
		g.ups[0].Script(providertest.Response{Status: 500})
		resp := g.post(t, `{"model":"a","messages":[{"role":"user","content":"Say hello"}],"gateway":{"routing":{"allow_fallbacks":false}}}`)
		expectError(t, resp, 502, "all_providers_failed", "")
		if diff := cmp.Diff([]int{1, 0, 0, 0, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
	})
	t.Run("provider.ignore", func(t *testing.T) {
		g, _ := newModelFallbackGateway(t)
		g.ups[0].Script(providertest.Response{Status: 500})
		resp := g.post(t, `{"model":"a","messages":[{"role":"user","content":"Say hello"}],"provider":{"ignore":["p1"]}}`)
		expectError(t, resp, 502, "all_providers_failed", "")
		if diff := cmp.Diff([]int{1, 0, 0, 0, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
	})
	t.Run("output started", func(t *testing.T) {
		g, _ := newModelFallbackGateway(t)
		g.ups[0].Script(providertest.Response{Text: []string{"Hel", "lo", " there"}, Cut: &providertest.Cut{After: 1, How: providertest.CutError}})
		resp := g.post(t, `{"model":"a","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Model") != "a" {
			t.Fatalf("status %d model %q", resp.StatusCode, resp.Header.Get("X-Gateway-Model"))
		}
		evs := events(t, resp)
		if last := evs[len(evs)-1]; last == "[DONE]" || !strings.Contains(last, `"error"`) {
			t.Errorf("stream ends %q: want an error event", last)
		}
		if diff := cmp.Diff([]int{1, 0, 0, 0, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
	})
}

// TestModelsListFallbacks: GET /api/v1/models names each model's fallbacks.
func TestModelsListFallbacks(t *testing.T) {
	g, _ := newModelFallbackGateway(t)
	for id, want := range map[string]string{"a": `"fallbacks":["b"]`, "wide": `"fallbacks":["wide2","wide3"]`} {
		a := send(t, "GET", g.url+"/api/v1/models/"+id, "", "Authorization", "Bearer "+testKey)
		if a.status != 200 || !strings.Contains(a.body, want) {
			t.Errorf("GET %s: %d %s, want %s", id, a.status, a.body, want)
		}
	}
	if a := send(t, "GET", g.url+"/api/v1/models/b", "", "Authorization", "Bearer "+testKey); strings.Contains(a.body, "fallbacks") {
		t.Errorf("GET b: %s: a model without fallbacks lists none", a.body)
	}
}
