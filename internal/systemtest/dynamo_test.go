//go:build integration

package systemtest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/faultproxy"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/ratelimit"
)

// dynaliteServer is the dynalite server the package's tests share, started
// by the first test that needs it.
var dynaliteServer dynalite.Shared

// Under the integration build tag, every test that runs over storeKinds or
// backends runs on DynamoDB (dynalite) too.
func init() {
	storeKinds = append(storeKinds, storeKind{"dynamodb", func(t testing.TB) idempotency.Store { return dynamoStore(t) }})
	backends = append(backends, backend{"dynamodb", func(t testing.TB) (idempotency.Store, httpapi.Accounts) {
		client := dynalite.NewClient(dynaliteServer.Endpoint(t))
		table := dynalite.Table(t, client, "bill")
		l := dynamoledger.New(client, table, dynamoledger.Options{Pepper: []byte("pepper")})
		return dynamostore.New(client, table), httpapi.Accounts{Ledger: l, Keys: billing.NewKeyCache(l, billing.KeyCacheOptions{}), Pepper: []byte("pepper"),
			Limiter: ratelimit.NewDynamo(client, table)}
	}})
	afterTests = append(afterTests, dynaliteServer.Close)
}

// dynamoStore is a DynamoDB store on a fresh dynalite table. Two gateway
// instances given the same store value share one table, as two Lambda
// instances would.
func dynamoStore(t testing.TB, optFns ...func(*dynamodb.Options)) idempotency.Store {
	t.Helper()
	return dynamoStoreAt(t, dynaliteServer.Endpoint(t), optFns...)
}

func dynamoStoreAt(t testing.TB, endpoint string, optFns ...func(*dynamodb.Options)) idempotency.Store {
	t.Helper()
	client := dynalite.NewClient(endpoint, optFns...)
	return dynamostore.New(client, dynalite.Table(t, client, "gw"))
}

// TestIdempotencyAcrossInstances: a replay, a waiter and a stream joiner on
// another instance than the one that ran the request, through DynamoDB.
func TestIdempotencyAcrossInstances(t *testing.T) {
	store := dynamoStore(t)
	g := newGateway(t, setup{store: store})
	other := g.instance(t, store)

	t.Run("replay", func(t *testing.T) {
		first := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
		again := mustCall(t, other, chatBody(""), "Idempotency-Key", key(t))
		sameAnswer(t, first, again)
		conflict := mustCall(t, other, chatBody(`"temperature":1`), "Idempotency-Key", key(t))
		if conflict.status != 409 || conflict.code != "idempotency_conflict" {
			t.Errorf("conflict on the other instance: %d %q", conflict.status, conflict.code)
		}
	})
	t.Run("waiter", func(t *testing.T) {
		before := g.ups[0].Calls()
		g.ups[0].Script(providertest.Response{FirstChunkDelay: 400 * time.Millisecond})
		firstc := make(chan answer, 1)
		go func() { firstc <- call(context.Background(), g.url, chatBody(`"n":1`), "Idempotency-Key", key(t)) }()
		waitCalls(t, g.ups[0], before+1)
		again := mustCall(t, other, chatBody(`"n":1`), "Idempotency-Key", key(t))
		sameAnswer(t, <-firstc, again)
		if got := g.ups[0].Calls() - before; got != 1 {
			t.Errorf("%d upstream calls, want 1", got)
		}
	})
	t.Run("stream joiner", func(t *testing.T) {
		before := g.ups[0].Calls()
		g.ups[0].Script(providertest.Response{Text: []string{"a", "b", "c", "d", "e", "f", "g", "h"}, ChunkDelay: 100 * time.Millisecond})
		body := chatBody(`"stream":true`)
		firstc := make(chan answer, 1)
		go func() { firstc <- call(context.Background(), g.url, body, "Idempotency-Key", key(t)) }()
		waitCalls(t, g.ups[0], before+1)
		time.Sleep(350 * time.Millisecond) // some events are appended to the table
		joined := mustCall(t, other, body, "Idempotency-Key", key(t))
		first := <-firstc
		sameAnswer(t, first, joined)
		if !strings.HasSuffix(first.body, "data: [DONE]\n\n") {
			t.Errorf("first stream %q", first.body)
		}
		if got := g.ups[0].Calls() - before; got != 1 {
			t.Errorf("%d upstream calls, want 1", got)
		}
	})
}

