package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/ratelimit"
)

// backend is an idempotency store and the accounts, both in memory or both
// in one dynalite table (under the integration build tag), as the gateway
// runs them.
type backend struct {
	name string
	new  func(t testing.TB) (idempotency.Store, httpapi.Accounts)
}

var backends = []backend{
	{"memory", func(testing.TB) (idempotency.Store, httpapi.Accounts) {
		l := memledger.New(memledger.Options{Pepper: []byte("pepper")})
		return memstore.New(1 << 30), httpapi.Accounts{Ledger: l, Keys: l, Pepper: []byte("pepper"), Limiter: ratelimit.NewMemory()}
	}},
}

func costOf(t *testing.T, a answer) float64 {
	t.Helper()
	c, err := answerCost(a)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// answerCost is the usage.cost an answer carries (0 for an error answer).
func answerCost(a answer) (float64, error) {
	if a.status != 200 {
		return 0, nil
	}
	if strings.HasPrefix(a.body, "data:") {
		for _, ev := range strings.Split(a.body, "\n\n") {
			var ch struct {
				Usage *struct {
					Cost float64 `json:"cost"`
				} `json:"usage"`
			}
			if json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &ch) == nil && ch.Usage != nil {
				return ch.Usage.Cost, nil
			}
		}
		return 0, fmt.Errorf("a stream without its usage chunk: %q", a.body)
	}
	var c completion
	if err := json.Unmarshal([]byte(a.body), &c); err != nil {
		return 0, err
	}
	return c.Usage.Cost, nil
}

func totals(t *testing.T, acc httpapi.Accounts) billing.Totals {
	t.Helper()
	tot, err := acc.Ledger.Totals(context.Background(), "proj", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return tot
}

// TestBalanceAndLimit: a new request when the balance or the key's limit is
// spent is a 402 before any provider call, costing nothing; a replay of a
// completed request is still served.
func TestBalanceAndLimit(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range []struct {
				name, balance, limit, code string
			}{
				{"balance", "0.00002", "", "insufficient_balance"},
				{"key limit", "", "0.00002", "key_limit_reached"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					store, acc := b.new(t)
					// Each answer costs 1.4e-05 USD at p0's prices: two fit.
					g := newGateway(t, setup{store: store, accounts: acc, balance: tc.balance, keyLimit: tc.limit})
					first := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
					second := mustCall(t, g.url, chatBody(`"n":1`))
					if first.status != 200 || second.status != 200 {
						t.Fatalf("the first two requests: %d %d", first.status, second.status)
					}
					g.settle(t) // their bills are written after their answers
					refused := mustCall(t, g.url, chatBody(`"n":2`))
					if refused.status != 402 || refused.code != tc.code {
						t.Fatalf("a request after the money is spent: %d %q, want 402 %s", refused.status, refused.code, tc.code)
					}
					keyed := mustCall(t, g.url, chatBody(`"n":3`), "Idempotency-Key", key(t)+"-refused")
					if keyed.status != 402 {
						t.Fatalf("a keyed request after the money is spent: %d", keyed.status)
					}
					replay := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
					sameAnswer(t, first, replay)
					if diff := cmp.Diff([]int{2, 0}, g.calls()); diff != "" {
						t.Errorf("upstream calls (-want +got): a refused request reached a provider\n%s", diff)
					}
					g.settle(t)
					tot := totals(t, acc)
					if tot.Total.Requests != 2 || tot.Total.CostNanos != 28000 {
						t.Errorf("ledger %+v, want the two answers only (28000 nano-USD)", tot.Total)
					}
					// The 402 released the keyed record: with money again, the
					// same key runs normally.
					if tc.balance != "" {
						unlimited := (*int64)(nil)
						if err := acc.Ledger.SetBalance(context.Background(), "proj", unlimited); err != nil {
							t.Fatal(err)
						}
					} else if err := acc.Ledger.SetKeyLimit(context.Background(), "proj", billing.ConfigKeyID(acc.Pepper, testKey), nil); err != nil {
						t.Fatal(err)
					}
					again := mustCall(t, g.url, chatBody(`"n":3`), "Idempotency-Key", key(t)+"-refused")
					if again.status != 200 || again.replayed != "" {
						t.Errorf("the refused key after a top-up: %d replayed=%q", again.status, again.replayed)
					}
				})
			}
		})
	}
}

