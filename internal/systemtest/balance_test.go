package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// oneCost is what one answer of the fake upstream costs at p0's prices, in
// nano-USD (1.4e-05 USD).
const oneCost = 14000

// accountView is the balance and key limit GET /api/v1/usage reports.
type accountView struct {
	Balance struct {
		Balance *float64 `json:"balance"`
		Spent   float64  `json:"spent"`
	} `json:"balance"`
	Key struct {
		ID    string   `json:"id"`
		Limit *float64 `json:"limit"`
		Spent float64  `json:"spent"`
		Left  *float64 `json:"left"`
	} `json:"key"`
}

// usageOf asks GET /api/v1/usage with apiKey and returns the raw body and
// its balance and key limit.
func usageOf(t *testing.T, url, apiKey string) (string, accountView) {
	t.Helper()
	u := send(t, http.MethodGet, url+"/api/v1/usage", "", "Authorization", "Bearer "+apiKey)
	var v accountView
	if err := json.Unmarshal([]byte(u.body), &v); err != nil || u.status != 200 {
		t.Fatalf("usage: %d %s", u.status, u.body)
	}
	return u.body, v
}

func f64(v float64) *float64 { return &v }

// TestUsageShowsBalance: GET /api/v1/usage tells a client what its project
// has left of its prepaid balance and what its key has left of its limit,
// before the project's first request (the config's amounts) and after
// each bill, with either store; null where there is no bound.
func TestUsageShowsBalance(t *testing.T) {
	for _, b := range backends {
		// With an rpm in the config, admission reads no account: the
		// usage endpoint reads it itself.
		for _, rates := range []string{"", "    rpm: 1000\n"} {
			t.Run(b.name+"/rates="+strings.TrimSpace(rates), func(t *testing.T) {
				store, acc := b.new(t)
				g := newGateway(t, setup{store: store, accounts: acc, balance: "0.00005", keyLimit: "0.00002", projectYAML: rates})
				keyID := billing.ConfigKeyID(acc.Pepper, testKey)
				type view struct {
					Balance *float64
					Spent   float64
					KeyID   string
					Limit   *float64
					KeySpnt float64
					Left    *float64
				}
				flat := func(v accountView) view {
					return view{v.Balance.Balance, v.Balance.Spent, v.Key.ID, v.Key.Limit, v.Key.Spent, v.Key.Left}
				}
				_, before := usageOf(t, g.url, testKey)
				if diff := cmp.Diff(view{f64(0.00005), 0, keyID, f64(0.00002), 0, f64(0.00002)}, flat(before)); diff != "" {
					t.Errorf("before any request (-want +got):\n%s", diff)
				}
				for i := range 2 {
					if a := mustCall(t, g.url, chatBody(fmt.Sprintf(`"n":%d`, i))); a.status != 200 {
						t.Fatalf("request %d: %d %s", i, a.status, a.body)
					}
				}
				g.settle(t)
				body, after := usageOf(t, g.url, testKey)
				// 0.00005 - 2 * 0.000014; the key's limit passed by 0.000008,
				// so nothing is left of it.
				if diff := cmp.Diff(view{f64(0.000022), 0.000028, keyID, f64(0.00002), 0.000028, f64(0)}, flat(after)); diff != "" {
					t.Errorf("after two bills (-want +got):\n%s\n%s", diff, body)
				}
				if !strings.Contains(body, `"balance":{"balance":0.000022,"spent":0.000028}`) {
					t.Errorf("the balance is not written as a plain decimal: %s", body)
				}
				if a := mustCall(t, g.url, chatBody(`"n":9`)); a.status != 402 || a.code != "key_limit_reached" {
					t.Errorf("the key's limit is spent: %d %q, want 402 key_limit_reached", a.status, a.code)
				}
				// Another key of the project has no limit: the same balance,
				// its own spend.
				_, other := usageOf(t, g.url, otherKey)
				if diff := cmp.Diff(view{f64(0.000022), 0.000028, billing.ConfigKeyID(acc.Pepper, otherKey), nil, 0, nil}, flat(other)); diff != "" {
					t.Errorf("a key without a limit (-want +got):\n%s", diff)
				}
				// A project without a balance is unlimited: null.
				raw, unlimited := usageOf(t, g.url, otherProjectKey)
				if unlimited.Balance.Balance != nil || unlimited.Key.Limit != nil || unlimited.Key.Left != nil ||
					!strings.Contains(raw, `"balance":{"balance":null,"spent":0}`) {
					t.Errorf("an unlimited project: %s", raw)
				}
			})
		}
	}
}