// TestLostHoldAnswerIsReleased: a hold that reached DynamoDB but whose
// answer was lost (the connection reset as the answer began, no SDK retry)
// refuses the request with 503 billing_unavailable before any provider
// call, and is released at once: no held entry is left for the reconciler
// to write off, a write-off being its report of an answer that may have
// gone unbilled.
func TestLostHoldAnswerIsReleased(t *testing.T) {
	endpoint := dynaliteServer.Endpoint(t)
	proxy, err := faultproxy.New(strings.TrimPrefix(endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetGentleUpstream(true) // fault the link, not dynalite
	t.Cleanup(func() { _ = proxy.Close() })
	direct := dynalite.NewClient(endpoint)
	table := dynalite.Table(t, direct, "lost")
	noRetry := func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }
	l := dynamoledger.New(dynalite.NewClient(proxy.URL(), noRetry), table, dynamoledger.Options{Pepper: []byte("pepper")})
	acc := httpapi.Accounts{Ledger: l, Keys: billing.NewKeyCache(l, billing.KeyCacheOptions{}), Pepper: []byte("pepper")}
	g := newGateway(t, setup{accounts: acc})

	if a := mustCall(t, g.url, chatBody("")); a.status != 200 {
		t.Fatalf("the control request: %d %s", a.status, a.body)
	}
	g.settle(t)
	// A Hold writes its due pointer, then the held entry (two PutItems):
	// the entry's answer is lost.
	var puts int
	isPut := faultproxy.DynamoDBOp("PutItem")
	proxy.DropResponses(1, func(r *http.Request) bool {
		if !isPut(r) {
			return false
		}
		puts++
		return puts == 2
	})
	a := mustCall(t, g.url, chatBody(`"n":1`))
	if a.status != 503 || a.code != "billing_unavailable" {
		t.Fatalf("a request whose hold's answer was lost: %d %q, want 503 billing_unavailable", a.status, a.code)
	}
	if st := proxy.Stats(); st.Dropped != 1 {
		t.Fatalf("answers dropped: %d, want the hold's 1", st.Dropped)
	}
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got): a request without its hold reached a provider\n%s", diff)
	}
	g.settle(t)
	fresh := dynamoledger.New(direct, table, dynamoledger.Options{Pepper: []byte("pepper")})
	rep, err := fresh.Reconcile(context.Background(), time.Now().Add(48*time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.WrittenOff) != 0 || len(rep.Settled) != 0 {
		t.Errorf("reconcile finds %d holds to write off, %d bills to settle; want none (the lost hold released)", len(rep.WrittenOff), len(rep.Settled))
	}
}

// BenchmarkDynamoCalls counts the DynamoDB calls (by operation, with an SDK
// middleware) that a keyed request costs against dynalite: a new request,
// a replay, a conflict, and a new streaming request. dynalite ignores
// ReturnValuesOnConditionCheckFailure=ALL_OLD, so a replay there costs the
// failed reservation and a consistent read; the "all-old" variant runs
// through a proxy that answers as DynamoDB does, where the failed
// reservation alone carries the stored answer.
func BenchmarkDynamoCalls(b *testing.B) {
	b.Run("dynalite", func(b *testing.B) { dynamoCalls(b, dynaliteServer.Endpoint(b)) })
	b.Run("all-old", func(b *testing.B) {
		p := dynalite.AllOldProxy(b, dynaliteServer.Endpoint(b))
		dynamoCalls(b, p.Endpoint)
	})
}

func dynamoCalls(b *testing.B, endpoint string) {
	var counter dynalite.Counter
	h, _ := benchGateway(b, dynamoStoreAt(b, endpoint, dynalite.CountCalls(&counter)))
	body := `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`
	report := func(b *testing.B) {
		b.StopTimer()
		for op, n := range counter.Snapshot() {
			b.ReportMetric(float64(n)/float64(b.N), op+"/op")
		}
		b.ReportMetric(float64(counter.Total())/float64(b.N), "calls/op")
	}
	cases := []struct {
		name   string
		body   string
		key    func(i int) string
		status int
		setup  func()
	}{
		{"new", body, func(i int) string { return fmt.Sprintf("dyn-new-%d", time.Now().UnixNano()) }, 200, nil},
		{"new-stream", strings.Replace(body, `"model"`, `"stream":true,"model"`, 1), func(i int) string { return fmt.Sprintf("dyn-stream-%d", time.Now().UnixNano()) }, 200, nil},
		{"replay", body, func(int) string { return "dyn-replay" }, 200, func() { serveBench(b, h, body, "Idempotency-Key", "dyn-replay") }},
		{"conflict", strings.Replace(body, "hello", "bye", 1), func(int) string { return "dyn-replay" }, 409, nil},
	}
	for _, c := range cases {
		if c.setup != nil {
			c.setup()
		}
		b.Run(c.name, func(b *testing.B) {
			counter.Reset()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if w := serveBench(b, h, c.body, "Idempotency-Key", c.key(i)); w.Code != c.status {
					b.Fatalf("status %d, want %d: %s", w.Code, c.status, w.Body)
				}
			}
			report(b)
		})
	}
}