// TestLedgerMatchesAnswers: the ledger's total is the sum of usage.cost over
// the answers: failed requests cost nothing, a stream that failed after
// output started is billed for what it produced, replays are not billed.
func TestLedgerMatchesAnswers(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, acc := b.new(t)
			g := newGateway(t, setup{store: store, accounts: acc})
			g.ups[0].Script(
				providertest.Response{},
				providertest.Response{Status: 500},
				providertest.Response{Text: []string{"a", "b", "c"}, Cut: &providertest.Cut{After: 2, How: providertest.CutError}},
				providertest.Response{Text: []string{"a", "b"}, Cut: &providertest.Cut{After: 1, How: providertest.CutError}},
			)
			g.ups[1].Script(providertest.Response{Status: 503})
			bodies := []string{
				chatBody(""),      // p0 answers
				chatBody(`"n":1`), // p0 500, p1 503: 502, nothing billed
				chatBody(`"stream":true,"stream_options":{"include_usage":true}`), // p0 fails after output: billed for it
				chatBody(`"n":2`), // non-streaming failure after output: 502, nothing
				chatBody(`"stream":true,"stream_options":{"include_usage":true},"n":3`), // p0 answers a stream
			}
			var sum float64
			var billed int64
			for i, body := range bodies {
				a := mustCall(t, g.url, body, "Idempotency-Key", fmt.Sprintf("%s-%d", key(t), i))
				if c := costOf(t, a); c > 0 {
					sum += c
					billed++
				}
				// A replay is never billed.
				mustCall(t, g.url, body, "Idempotency-Key", fmt.Sprintf("%s-%d", key(t), i))
			}
			g.settle(t)
			tot := totals(t, acc)
			if tot.Total.Requests != billed || billing.USDToNanos(sum) != tot.Total.CostNanos || billed != 3 {
				t.Errorf("ledger %+v; the answers billed %d for %v USD (want 3 billed)", tot.Total, billed, sum)
			}
		})
	}
}

// TestOvershootBounded: many concurrent requests against a nearly spent
// balance: the overshoot is bounded by the requests in flight, and nothing
// is counted twice (spent equals the ledger's sum).
func TestOvershootBounded(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, acc := b.new(t)
			g := newGateway(t, setup{store: store, accounts: acc, balance: "0.0001"}) // about 7 answers
			g.ups[0].SetDefault(providertest.Response{FirstChunkDelay: 50 * time.Millisecond})
			const n = 30
			var wg sync.WaitGroup
			statuses := make([]int, n)
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					statuses[i] = call(context.Background(), g.url, chatBody(fmt.Sprintf(`"n":%d`, i))).status
				}(i)
			}
			wg.Wait()
			ok := 0
			for _, s := range statuses {
				if s == 200 {
					ok++
				} else if s != 402 {
					t.Errorf("status %d", s)
				}
			}
			g.settle(t)
			tot := totals(t, acc)
			acct, err := acc.Ledger.Account(context.Background(), "proj", billing.ConfigKeyID(acc.Pepper, testKey))
			if err != nil {
				t.Fatal(err)
			}
			if tot.Total.Requests != int64(ok) || acct.SpentNanos != tot.Total.CostNanos || tot.Total.CostNanos != int64(ok)*14000 {
				t.Errorf("%d answers; ledger %+v; account spent %d", ok, tot.Total, acct.SpentNanos)
			}
			if over := -*acct.BalanceNanos; over > n*14000 {
				t.Errorf("overshoot %d nano-USD beyond the requests in flight", over)
			}
			if a := mustCall(t, g.url, chatBody(`"n":99`)); a.status != 402 {
				t.Errorf("after the balance is spent: %d", a.status)
			}
			t.Logf("%d of %d answered; balance %d nano-USD", ok, n, *acct.BalanceNanos)
		})
	}
}