// TestUsageAmountsPlainDecimal: every amount GET /api/v1/usage writes is
// a plain decimal, as an answer's usage.cost is, even below a millionth
// of a dollar (where encoding/json would write an exponent, 5e-7).
func TestUsageAmountsPlainDecimal(t *testing.T) {
	store, acc := backends[0].new(t)
	g := newGateway(t, setup{store: store, accounts: acc, keyYAML: "budget: {amount: 0.0000145, period: day}"})
	if a := mustCall(t, g.url, chatBody("")); a.status != 200 || !strings.Contains(a.body, `"cost":0.000014`) {
		t.Fatalf("the answer: %d %s", a.status, a.body)
	}
	g.settle(t)
	body, _ := usageOf(t, g.url, testKey)
	for _, want := range []string{`"cost":0.000014`, `"amount":0.0000145`, `"left":0.0000005`, `"key_spent":0.000014`} {
		if !strings.Contains(body, want) {
			t.Errorf("usage lacks %s: %s", want, body)
		}
	}
	if strings.Contains(body, "e-") {
		t.Errorf("usage writes an exponent: %s", body)
	}
}

// TestBalanceOverdrawBound: the balance (and a key's limit) is checked,
// not locked. A request is admitted while the balance is above zero and
// billed in full, so the balance can end below zero by at most what the
// requests admitted before it ran out cost: N requests in flight at once
// against a balance that covers one end it at -(N-1) times their cost, each
// billed once; one request at a time, the last one admitted overdraws by
// less than its own cost. Either way the next request is refused with 402
// before any provider call.
func TestBalanceOverdrawBound(t *testing.T) {
	for _, b := range backends {
		for _, c := range []struct {
			name string
			s    setup
			code string
			// remaining is what is left of the bound, in nano-USD.
			remaining func(billing.Account) int64
		}{
			{"balance", setup{balance: "0.000014"}, "insufficient_balance", func(a billing.Account) int64 { return *a.BalanceNanos }},
			{"key limit", setup{keyLimit: "0.000014"}, "key_limit_reached", func(a billing.Account) int64 { return *a.KeyLimitNanos - a.KeySpentNanos }},
		} {
			t.Run(b.name+"/"+c.name+"/concurrent", func(t *testing.T) {
				store, acc := b.new(t)
				c.s.store, c.s.accounts = store, acc
				g := newGateway(t, c.s)
				const n = 4
				// All n pass the check while nothing is spent, and are at
				// the provider together.
				inFlightTogether(t, g, n)
				g.settle(t)
				if tot := totals(t, acc).Total; tot.Requests != n || tot.CostNanos != n*oneCost {
					t.Fatalf("ledger %+v, want %d requests billed once each", tot, n)
				}
				// The bound: what the requests in flight cost, less the one
				// the balance covered.
				acct, err := acc.Ledger.Account(context.Background(), "proj", billing.ConfigKeyID(acc.Pepper, testKey))
				if err != nil || acct.BalanceNanos == nil && acct.KeyLimitNanos == nil {
					t.Fatalf("account %+v, %v", acct, err)
				}
				if got, bound := c.remaining(acct), int64(-(n-1)*oneCost); got < bound || got >= 0 {
					t.Errorf("%d requests in flight against %s: %d nano-USD left, want within [%d, 0)", n, c.name, got, bound)
				}
				a := mustCall(t, g.url, chatBody(`"n":99`))
				if a.status != 402 || a.code != c.code {
					t.Errorf("after the in-flight requests' bills: %d %q, want 402 %s", a.status, a.code, c.code)
				}
				if calls := g.ups[0].Calls(); calls != n {
					t.Errorf("%d provider calls, want %d: the refused request reached the provider", calls, n)
				}
			})
		}
		// One request at a time, as an admin-created project with a
		// balance of $0.00002 is used: the second request is admitted
		// with 0.000006 left and overdraws by 0.000008, less than its own
		// cost; the third is refused.
		t.Run(b.name+"/balance/sequential", func(t *testing.T) {
			store, acc := b.new(t)
			g := newGateway(t, setup{store: store, accounts: acc, balance: "0.00002"})
			for i := range 2 {
				if a := mustCall(t, g.url, chatBody(fmt.Sprintf(`"n":%d`, i))); a.status != 200 {
					t.Fatalf("request %d: %d %s", i, a.status, a.body)
				}
				g.settle(t)
			}
			if a := mustCall(t, g.url, chatBody(`"n":2`)); a.status != 402 || a.code != "insufficient_balance" {
				t.Errorf("the third request: %d %q, want 402 insufficient_balance", a.status, a.code)
			}
			body, v := usageOf(t, g.url, testKey)
			if v.Balance.Balance == nil || *v.Balance.Balance != -0.000008 || !strings.Contains(body, `"balance":-0.000008`) {
				t.Errorf("the balance after two bills of 0.000014 against 0.00002: %s", body)
			}
		})
	}
}

