//go:build integration

package dynamoledger_test

// Fault tests with real failures: dynalite behind internal/faultproxy, a
// TCP proxy that loses answers after the request landed (DropResponses),
// resets connections and cuts the store off (Cut, Restore). The Store under
// test talks through the proxy with the SDK's retries off, so every lost
// answer reaches the ledger's caller; the checks read the table directly.
// Every test has its own table, so that Reconcile (which looks at every
// hold of a table) sees nothing but the test's own requests.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/faultproxy"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/billingtest"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
)

// faultDeadline is the deadline of the tests' holds (billingtest.Base is
// the entries' At).
var faultDeadline = billingtest.Base.Add(time.Minute)

// reconcileNow is a Reconcile time past every deadline the tests write,
// and past StrayAfter beyond them: the holds' (faultDeadline) and the due
// pointers of a Bill without a hold (the Store's clock, time.Now).
func reconcileNow() time.Time { return time.Now().Add(3 * dynamoledger.DefaultStrayAfter) }

// faultEnv is a fresh table on the shared dynalite, a fault proxy in front
// of it (or in front of the ALL_OLD proxy, as on DynamoDB), and Stores.
type faultEnv struct {
	t        *testing.T
	table    string
	endpoint string // dynalite, direct
	proxy    *faultproxy.Proxy
	opts     dynamoledger.Options
}