// TestCrashBetweenLedgerAndCompletion: the instance bills the answer, then
// dies before it completes the idempotency record; a retry on another
// instance is not run and not billed again.
func TestCrashBetweenLedgerAndCompletion(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, acc := b.new(t)
			dying := &silentOwner{Store: store}
			g := newGateway(t, setup{store: dying, accounts: acc, extraYAML: "idempotency: {lease: 200ms}\n"})
			survivor := g.instance(t, store)
			dying.kill() // its Complete and heartbeats are lost
			first := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
			if first.status != 200 {
				t.Fatalf("first: %d", first.status)
			}
			time.Sleep(400 * time.Millisecond)
			retry := mustCall(t, survivor, chatBody(""), "Idempotency-Key", key(t))
			if retry.status != 409 || retry.code != "idempotency_replay_unavailable" {
				t.Errorf("retry: %d %q", retry.status, retry.code)
			}
			// The dying instance keeps retrying its completion (in vain):
			// wait for the survivor only, and for the bill.
			g.apps[1].Finisher.Wait(context.Background())
			for deadline := time.Now().Add(10 * time.Second); totals(t, acc).Total.Requests == 0 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			if tot := totals(t, acc); tot.Total.Requests != 1 || tot.Total.CostNanos != 14000 {
				t.Errorf("ledger %+v, want the one answer billed once", tot.Total)
			}
			if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
				t.Errorf("upstream calls (-want +got):\n%s", diff)
			}
		})
	}
}

func getUsage(t *testing.T, url, query, apiKey string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/api/v1/usage"+query, nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func TestFeedbackAndUsage(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, acc := b.new(t)
			g := newGateway(t, setup{store: store, accounts: acc})
			a := mustCall(t, g.url, chatBody(""))
			mustCall(t, g.url, chatBody(`"n":1`), "Authorization", "Bearer "+otherKey)
			g.settle(t) // feedback needs a's bill, written after its answer
			fb := func(apiKey, body string, extra ...string) answer {
				req, _ := http.NewRequest(http.MethodPost, g.url+"/api/v1/feedback", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+apiKey)
				for i := 0; i+1 < len(extra); i += 2 {
					req.Header.Set(extra[i], extra[i+1])
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var e apiError
				json.NewDecoder(resp.Body).Decode(&e)
				return answer{status: resp.StatusCode, code: e.Error.Code}
			}
			body := fmt.Sprintf(`{"request_id":%q,"end_user":"u1","score":1,"label":"good"}`, a.reqID)
			for i, h := range [][]string{nil, {"Idempotency-Key", "fb"}, {"Idempotency-Key", "fb"}} {
				if r := fb(testKey, body, h...); r.status != 200 {
					t.Errorf("feedback %d: %d %q", i, r.status, r.code)
				}
			}
			got, err := acc.Ledger.Feedbacks(context.Background(), a.reqID)
			if err != nil || len(got) != 1 || got[0].Label != "good" {
				t.Errorf("feedback sent three times: %+v %v, want one record", got, err)
			}
			if r := fb(otherProjectKey, body); r.status != 404 {
				t.Errorf("feedback on another project's answer: %d", r.status)
			}
			if r := fb(testKey, `{"request_id":"x"}`); r.status != 400 || r.code != "invalid_request" {
				t.Errorf("feedback without end_user: %d %q", r.status, r.code)
			}

			g.settle(t)
			status, u := getUsage(t, g.url, "", testKey)
			if status != 200 {
				t.Fatalf("usage: %d %v", status, u)
			}
			total := u["total"].(map[string]any)
			if total["requests"] != 2.0 || math.Abs(total["cost"].(float64)-2.8e-05) > 1e-12 {
				t.Errorf("usage total %v", total)
			}
			byKey := u["by_key"].(map[string]any)
			byModel := u["by_model"].(map[string]any)
			if len(byKey) != 2 || byModel["m"].(map[string]any)["requests"] != 2.0 {
				t.Errorf("usage by key %v by model %v", byKey, byModel)
			}
			if status, _ := getUsage(t, g.url, "?from=yesterday", testKey); status != 400 {
				t.Errorf("bad from: %d", status)
			}
			if status, other := getUsage(t, g.url, "", otherProjectKey); status != 200 || other["total"].(map[string]any)["requests"] != 0.0 {
				t.Errorf("another project's usage: %d %v", status, other)
			}
		})
	}
}