// TestCostsPlainDecimal: every USD amount the gateway writes is a plain
// decimal, never an exponent, even below a millionth of a dollar: the
// answers' usage.cost on all three APIs (JSON and streams, translated and
// passed through), the models list's prices, GET /api/v1/usage, and the
// access log.
func TestCostsPlainDecimal(t *testing.T) {
	l := memledger.New(memledger.Options{})
	g := &gateway{logs: &syncBuffer{}, accounts: httpapi.Accounts{Ledger: l, Keys: l}}
	p0, claude := providertest.New(t), providertest.NewAnthropic(t)
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: p0, api: openai, base_url: %q}
  - {name: claude, api: anthropic, base_url: %q}
models:
  - id: m
    routes:
      - {provider: p0, model: up-0, input_price: 0.01, output_price: 0.02}
  - id: a
    routes:
      - {provider: claude, model: claude-x, input_price: 0.01, output_price: 0.02}
  - id: tiny
    routes:
      - {provider: p0, model: up-t, input_price: 0.00000001, output_price: 0.00000002, cache_write_1h_price: 0.0000003, tool_prices: {web_search: 0.0000004}}
projects:
  - id: proj
    keys: [{key: %s}]
`, p0.URL(), claude.URL(), testKey))
	if err != nil {
		t.Fatal(err)
	}
	g.cfg, g.env = cfg, map[string]string{}
	g.url = g.instance(t, nil)
	// A JSON number with an exponent (not a string such as a hex id).
	exponent := regexp.MustCompile(`[:,\[]-?[0-9]+(\.[0-9]+)?[eE][-+]?[0-9]`)
	auth := []string{"Authorization", "Bearer " + testKey, "anthropic-version", ""}
	for _, c := range []struct{ name, path, body string }{
		{"chat", "/api/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"chat stream", "/api/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
		{"messages translated", "/api/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages translated stream", "/api/v1/messages", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages", "/api/v1/messages", `{"model":"a","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages stream", "/api/v1/messages", `{"model":"a","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/api/v1/responses", `{"model":"m","input":"hi"}`},
		{"responses stream", "/api/v1/responses", `{"model":"m","stream":true,"input":"hi"}`},
	} {
		a := send(t, http.MethodPost, g.url+c.path, c.body, auth...)
		if a.status != 200 || !regexp.MustCompile(`"cost":0\.0000000?[1-9]`).MatchString(a.body) || exponent.MatchString(a.body) {
			t.Errorf("%s: %d, want a cost under a millionth of a dollar as a plain decimal:\n%s", c.name, a.status, a.body)
		}
	}
	for _, path := range []string{"/api/v1/models", "/api/v1/models/tiny"} {
		a := send(t, http.MethodGet, g.url+path, "", auth...)
		if a.status != 200 || !strings.Contains(a.body, `"input_price":0.00000001`) || !strings.Contains(a.body, `"web_search":0.0000004`) ||
			!strings.Contains(a.body, `"cache_write_1h_price":0.0000003`) || exponent.MatchString(a.body) {
			t.Errorf("%s: %d %s", path, a.status, a.body)
		}
	}
	g.settle(t)
	body, _ := usageOf(t, g.url, testKey)
	if !strings.Contains(body, `"a":{"requests":2,"prompt_tokens":20,"completion_tokens":4,"cost":0.00000028}`) || exponent.MatchString(body) {
		t.Errorf("usage: %s", body)
	}
	if logs := g.logs.String(); !strings.Contains(logs, `"cost":0.0000`) || exponent.MatchString(logs) {
		t.Errorf("the access log writes a cost with an exponent:\n%s", logs)
	}
}
