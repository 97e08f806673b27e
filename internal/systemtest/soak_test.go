package systemtest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// faults decides, per store call, whether it fails: before it reaches the
// store, or after it landed with its answer lost.
type faults struct {
	on    atomic.Bool
	rate  float64
	fails atomic.Int64
}

// before: fail without doing anything; after: do it, then fail.
func (f *faults) roll() (before, after bool) {
	if !f.on.Load() || rand.Float64() >= f.rate {
		return false, false
	}
	f.fails.Add(1)
	if rand.IntN(2) == 0 {
		return true, false
	}
	return false, true
}

// flakyStore is an idempotency store that fails now and then, sometimes
// after its write landed.
type flakyStore struct {
	idempotency.Store
	f *faults
}

var errFlaky = fmt.Errorf("%w: injected", idempotency.ErrUnavailable)

func flaky[T any](f *faults, call func() (T, error)) (T, error) {
	before, after := f.roll()
	var zero T
	if before {
		return zero, errFlaky
	}
	v, err := call()
	if after && err == nil {
		return zero, errFlaky
	}
	return v, err
}

func (s *flakyStore) Reserve(ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	return flaky(s.f, func() (*idempotency.Record, error) { return s.Store.Reserve(ctx, rec, now) })
}

func (s *flakyStore) Load(ctx context.Context, key string, now time.Time) (*idempotency.Record, error) {
	return flaky(s.f, func() (*idempotency.Record, error) { return s.Store.Load(ctx, key, now) })
}

func (s *flakyStore) Poll(ctx context.Context, key, owner string, from int, now time.Time) (*idempotency.Record, int, error) {
	var next int
	rec, err := flaky(s.f, func() (*idempotency.Record, error) {
		r, n, err := s.Store.Poll(ctx, key, owner, from, now)
		next = n
		return r, err
	})
	return rec, next, err
}

func (s *flakyStore) Heartbeat(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	_, err := flaky(s.f, func() (struct{}, error) { return struct{}{}, s.Store.Heartbeat(ctx, key, owner, leaseUntil) })
	return err
}

func (s *flakyStore) MarkStarted(ctx context.Context, key, owner string) error {
	_, err := flaky(s.f, func() (struct{}, error) { return struct{}{}, s.Store.MarkStarted(ctx, key, owner) })
	return err
}

func (s *flakyStore) Append(ctx context.Context, key, owner string, seq int, head *idempotency.Head, events []idempotency.Event) error {
	_, err := flaky(s.f, func() (struct{}, error) { return struct{}{}, s.Store.Append(ctx, key, owner, seq, head, events) })
	return err
}

func (s *flakyStore) Complete(ctx context.Context, key, owner string, ans *idempotency.Answer) error {
	_, err := flaky(s.f, func() (struct{}, error) { return struct{}{}, s.Store.Complete(ctx, key, owner, ans) })
	return err
}

func (s *flakyStore) Tombstone(ctx context.Context, key, owner string) error {
	_, err := flaky(s.f, func() (struct{}, error) { return struct{}{}, s.Store.Tombstone(ctx, key, owner) })
	return err
}

func (s *flakyStore) Release(ctx context.Context, key, owner string) error {
	_, err := flaky(s.f, func() (struct{}, error) { return struct{}{}, s.Store.Release(ctx, key, owner) })
	return err
}

// soakLedger is a ledger that fails now and then, sometimes after its
// write landed.
type soakLedger struct {
	billing.Ledger
	f *faults
}

var errFlakyBilling = fmt.Errorf("%w: injected", billing.ErrUnavailable)

func ledgerFlaky(f *faults, call func() error) error {
	before, after := f.roll()
	if before {
		return errFlakyBilling
	}
	err := call()
	if after && err == nil {
		return errFlakyBilling
	}
	return err
}

func (l *soakLedger) Account(ctx context.Context, project, keyID string) (billing.Account, error) {
	var a billing.Account
	err := ledgerFlaky(l.f, func() (err error) { a, err = l.Ledger.Account(ctx, project, keyID); return err })
	return a, err
}

func (l *soakLedger) Hold(ctx context.Context, h billing.Hold) error {
	return ledgerFlaky(l.f, func() error { return l.Ledger.Hold(ctx, h) })
}

func (l *soakLedger) Price(ctx context.Context, e billing.Entry) error {
	return ledgerFlaky(l.f, func() error { return l.Ledger.Price(ctx, e) })
}