// TestNextRequestSeesSpendSlowStore is TestNextRequestSeesSpend on a
// DynamoDB table 10 ms away each way, as a real one is: a bill applied
// after the answer's last bytes (five writes in a row) lands after the
// client's next balance check.
func TestNextRequestSeesSpendSlowStore(t *testing.T) {
	endpoint := dynaliteServer.Endpoint(t)
	nextRequestSeesSpend(t, func(t testing.TB) (idempotency.Store, httpapi.Accounts) {
		proxy, err := faultproxy.New(strings.TrimPrefix(endpoint, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		proxy.SetLatency(10*time.Millisecond, 10*time.Millisecond)
		direct := dynalite.NewClient(endpoint)
		table := dynalite.Table(t, direct, "slow")
		client := dynalite.NewClient(proxy.URL())
		l := dynamoledger.New(client, table, dynamoledger.Options{Pepper: []byte("pepper")})
		return dynamostore.New(client, table), httpapi.Accounts{Ledger: l, Keys: billing.NewKeyCache(l, billing.KeyCacheOptions{}), Pepper: []byte("pepper")}
	})
}

// BenchmarkRateLimitSoak: b.N requests from 8 clients at once, over two
// gateway instances on one DynamoDB (dynalite) table, against a project
// rpm and a key tpm of half of them, within one minute. It reports how
// many were answered for each one the limits allow (limit-accuracy: 1 is
// exact; the rpm is the binding one here), and the limiter's DynamoDB
// calls per request, each a write of one unit on an item under 1 KB
// (a refused request adds a consistent read on dynalite, which does not
// send the item back with the failed condition as DynamoDB does).
func BenchmarkRateLimitSoak(b *testing.B) {
	var counter dynalite.Counter
	endpoint := dynaliteServer.Endpoint(b)
	client := dynalite.NewClient(endpoint)
	table := dynalite.Table(b, client, "rl")
	l := dynamoledger.New(client, table, dynamoledger.Options{Pepper: []byte("pepper")})
	acc := httpapi.Accounts{Ledger: l, Keys: billing.NewKeyCache(l, billing.KeyCacheOptions{}), Pepper: []byte("pepper"),
		Limiter: ratelimit.NewDynamo(dynalite.NewClient(endpoint, dynalite.CountCalls(&counter)), table)}
	store := dynamostore.New(client, table)
	limit := max(b.N/2, 1)
	g := newGateway(b, setup{store: store, accounts: acc, now: withinOneMinute(), routeYAML: "max_output_tokens: 100",
		projectYAML: fmt.Sprintf("    rpm: %d\n", limit), keyYAML: fmt.Sprintf("tpm: %d", 1_000_000)})
	urls := []string{g.url, g.instance(b, store)}
	var answered, refused atomic.Int64
	next := atomic.Int64{}
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				a := call(context.Background(), urls[i%2], chatBody(""))
				switch {
				case a.err != nil:
					b.Error(a.err)
					return
				case a.status == 200:
					answered.Add(1)
				case a.status == 429 && a.code == "rate_limited":
					refused.Add(1)
				default:
					b.Errorf("status %d %s", a.status, a.body)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	g.settle(b)
	if answered.Load() > int64(limit) {
		b.Errorf("%d answered past an rpm of %d", answered.Load(), limit)
	}
	b.ReportMetric(float64(answered.Load())/float64(limit), "limit-accuracy")
	b.ReportMetric(float64(counter.Total())/float64(b.N), "limiter-calls/op")
	for op, n := range counter.Snapshot() {
		b.ReportMetric(float64(n)/float64(b.N), op+"/op")
	}
}