// TestIssuedKeys: a key issued into the key store (hashed with the pepper)
// authenticates; once revoked it does not.
func TestIssuedKeys(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, acc := b.new(t)
			ctx := context.Background()
			if err := acc.Keys.CreateProject(ctx, "issued", nil); err != nil {
				t.Fatal(err)
			}
			raw, rec, err := acc.Keys.Issue(ctx, "issued")
			if err != nil {
				t.Fatal(err)
			}
			g := newGateway(t, setup{store: store, accounts: acc})
			if a := mustCall(t, g.url, chatBody(""), "Authorization", "Bearer "+raw); a.status != 200 {
				t.Fatalf("issued key: %d %s", a.status, a.body)
			}
			g.settle(t)
			if tot, _ := acc.Ledger.Totals(ctx, "issued", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); tot.ByKey[rec.KeyID].Requests != 1 {
				t.Errorf("the issued key's answer was not billed to it: %+v", tot)
			}
			if err := acc.Keys.Revoke(ctx, rec.KeyID); err != nil {
				t.Fatal(err)
			}
			if a := mustCall(t, g.url, chatBody(""), "Authorization", "Bearer "+raw); a.status != 401 {
				t.Errorf("revoked key: %d", a.status)
			}
		})
	}
}

// TestClientGoneAfterOutputIsBilled: an unkeyed client that leaves once
// the provider's answer has started made the provider produce, and bill,
// what it produced; the gateway bills it too, on every client API, whole
// or streamed, from the usage read so far.
func TestClientGoneAfterOutputIsBilled(t *testing.T) {
	apis := []struct{ name, path, body string }{
		{"chat", "/api/v1/chat/completions", chatBody("")},
		{"chat-stream", "/api/v1/chat/completions", chatBody(`"stream":true`)},
		{"messages", "/api/v1/messages", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"Say hello"}]}`},
		{"responses", "/api/v1/responses", `{"model":"m","input":"Say hello"}`},
	}
	for _, b := range backends {
		for _, api := range apis {
			t.Run(b.name+"/"+api.name, func(t *testing.T) {
				store, acc := b.new(t)
				g := newGateway(t, setup{store: store, accounts: acc})
				// Each attempt's client leaves once the upstream flushed the
				// answer's first piece (and a little more, for the gateway
				// to read it). An attempt whose log says the gateway had not
				// seen it is not billed, rightly: it is counted apart.
				started := 0
				for attempt := 0; attempt < 5 && started == 0; attempt++ {
					sent := make(chan struct{})
					g.ups[0].Script(providertest.Response{Text: []string{"a", "b", "c"}, ChunkDelay: time.Minute,
						Sent: func(i int) {
							if i == 0 {
								close(sent)
							}
						}})
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan answer, 1)
					go func() { done <- callURL(ctx, g.url+api.path, api.body) }()
					<-sent
					time.Sleep(50 * time.Millisecond)
					cancel()
					<-done
					line := waitLogLine(t, g, attempt+1)
					if line["status"] != 499.0 {
						t.Fatalf("attempt %d logged status %v, want 499", attempt, line["status"])
					}
					if _, ok := line["first_output_ms"]; ok {
						started++
						if cost, _ := line["cost"].(float64); cost <= 0 {
							t.Errorf("log line %v: want a cost", line)
						}
					}
				}
				if started == 0 {
					t.Fatal("in 5 attempts the client never left after the answer started")
				}
				g.settle(t)
				tot := totals(t, acc)
				acct, err := acc.Ledger.Account(context.Background(), "proj", billing.ConfigKeyID(acc.Pepper, testKey))
				if err != nil {
					t.Fatal(err)
				}
				if tot.Total.Requests != int64(started) || tot.Total.CostNanos <= 0 || acct.SpentNanos != tot.Total.CostNanos {
					t.Errorf("%d requests left after output; ledger %+v; account spent %d", started, tot.Total, acct.SpentNanos)
				}
			})
		}
	}
}

// waitLogLine waits for the gateway's n-th request log line (one with a
// status) and returns it decoded.
func waitLogLine(t *testing.T, g *gateway, n int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var lines []map[string]any
		for _, l := range strings.Split(g.logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["status"] != nil {
				lines = append(lines, m)
			}
		}
		if len(lines) >= n {
			return lines[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line for request %d: %s", n, g.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNextRequestSeesSpend: a client that got its answer and sends the
// next request at once, to another instance (or on another connection, or
// another HTTP/2 stream: anything but the same HTTP/1 connection, which
// the server reads only once the first request's handler has returned), is
// checked against a balance (or key limit) that counts that answer: once
// spent, the next request is a 402, never a 200 that the bill lands after.
// (TestNextRequestSeesSpendSlowStore runs it on DynamoDB with a real
// store's latency.)
func TestNextRequestSeesSpend(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { nextRequestSeesSpend(t, b.new) })
	}
}

func nextRequestSeesSpend(t *testing.T, newBackend func(t testing.TB) (idempotency.Store, httpapi.Accounts)) {
	for _, c := range []struct {
		name, extra  string
		keyed, limit bool
	}{
		{"whole", "", false, false},
		{"stream", `"stream":true`, false, false},
		{"keyed", "", true, false},
		{"key-limit", "", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, acc := newBackend(t)
			g := newGateway(t, setup{store: store, accounts: acc, balance: "1"})
			other := g.instance(t, store)
			ctx := context.Background()
			keyID := billing.ConfigKeyID(acc.Pepper, testKey)
			for i := range 5 {
				// Room for one answer (each costs 14,000 nano-USD).
				acct, err := acc.Ledger.Account(ctx, "proj", keyID)
				if err != nil {
					t.Fatal(err)
				}
				if c.limit {
					limit := acct.KeySpentNanos + 10_000
					err = acc.Ledger.SetKeyLimit(ctx, "proj", keyID, &limit)
				} else {
					remaining := int64(10_000)
					err = acc.Ledger.SetBalance(ctx, "proj", &remaining)
				}
				if err != nil {
					t.Fatal(err)
				}
				var header []string
				if c.keyed {
					header = []string{"Idempotency-Key", fmt.Sprintf("%s-%d", key(t), i)}
				}
				if a := mustCall(t, g.url, chatBody(c.extra), header...); a.status != 200 {
					t.Fatalf("round %d: first request %d %s", i, a.status, a.body)
				}
				if c.keyed {
					header = []string{"Idempotency-Key", fmt.Sprintf("%s-%d-next", key(t), i)}
				}
				code := "insufficient_balance"
				if c.limit {
					code = "key_limit_reached"
				}
				if a := mustCall(t, other, chatBody(c.extra), header...); a.status != 402 || a.code != code {
					t.Fatalf("round %d: the request after the answer that spent the balance: %d %q, want 402 %s", i, a.status, a.code, code)
				}
			}
			g.settle(t)
			if tot := totals(t, acc); tot.Total.Requests != 5 || tot.Total.CostNanos != 5*14_000 {
				t.Errorf("ledger %+v, want 5 requests of 14,000 nano-USD", tot.Total)
			}
		})
	}
}

// TestBudgets: once the current UTC period's spend of a project's (or a
// key's) budget is reached, a new request is a 402 budget_exceeded before
// any provider call, costing nothing; a replay of a completed keyed request
// is still served; another key of the project, under the project's budget
// only, is refused by the project's and not by the key's.
func TestBudgets(t *testing.T) {
	for _, b := range backends {
		for _, c := range []struct {
			name          string
			s             setup
			otherKeyServe bool // otherKey has no budget of its own
		}{
			{"project", setup{projectYAML: "    budget: {amount: 0.00002, period: week}\n"}, false},
			{"key", setup{keyYAML: "budget: {amount: 0.00002, period: month}"}, true},
		} {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				store, acc := b.new(t)
				c.s.store, c.s.accounts = store, acc
				g := newGateway(t, c.s)
				// Each answer costs 14,000 nano-USD: two fit under 20,000.
				first := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
				if first.status != 200 {
					t.Fatalf("first: %d %s", first.status, first.body)
				}
				if a := mustCall(t, g.url, chatBody(`"n":2`)); a.status != 200 {
					t.Fatalf("second: %d %s", a.status, a.body)
				}
				calls := g.ups[0].Calls()
				a := mustCall(t, g.url, chatBody(`"n":3`))
				if a.status != 402 || a.code != "budget_exceeded" || !strings.Contains(a.body, "renews at") {
					t.Fatalf("past the budget: %d %q %s, want 402 budget_exceeded", a.status, a.code, a.body)
				}
				if g.ups[0].Calls() != calls {
					t.Errorf("a refused request called the provider")
				}
				if a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t)); a.status != 200 || a.replayed != "true" {
					t.Errorf("the replay past the budget: %d replayed=%q", a.status, a.replayed)
				}
				other := mustCall(t, g.url, chatBody(`"n":4`), "Authorization", "Bearer "+otherKey)
				if c.otherKeyServe && other.status != 200 || !c.otherKeyServe && (other.status != 402 || other.code != "budget_exceeded") {
					t.Errorf("another key of the project: %d %q", other.status, other.code)
				}
				g.settle(t)
				// The usage endpoint says what was spent in each period and
				// what is left of the budget.
				u := send(t, http.MethodGet, g.url+"/api/v1/usage", "", "Authorization", "Bearer "+testKey)
				var usage struct {
					Periods map[string]struct {
						Spent    float64
						KeySpent float64 `json:"key_spent"`
					}
					Budgets []struct {
						Scope, Period       string
						Amount, Spent, Left float64
						RenewsAt            time.Time `json:"renews_at"`
					}
				}
				if err := json.Unmarshal([]byte(u.body), &usage); err != nil || u.status != 200 {
					t.Fatalf("usage: %d %s", u.status, u.body)
				}
				if d := usage.Periods["month"]; d.KeySpent != 0.000028 || len(usage.Budgets) != 1 || usage.Budgets[0].Spent != 0.000028 ||
					usage.Budgets[0].Left != 0 || usage.Budgets[0].Amount != 0.00002 || !usage.Budgets[0].RenewsAt.After(time.Now()) {
					t.Errorf("usage: %s", u.body)
				}
				wantRequests := int64(2)
				if c.otherKeyServe {
					wantRequests = 3
				}
				if tot := totals(t, acc); tot.Total.Requests != wantRequests {
					t.Errorf("ledger %+v, want %d requests billed", tot.Total, wantRequests)
				}
			})
		}
	}
}

// withinOneMinute is a clock that keeps to one UTC minute for 50 seconds
// from now, so that a test of per-minute limits never crosses a window.
func withinOneMinute() func() time.Time {
	start := time.Now()
	base := start.Truncate(time.Minute).Add(time.Second)
	return func() time.Time { return base.Add(min(time.Since(start), 50*time.Second)) }
}

// TestRateLimits: a project's rpm holds across two instances on one store
// (DynamoDB; memory: one process's), refusing before any provider call
// with 429 rate_limited, retry-after, x-gateway-admission-refused and the
// x-ratelimit-* headers, which every answer carries too (Anthropic's as
// well on Messages); a key's tpm refuses a request whose reserve (prompt
// estimate and max output tokens) does not fit; a keyed request refused
// is not recorded.
func TestRateLimits(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, acc := b.new(t)
			g := newGateway(t, setup{store: store, accounts: acc, now: withinOneMinute(), projectYAML: "    rpm: 4\n"})
			other := g.instance(t, store)
			urls := []string{g.url, other}
			for i := range 3 {
				a := mustCall(t, urls[i%2], chatBody(fmt.Sprintf(`"n":%d`, i)))
				if a.status != 200 || a.header.Get("x-ratelimit-limit-requests") != "4" || a.header.Get("x-ratelimit-remaining-requests") != fmt.Sprint(3-i) ||
					a.header.Get("x-ratelimit-reset-requests") == "" {
					t.Fatalf("request %d: %d %v", i, a.status, a.header)
				}
			}
			m := callPath(t, other+"/api/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
			if m.status != 200 || m.header.Get("anthropic-ratelimit-requests-limit") != "4" || m.header.Get("anthropic-ratelimit-requests-remaining") != "0" ||
				m.header.Get("x-ratelimit-remaining-requests") != "0" {
				t.Fatalf("messages: %d %v", m.status, m.header)
			}
			calls := g.ups[0].Calls()
			for _, url := range urls {
				a := mustCall(t, url, chatBody(""), "Idempotency-Key", key(t))
				if a.status != 429 || a.code != "rate_limited" || a.header.Get("Retry-After") == "" ||
					a.header.Get("X-Gateway-Admission-Refused") != "true" || a.header.Get("x-ratelimit-remaining-requests") != "0" {
					t.Errorf("past the rpm: %d %q %v %s", a.status, a.code, a.header, a.body)
				}
			}
			if got := g.ups[0].Calls(); got != calls {
				t.Errorf("refused requests called the provider (%d calls, want %d)", got, calls)
			}
		})
	}
	t.Run("every kind of answer", func(t *testing.T) {
		// Streams and the Responses API carry the headers as whole Chat
		// answers do (Messages also Anthropic's), each counted.
		// The routes' models produce at most 1000 tokens for a request
		// that sets no limit, which such a request reserves.
		g := newGateway(t, setup{now: withinOneMinute(), projectYAML: "    rpm: 10\n    tpm: 100000\n", routeYAML: "max_output_tokens: 1000"})
		for i, c := range []struct{ path, body string }{
			{"/api/v1/chat/completions", chatBody(`"stream":true`)},
			{"/api/v1/messages", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
			{"/api/v1/responses", `{"model":"m","input":"hi"}`},
			{"/api/v1/responses", `{"model":"m","input":"hi","stream":true}`},
		} {
			a := callPath(t, g.url+c.path, c.body)
			h := a.header
			if a.status != 200 || h.Get("x-ratelimit-limit-requests") != "10" || h.Get("x-ratelimit-remaining-requests") != fmt.Sprint(9-i) ||
				h.Get("x-ratelimit-reset-requests") == "" || h.Get("x-ratelimit-limit-tokens") != "100000" || h.Get("x-ratelimit-remaining-tokens") == "" {
				t.Errorf("%s %s: %d %v", c.path, c.body, a.status, h)
			}
			if strings.HasSuffix(c.path, "/messages") && (h.Get("anthropic-ratelimit-requests-remaining") != fmt.Sprint(9-i) || h.Get("anthropic-ratelimit-tokens-limit") != "100000") {
				t.Errorf("messages stream: no Anthropic rate-limit headers: %v", h)
			}
		}
	})
	t.Run("issued key", func(t *testing.T) {
		g := newGateway(t, setup{now: withinOneMinute()})
		ctx := context.Background()
		if a := mustCall(t, g.url, chatBody("")); a.status != 200 { // seeds the project
			t.Fatalf("%d %s", a.status, a.body)
		}
		raw, rec, err := g.accounts.Keys.Issue(ctx, "proj")
		if err != nil {
			t.Fatal(err)
		}
		if err := g.accounts.Keys.SetKeyRates(ctx, rec.KeyID, billing.Rates{RPM: 1}); err != nil {
			t.Fatal(err)
		}
		if a := mustCall(t, g.url, chatBody(""), "Authorization", "Bearer "+raw); a.status != 200 || a.header.Get("x-ratelimit-limit-requests") != "1" {
			t.Fatalf("the issued key's first request: %d %v", a.status, a.header)
		}
		if a := mustCall(t, g.url, chatBody(""), "Authorization", "Bearer "+raw); a.status != 429 || a.code != "rate_limited" || !strings.Contains(a.body, "API key's") {
			t.Errorf("its second: %d %q %s", a.status, a.code, a.body)
		}
		if a := mustCall(t, g.url, chatBody("")); a.status != 200 {
			t.Errorf("the config key meanwhile: %d %s", a.status, a.body)
		}
	})
	t.Run("admin project", func(t *testing.T) {
		g := newGateway(t, setup{now: withinOneMinute()})
		ctx := context.Background()
		if err := g.accounts.Keys.CreateProject(ctx, "issued", nil); err != nil {
			t.Fatal(err)
		}
		if err := g.accounts.Keys.SetProjectRates(ctx, "issued", billing.Rates{RPM: 1}); err != nil {
			t.Fatal(err)
		}
		raw, _, err := g.accounts.Keys.Issue(ctx, "issued")
		if err != nil {
			t.Fatal(err)
		}
		if a := mustCall(t, g.url, chatBody(""), "Authorization", "Bearer "+raw); a.status != 200 || a.header.Get("x-ratelimit-limit-requests") != "1" {
			t.Fatalf("the admin project's first request: %d %v %s", a.status, a.header, a.body)
		}
		if a := mustCall(t, g.url, chatBody(""), "Authorization", "Bearer "+raw); a.status != 429 || !strings.Contains(a.body, "project's") {
			t.Errorf("its second: %d %s", a.status, a.body)
		}
	})
	t.Run("tpm", func(t *testing.T) {
		buf := &syncBuffer{}
		g := newGateway(t, setup{now: withinOneMinute(), keyYAML: "tpm: 100", metrics: buf})
		a := mustCall(t, g.url, chatBody(`"max_tokens":95`))
		if a.status != 429 || a.code != "rate_limited" || !strings.Contains(a.body, "tokens per minute") {
			t.Fatalf("a reserve over the tpm: %d %q %s", a.status, a.code, a.body)
		}
		g.settle(t)
		if !strings.Contains(buf.String(), `"Project":"proj","ProjectRequests":1,"BudgetRefusals":0,"BalanceRefusals":0,"RateLimited":1`) {
			t.Errorf("no RateLimited metric for the project in %s", buf.String())
		}
		// 12 tokens used (10 prompt, 2 completion) of the 20-odd reserved:
		// the count is corrected, and 100 leave room for more.
		for i := range 4 {
			a := mustCall(t, g.url, chatBody(`"max_tokens":10`))
			if a.status != 200 || a.header.Get("x-ratelimit-limit-tokens") != "100" {
				t.Fatalf("request %d: %d %v %s", i, a.status, a.header, a.body)
			}
		}
	})
}