func newFaultEnv(t *testing.T, allOld bool, opts dynamoledger.Options) *faultEnv {
	t.Helper()
	endpoint := server.Endpoint(t)
	upstream := endpoint
	if allOld {
		upstream = dynalite.AllOldProxy(t, endpoint).Endpoint
	}
	p, err := faultproxy.New(strings.TrimPrefix(upstream, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	p.SetGentleUpstream(true) // fault the link, not dynalite
	t.Cleanup(func() { _ = p.Close() })
	if opts.Pepper == nil {
		opts.Pepper = pepper
	}
	// Few partitions: Reconcile and Totals query each of them, and the
	// tests check after every fault.
	if opts.Shards == 0 {
		opts.Shards = 2
	}
	if opts.HoldShards == 0 {
		opts.HoldShards = 2
	}
	return &faultEnv{
		t:        t,
		table:    dynalite.Table(t, dynalite.Client(t, endpoint), "fault"),
		endpoint: endpoint,
		proxy:    p,
		opts:     opts,
	}
}

// through is a Store whose calls go through the proxy, without the SDK's
// retries.
func (env *faultEnv) through() *dynamoledger.Store {
	return dynamoledger.New(dynalite.Client(env.t, env.proxy.URL(), noRetry), env.table, env.opts)
}

// direct is a fresh Store (a new process) on dynalite itself.
func (env *faultEnv) direct() *dynamoledger.Store {
	return dynamoledger.New(dynalite.Client(env.t, env.endpoint), env.table, env.opts)
}

// drop records the requests the proxy forwards from now on and loses the
// answer of the nth (from 1); stop ends it.
type drop struct {
	env *faultEnv
	n   int

	mu      sync.Mutex
	ops     []string // the operations forwarded, in order
	dropped string   // the operation whose answer was lost
}

func (env *faultEnv) dropNth(n int) *drop {
	d := &drop{env: env, n: n}
	// A budget no run reaches, so that the matcher sees every request (it
	// is only asked while some budget is left); it matches the nth only.
	env.proxy.DropResponses(1<<30, func(r *http.Request) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.ops = append(d.ops, op(r))
		if len(d.ops) == d.n {
			d.dropped = op(r)
			return true
		}
		return false
	})
	return d
}

// stop ends the dropping and reports whether the nth answer was lost, and
// the operations seen.
func (d *drop) stop() (hit bool, dropped string, ops []string) {
	d.env.proxy.DropResponses(0, nil)
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped != "", d.dropped, slices.Clone(d.ops)
}

// step is one of a request's ledger calls.
type step struct {
	name string
	run  func(ctx context.Context, s *dynamoledger.Store, e billing.Entry) error
}

var (
	stepHold = step{"Hold", func(ctx context.Context, s *dynamoledger.Store, e billing.Entry) error {
		return s.Hold(ctx, billingtest.HoldOf(e, faultDeadline))
	}}
	stepPrice = step{"Price", func(ctx context.Context, s *dynamoledger.Store, e billing.Entry) error {
		return s.Price(ctx, e)
	}}
	stepBill = step{"Bill", func(ctx context.Context, s *dynamoledger.Store, e billing.Entry) error {
		return s.Bill(ctx, e)
	}}
)

// sequences are a request's lives: the gateway's (Hold, Price, Bill), and
// the shorter ones the Ledger allows.
var sequences = []struct {
	name  string
	steps []step
}{
	{"Hold-Price-Bill", []step{stepHold, stepPrice, stepBill}},
	{"Hold-Bill", []step{stepHold, stepBill}},
	{"Bill", []step{stepBill}},
}

// variants are the stores the fault tests run on: dynalite as it is,
// through the ALL_OLD proxy (as DynamoDB answers a failed condition), and
// with a collection of the markers in every Bill (GCThreshold 1: the
// collection's calls, after the entry is applied, fail too).
var variants = []struct {
	name   string
	allOld bool
	gc     int
}{
	{"dynalite", false, 0},
	{"allOld", true, 0},
	{"gc=1", false, 1},
}

// rawItems reads the whole table (a test's own, small): the due pointers
// and the entries by request id with their state.
func (env *faultEnv) rawItems() (pointers []string, states map[string]string) {
	env.t.Helper()
	client := dynalite.Client(env.t, env.endpoint)
	states = map[string]string{}
	in := &dynamodb.ScanInput{TableName: aws.String(env.table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := client.Scan(env.t.Context(), in)
		if err != nil {
			env.t.Fatalf("Scan: %v", err)
		}
		for _, item := range out.Items {
			pk, _ := item[dynamoledger.AttrPK].(*types.AttributeValueMemberS)
			sk, _ := item[dynamoledger.AttrSK].(*types.AttributeValueMemberS)
			switch {
			case pk == nil || sk == nil:
			case strings.HasPrefix(pk.Value, dynamoledger.PKHold):
				pointers = append(pointers, sk.Value)
			case strings.HasPrefix(pk.Value, dynamoledger.PKRequest) && sk.Value == dynamoledger.SKEntry:
				st, _ := item["state"].(*types.AttributeValueMemberS)
				if st != nil {
					states[strings.TrimPrefix(pk.Value, dynamoledger.PKRequest)] = st.Value
				}
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return pointers, states
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// expectSettledTable checks that nothing is left to settle: Reconcile far
// in the future reports nothing, with apply too, after which no due
// pointer is left and every entry is applied.
func (env *faultEnv) expectSettledTable(ctx context.Context) {
	env.t.Helper()
	s := env.direct()
	for _, apply := range []bool{false, true} {
		r, err := s.Reconcile(ctx, reconcileNow(), apply)
		if err != nil || len(r.Settled)+len(r.WrittenOff) > 0 {
			env.t.Fatalf("Reconcile(apply=%v): %d settled %d written off (%+v), %v; want nothing", apply, len(r.Settled), len(r.WrittenOff), r, err)
		}
	}
	pointers, states := env.rawItems()
	if len(pointers) > 0 {
		env.t.Fatalf("due pointers left after Reconcile: %v", pointers)
	}
	for rid, st := range states {
		if st != "applied" {
			env.t.Fatalf("entry %s left %s", rid, st)
		}
	}
}

// expectNothingBilled checks that the request left no entry and no spend.
func expectNothingBilled(t *testing.T, l billing.Ledger, e billing.Entry) {
	t.Helper()
	if got, err := l.Entry(t.Context(), e.RequestID); !errors.Is(err, billing.ErrNotFound) {
		t.Fatalf("Entry(%s): %+v, %v; want ErrNotFound", e.RequestID, got, err)
	}
	billingtest.ExpectSpent(t, l, e.Project, e.KeyID, 0, 0)
	if tot := billingtest.MustTotals(t, l, e.Project, e.At, e.At.Add(time.Nanosecond)); tot.Total.Requests != 0 || tot.Total.CostNanos != 0 {
		t.Fatalf("Totals: %+v, want nothing", tot.Total)
	}
}

// reported returns the request ids a Reconcile settled and wrote off.
func reported(r billing.Reconciliation) (settled, writtenOff []string) {
	for _, e := range r.Settled {
		settled = append(settled, e.RequestID)
	}
	for _, h := range r.WrittenOff {
		writtenOff = append(writtenOff, h.RequestID)
	}
	return settled, writtenOff
}

// TestFaultLostAnswer loses, in turn, the answer of every DynamoDB call of
// every step of a request (Hold, Price, Bill) after the call landed. The
// step returns ErrUnavailable (except for the calls a Bill makes once its
// entry is applied, best effort: the delete of the due pointer and the
// collections; that Bill is complete and says so), the same step again
// succeeds, the rest of the request runs, and the request is billed
// exactly once (Entry, Totals, the project's and the key's spend);
// Reconcile then finds nothing to do, and leaves no due pointer.
func TestFaultLostAnswer(t *testing.T) {
	for _, v := range variants {
		for _, seq := range sequences {
			t.Run(v.name+"/"+seq.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
				defer cancel()
				env := newFaultEnv(t, v.allOld, dynamoledger.Options{GCThreshold: v.gc})
				for i, failing := range seq.steps {
					calls := 0
					for n := 1; ; n++ {
						s := env.through()
						e := billingtest.NewEntry(billingtest.ID("p"), billingtest.ID("k"), 14_000+int64(n))
						for _, st := range seq.steps[:i] {
							if err := st.run(ctx, s, e); err != nil {
								t.Fatalf("%s: %v", st.name, err)
							}
						}
						d := env.dropNth(n)
						err := failing.run(ctx, s, e)
						hit, dropped, ops := d.stop()
						// The first DeleteItem of Bill is the best-effort
						// delete of the due pointer, once the entry is
						// applied; the collections follow it.
						afterApplied := failing.name == "Bill" && slices.Index(ops, "DeleteItem") >= 0 && n > slices.Index(ops, "DeleteItem")
						switch {
						case !hit:
							// Fewer than n calls: no fault, the control
							// run (the request completes and is checked
							// like the others).
							if err != nil {
								t.Fatalf("%s with no fault: %v", failing.name, err)
							}
							calls = len(ops)
							t.Logf("%s: calls %v", failing.name, ops)
						case err == nil && afterApplied:
							// Best effort: the Bill is done (Reconcile
							// removes the pointer; the next collection
							// takes the markers).
						case err == nil:
							t.Errorf("%s returned nil though the answer of its call %d (%s) was lost", failing.name, n, dropped)
						case !errors.Is(err, billing.ErrUnavailable):
							t.Errorf("%s, answer of call %d (%s) lost: %v, want ErrUnavailable", failing.name, n, dropped, err)
						default:
							if err := failing.run(ctx, s, e); err != nil {
								t.Fatalf("%s again after the answer of call %d (%s) was lost: %v", failing.name, n, dropped, err)
							}
						}
						for _, st := range seq.steps[i+1:] {
							if err := st.run(ctx, s, e); err != nil {
								t.Fatalf("%s after %s's call %d (%s) lost its answer: %v", st.name, failing.name, n, dropped, err)
							}
						}
						billingtest.ExpectBilledOnce(t, env.direct(), e)
						env.expectSettledTable(ctx)
						if !hit {
							break
						}
					}
					if calls == 0 {
						t.Fatalf("%s made no call", failing.name)
					}
				}
				if st := env.proxy.Stats(); st.Dropped == 0 {
					t.Fatalf("no answer dropped: %+v", st)
				}
			})
		}
	}
}

// TestFaultProcessDeath kills the process (it makes no more calls) right
// after each DynamoDB call of each step of a request, the call having
// landed and its answer lost. A Reconcile past the deadline, from a new
// process, bills a priced entry exactly once and writes off an unpriced
// hold: no entry, no spend, and a late Bill of that request then bills
// exactly once.
func TestFaultProcessDeath(t *testing.T) {
	for _, v := range variants[:1] { // the calls differ on the others, not the states a death leaves
		for _, seq := range sequences {
			t.Run(v.name+"/"+seq.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
				defer cancel()
				env := newFaultEnv(t, v.allOld, dynamoledger.Options{GCThreshold: v.gc})
				held := seq.steps[0].name == "Hold"
				for i, dying := range seq.steps {
					for n := 1; ; n++ {
						e := billingtest.NewEntry(billingtest.ID("p"), billingtest.ID("k"), 7_000+int64(n))
						s := env.through()
						for _, st := range seq.steps[:i] {
							if err := st.run(ctx, s, e); err != nil {
								t.Fatalf("%s: %v", st.name, err)
							}
						}
						d := env.dropNth(n)
						err := dying.run(ctx, s, e)
						hit, dropped, ops := d.stop()
						if !hit && err != nil {
							t.Fatalf("%s with no fault: %v", dying.name, err)
						}
						// The process is dead (without a fault: right
						// after the step): s makes no more calls.
						_, states := env.rawItems()
						state := states[e.RequestID]
						// The entry is priced once the write that prices
						// it landed: with a hold, the first call of Price
						// or Bill (an UpdateItem); without, the second
						// PutItem (the pointer, then the entry).
						priced := dying.name != "Hold"
						if !held {
							priced = countOf(ops, "PutItem") >= 2
						}
						where := fmt.Sprintf("dead after %s's call %d (%s; calls %v; failed %v), entry %q", dying.name, n, dropped, ops, err != nil, state)
						if !hit {
							where = fmt.Sprintf("dead after %s completed (calls %v), entry %q", dying.name, ops, state)
						}
						if ok := slices.Contains([]string{"pending", "applied"}, state); ok != priced {
							t.Fatalf("%s: priced=%v", where, priced)
						}

						r, err := env.direct().Reconcile(ctx, reconcileNow(), true)
						if err != nil {
							t.Fatalf("%s: Reconcile: %v", where, err)
						}
						settled, writtenOff := reported(r)
						var wantSettled, wantWrittenOff []string
						switch state {
						case "pending":
							wantSettled = []string{e.RequestID}
						case "held":
							wantWrittenOff = []string{e.RequestID}
						}
						if !slices.Equal(settled, wantSettled) || !slices.Equal(writtenOff, wantWrittenOff) {
							t.Fatalf("%s: Reconcile settled %v wrote off %v; want %v and %v", where, settled, writtenOff, wantSettled, wantWrittenOff)
						}
						if !priced {
							expectNothingBilled(t, env.direct(), e)
							// A late Bill (the request's own, or a retry
							// after the write-off) bills normally, once.
							late := env.direct()
							billingtest.MustBill(t, late, e)
							billingtest.MustBill(t, late, e)
						}
						billingtest.ExpectBilledOnce(t, env.direct(), e)
						env.expectSettledTable(ctx)
						t.Logf("%s: settled %v, written off %v", where, settled, writtenOff)
						if !hit {
							break
						}
					}
				}
			})
		}
	}
}

func countOf(ops []string, name string) int {
	n := 0
	for _, o := range ops {
		if o == name {
			n++
		}
	}
	return n
}

// retry calls f until it succeeds, backing off, and counts the failures;
// every failure must be ErrUnavailable.
func retry(ctx context.Context, t *testing.T, what string, failures *atomic.Int64, f func() error) {
	delay := 5 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return
		}
		if !errors.Is(err, billing.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", what, err)
			return
		}
		failures.Add(1)
		select {
		case <-ctx.Done():
			t.Errorf("%s: gave up: %v (last error %v)", what, ctx.Err(), err)
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// TestFaultStoreGone cuts the store off for two seconds in the middle of a
// batch of concurrent requests (Hold, Price, Bill) from several goroutines,
// each retrying every step with backoff until it succeeds; a few answers
// are lost as well. Afterwards every entry is billed once: the project's
// spend, each key's spend, the ledger's Totals and the sum of the entries
// agree, and Reconcile has nothing to do.
func TestFaultStoreGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	// Small thresholds, so that collections (and their epochs) run in the
	// failures too.
	env := newFaultEnv(t, false, dynamoledger.Options{Shards: 2, GCThreshold: 2})
	project := billingtest.ID("p")
	keys := []string{billingtest.ID("k"), billingtest.ID("k"), billingtest.ID("k")}
	const workers, perWorker = 6, 5
	entries := make([][]billing.Entry, workers)
	var sum int64
	keySum := map[string]int64{}
	for w := range workers {
		for j := range perWorker {
			e := billingtest.NewEntry(project, keys[(w+j)%len(keys)], int64(1_000*(w*perWorker+j+1)))
			entries[w] = append(entries[w], e)
			sum += e.CostNanos
			keySum[e.KeyID] += e.CostNanos
		}
	}

	// Half of the workers bill one request and then wait for the cut, so
	// that calls are certain to meet it; the others run through it.
	var failures atomic.Int64
	var ready, done sync.WaitGroup
	cut := make(chan struct{})
	env.proxy.DropResponses(4, nil) // the first few answers are lost
	for w := range workers {
		gated := w%2 == 0
		if gated {
			ready.Add(1)
		}
		done.Go(func() {
			s := env.through()
			for j, e := range entries[w] {
				retry(ctx, t, "Hold", &failures, func() error { return s.Hold(ctx, billingtest.HoldOf(e, faultDeadline)) })
				retry(ctx, t, "Price", &failures, func() error { return s.Price(ctx, e) })
				retry(ctx, t, "Bill", &failures, func() error { return s.Bill(ctx, e) })
				if gated && j == 0 {
					ready.Done()
					<-cut
				}
			}
		})
	}
	ready.Wait()
	env.proxy.Cut()
	close(cut)
	// Stay cut for two seconds, and until connections were refused (the
	// gated workers' calls certainly come; bounded by ctx).
	cutAt := time.Now()
	for ctx.Err() == nil && (time.Since(cutAt) < 2*time.Second || env.proxy.Stats().Refused == 0) {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	refused := env.proxy.Stats().Refused
	env.proxy.Restore()
	done.Wait()
	if t.Failed() {
		return
	}
	st := env.proxy.Stats()
	t.Logf("failures retried %d; proxy %+v", failures.Load(), st)
	if failures.Load() == 0 || refused == 0 || st.Dropped != 4 {
		t.Fatalf("the faults did not happen: %d failures, %d connections refused in the cut, proxy %+v", failures.Load(), refused, st)
	}

	s := env.direct()
	var entrySum int64
	for _, es := range entries {
		for _, e := range es {
			got, err := s.Entry(ctx, e.RequestID)
			if err != nil || !billing.SamePayload(got, e) {
				t.Fatalf("Entry(%s): %+v, %v; want %+v", e.RequestID, got, err, e)
			}
			entrySum += got.CostNanos
		}
	}
	tot := billingtest.MustTotals(t, s, project, billingtest.Base, billingtest.Base.Add(time.Nanosecond))
	if tot.Total.Requests != workers*perWorker || tot.Total.CostNanos != sum || entrySum != sum {
		t.Fatalf("Totals %+v, entries sum %d; want %d requests of %d", tot.Total, entrySum, workers*perWorker, sum)
	}
	for _, k := range keys {
		a := billingtest.MustAccount(t, s, project, k)
		if a.SpentNanos != sum || a.KeySpentNanos != keySum[k] || tot.ByKey[k].CostNanos != keySum[k] {
			t.Fatalf("key %s: project spent %d, key spent %d, Totals by key %d; want %d, %d, %d",
				k, a.SpentNanos, a.KeySpentNanos, tot.ByKey[k].CostNanos, sum, keySum[k], keySum[k])
		}
	}
	env.expectSettledTable(ctx)
	// Everything is still counted once after Reconcile's clean-up.
	billingtest.ExpectSpent(t, s, project, keys[0], sum, keySum[keys[0]])
}

// TestFaultUnhold loses the answers of Unhold. Of a hold: Unhold fails, an
// Unhold again succeeds, and the hold is gone with nothing billed (and
// Reconcile bills nothing). Of a priced hold: Unhold fails, again succeeds
// and leaves the priced entry alone, which Reconcile then bills once.
func TestFaultUnhold(t *testing.T) {
	for _, allOld := range []bool{false, true} {
		t.Run(fmt.Sprintf("allOld=%v", allOld), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			env := newFaultEnv(t, allOld, dynamoledger.Options{})
			for _, priced := range []bool{false, true} {
				for n := 1; ; n++ {
					s := env.through()
					e := billingtest.NewEntry(billingtest.ID("p"), billingtest.ID("k"), 3_000)
					if err := stepHold.run(ctx, s, e); err != nil {
						t.Fatal(err)
					}
					if priced {
						if err := stepPrice.run(ctx, s, e); err != nil {
							t.Fatal(err)
						}
					}
					d := env.dropNth(n)
					err := s.Unhold(ctx, e.Project, e.RequestID)
					hit, dropped, ops := d.stop()
					where := fmt.Sprintf("priced=%v, the answer of Unhold's call %d (%s) lost", priced, n, dropped)
					if !hit {
						// Fewer than n calls: the control run.
						where = fmt.Sprintf("priced=%v, no fault", priced)
						if err != nil {
							t.Fatalf("%s: Unhold: %v", where, err)
						}
						t.Logf("priced=%v: Unhold calls %v", priced, ops)
					} else if !errors.Is(err, billing.ErrUnavailable) {
						t.Fatalf("%s: Unhold: %v, want ErrUnavailable", where, err)
					}
					if err := s.Unhold(ctx, e.Project, e.RequestID); err != nil {
						t.Fatalf("%s: Unhold again: %v", where, err)
					}
					_, states := env.rawItems()
					r, err := env.direct().Reconcile(ctx, reconcileNow(), true)
					settled, writtenOff := reported(r)
					if !priced {
						if st, ok := states[e.RequestID]; ok {
							t.Fatalf("%s: the entry is left %s", where, st)
						}
						if err != nil || len(settled)+len(writtenOff) > 0 {
							t.Fatalf("%s: Reconcile: settled %v, wrote off %v, %v; want nothing", where, settled, writtenOff, err)
						}
						expectNothingBilled(t, env.direct(), e)
					} else {
						if st := states[e.RequestID]; st != "pending" {
							t.Fatalf("%s: the entry is %q, want pending", where, st)
						}
						if err != nil || !slices.Equal(settled, []string{e.RequestID}) || len(writtenOff) > 0 {
							t.Fatalf("%s: Reconcile: settled %v, wrote off %v, %v; want %s settled", where, settled, writtenOff, err, e.RequestID)
						}
						billingtest.ExpectBilledOnce(t, env.direct(), e)
					}
					env.expectSettledTable(ctx)
					if !hit {
						break
					}
				}
			}
		})
	}
}

// TestFaultReconcileLostAnswer loses, in turn, the answer of every call of
// a Reconcile (apply) that settles a priced request and writes off an
// unpriced hold. Reconcile again (a new process) finishes: the priced
// request is billed once, the hold leaves nothing, and a late Bill of it
// bills once.
func TestFaultReconcileLostAnswer(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			env := newFaultEnv(t, v.allOld, dynamoledger.Options{GCThreshold: v.gc})
			for n := 1; ; n++ {
				s := env.through()
				priced := billingtest.NewEntry(billingtest.ID("p"), billingtest.ID("k"), 5_000)
				held := billingtest.NewEntry(billingtest.ID("p"), billingtest.ID("k"), 6_000)
				// Reconcile takes them by deadline (the same), then id:
				// the priced one first, every run.
				priced.RequestID, held.RequestID = billingtest.ID("req-a"), billingtest.ID("req-b")
				for _, e := range []billing.Entry{priced, held} {
					if err := stepHold.run(ctx, s, e); err != nil {
						t.Fatal(err)
					}
				}
				if err := stepPrice.run(ctx, s, priced); err != nil {
					t.Fatal(err)
				}
				d := env.dropNth(n)
				_, err := s.Reconcile(ctx, reconcileNow(), true)
				hit, dropped, ops := d.stop()
				if !hit {
					if err != nil {
						t.Fatalf("Reconcile with no fault: %v", err)
					}
					t.Logf("Reconcile calls %v", ops)
				} else {
					t.Logf("answer of Reconcile's call %d (%s) lost: %v", n, dropped, err != nil)
					if _, err := env.direct().Reconcile(ctx, reconcileNow(), true); err != nil {
						t.Fatalf("Reconcile again: %v", err)
					}
				}
				billingtest.ExpectBilledOnce(t, env.direct(), priced)
				expectNothingBilled(t, env.direct(), held)
				env.expectSettledTable(ctx)
				billingtest.MustBill(t, env.direct(), held)
				billingtest.ExpectBilledOnce(t, env.direct(), held)
				if !hit {
					break
				}
			}
		})
	}
}