func (l *soakLedger) Bill(ctx context.Context, e billing.Entry) error {
	return ledgerFlaky(l.f, func() error { return l.Ledger.Bill(ctx, e) })
}

func (l *soakLedger) Unhold(ctx context.Context, project, requestID string) error {
	return ledgerFlaky(l.f, func() error { return l.Ledger.Unhold(ctx, project, requestID) })
}

// BenchmarkSoak runs keyed and unkeyed requests, streaming and not, from
// 8 clients against stores that fail 5% of their calls (half of those after
// the write landed). Keyed clients retry with the same key as the SDKs do
// (on 503, 409 in progress and replay unavailable, a few times). Then the
// faults stop, the gateway's finisher drains and one reconcile runs, and
// the benchmark checks the invariant: spend = ledger = the sum of usage.cost
// over the distinct answers the clients received. It reports requests,
// failed answers, bills and store faults per run.
//
//	go test -run='^$' -bench=Soak -benchtime=400x ./internal/systemtest
func BenchmarkSoak(b *testing.B) {
	f := &faults{rate: 0.05}
	base := memledger.New(memledger.Options{})
	store := &flakyStore{Store: memstore.New(1 << 30), f: f}
	g := newGateway(b, setup{store: store, accounts: httpapi.Accounts{Ledger: &soakLedger{Ledger: base, f: f}, Keys: base},
		extraYAML: "idempotency: {lease: 300ms}\n", routeYAML: "cache_read_price: 0.25"})
	// Every other upstream answer reports cached prompt tokens and
	// reasoning tokens, priced apart.
	g.ups[0].SetHandler(func(call int, _ providertest.Request) providertest.Response {
		if call%2 == 0 {
			return scriptedSSE(cachedReasoningChunks...)
		}
		return providertest.Response{}
	})
	bodies := []string{chatBody(""), chatBody(`"stream":true,"stream_options":{"include_usage":true}`)}
	var (
		mu       sync.Mutex
		answers  = map[string]float64{} // x-request-id -> cost, each answer once
		requests atomic.Int64
		failed   atomic.Int64
		next     atomic.Int64
	)
	f.on.Store(true)
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				body := bodies[i%2]
				var hdr []string
				if i%4 >= 2 {
					hdr = []string{"Idempotency-Key", fmt.Sprintf("soak-%d-%d", c, i)}
				}
				for attempt := 0; ; attempt++ {
					requests.Add(1)
					a := call(context.Background(), g.url, body, hdr...)
					if a.err == nil && a.status == 200 {
						cost, err := answerCost(a)
						if err != nil {
							b.Error(err)
						}
						mu.Lock()
						answers[a.reqID] = cost
						mu.Unlock()
						break
					}
					retry := hdr != nil && attempt < 8 && (a.status == 503 || a.code == "idempotency_in_progress" || a.code == "idempotency_replay_unavailable")
					if !retry {
						failed.Add(1)
						break
					}
					time.Sleep(time.Duration(50*(attempt+1)) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	f.on.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.apps[0].Finisher.Wait(ctx); err != nil {
		b.Fatalf("the finisher did not settle: %v", err)
	}
	var rec billing.Reconciler = base
	rep, err := rec.Reconcile(ctx, time.Now().Add(24*time.Hour), true)
	if err != nil {
		b.Fatal(err)
	}
	var want int64
	for _, c := range answers {
		want += billing.USDToNanos(c)
	}
	tot, err := base.Totals(ctx, "proj", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	acct, err := base.Account(ctx, "proj", "")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(requests.Load()), "requests")
	b.ReportMetric(float64(len(answers)), "answers")
	b.ReportMetric(float64(failed.Load()), "failed")
	b.ReportMetric(float64(tot.Total.Requests), "bills")
	b.ReportMetric(float64(f.fails.Load()), "store-faults")
	b.ReportMetric(float64(len(rep.Settled)), "reconciled")
	b.ReportMetric(float64(len(rep.WrittenOff)), "written-off")
	if tot.Total.Requests != int64(len(answers)) || tot.Total.CostNanos != want || acct.SpentNanos != want {
		b.Fatalf("spend %d, ledger %d entries / %d nano-USD; the clients received %d answers costing %d",
			acct.SpentNanos, tot.Total.Requests, tot.Total.CostNanos, len(answers), want)
	}
}
