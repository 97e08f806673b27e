//go:build integration

package dynamoledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/proc"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/billingtest"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
	"github.com/buzzgate/buzzgate/pkg/ddbtable"
)

func TestLedger(t *testing.T) {
	billingtest.Run(t, func(t *testing.T) billing.Ledger {
		return newStore(t, dynamoledger.Options{Shards: dynamoledger.DefaultShards})
	})
}

// Collecting the markers on every Bill: the epoch moves all the time, and
// the concurrent tests race Bills against collections.
func TestLedgerCollectEveryBill(t *testing.T) {
	billingtest.Run(t, func(t *testing.T) billing.Ledger {
		return newStore(t, dynamoledger.Options{GCThreshold: 1})
	})
}

// Through the proxy that answers a failed condition with the item, as
// DynamoDB does (ReturnValuesOnConditionCheckFailure=ALL_OLD).
func TestLedgerAllOld(t *testing.T) {
	billingtest.Run(t, func(t *testing.T) billing.Ledger {
		proxy := dynalite.AllOldProxy(t, server.Endpoint(t))
		return dynamoledger.New(dynalite.Client(t, proxy.Endpoint), sharedTable(t), dynamoledger.Options{GCThreshold: 2})
	})
}

func TestKeyStore(t *testing.T) {
	billingtest.RunKeyStore(t, pepper, func(t *testing.T) billing.KeyStore { return newStore(t, dynamoledger.Options{}) })
}

// account reads the raw spend counter of a project (tests run one shard).
func account(t *testing.T, project string) map[string]types.AttributeValue {
	t.Helper()
	got, err := dynalite.Client(t, server.Endpoint(t)).GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(sharedTable(t)),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dynamoledger.PKSpend + "00#" + project}, "sk": &types.AttributeValueMemberS{Value: dynamoledger.SKSpend}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	return got.Item
}

func markerCount(t *testing.T, project string) int {
	t.Helper()
	n := 0
	for name := range account(t, project) {
		if strings.HasPrefix(name, "m#") {
			n++
		}
	}
	return n
}

func epoch(t *testing.T, project string) string {
	t.Helper()
	if v, ok := account(t, project)["epoch"].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return "0"
}

// entryState reads the state of a raw entry item.
func entryState(t *testing.T, requestID string) string {
	t.Helper()
	got, err := dynalite.Client(t, server.Endpoint(t)).GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(sharedTable(t)),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dynamoledger.PKRequest + requestID}, "sk": &types.AttributeValueMemberS{Value: dynamoledger.SKEntry}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if v, ok := got.Item["state"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// faulty is an HTTP client for the SDK that makes call number failAt (from
// 1) fail: before it reaches DynamoDB (the process died before the call),
// or after (the call happened and the process died before it saw the
// answer). With the SDK's retries off, that is a crash at that step.
// failIf, when set, picks the failing call instead: the first for which it
// is true (given the operation and the request's body).
type faulty struct {
	failAt int
	after  bool
	failIf func(op string, body []byte) bool

	mu    sync.Mutex
	calls int
	ops   []string
}

func (f *faulty) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if f.failIf != nil && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.ops = append(f.ops, op(req))
	if f.failIf != nil && f.failAt == 0 && f.failIf(op(req), body) {
		f.failAt = n
	}
	fail := n == f.failAt
	f.mu.Unlock()
	if fail && !f.after {
		return nil, errors.New("injected crash before the call")
	}
	resp, err := http.DefaultClient.Do(req)
	if fail && f.after && err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errors.New("injected crash after the call")
	}
	return resp, err
}

func (f *faulty) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func op(req *http.Request) string {
	target := req.Header.Get("X-Amz-Target")
	return target[strings.LastIndex(target, ".")+1:]
}

func noRetry(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }

func withHTTP(c aws.HTTPClient) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.HTTPClient = c }
}

// crashScenario is one Bill that crashes at the given calls (one failing
// call per attempt, then a healthy Bill), on an account where others were
// billed first so that the Bill collects markers when gc says so.
type crashScenario struct {
	gc      int   // GCThreshold
	after   bool  // the failing call reaches DynamoDB
	failAts []int // the failing call of each crashed attempt
}

// run returns whether every failAt was reached (false: the Bill needed
// fewer calls, so the scenario is done).
func (sc crashScenario) run(t *testing.T) bool {
	t.Helper()
	ctx := t.Context()
	project, keyID := billingtest.ID("p"), billingtest.ID("k")
	healthy := func() *dynamoledger.Store { return newStore(t, dynamoledger.Options{GCThreshold: sc.gc}) }

	// Others first: gc-1 markers, so that e's step 3 reaches gc.
	var sum int64
	for i := range sc.gc - 1 {
		o := billingtest.NewEntry(project, keyID, int64(100+i))
		billingtest.MustBill(t, healthy(), o)
		sum += o.CostNanos
	}
	if got := markerCount(t, project); got != sc.gc-1 {
		t.Fatalf("%d markers before, want %d", got, sc.gc-1)
	}
	e := billingtest.NewEntry(project, keyID, 14_000)
	sum += e.CostNanos

	reached := true
	for _, failAt := range sc.failAts {
		f := &faulty{failAt: failAt, after: sc.after}
		// A fresh Store each time: a crash loses the process's memory.
		s := newStore(t, dynamoledger.Options{GCThreshold: sc.gc}, noRetry, withHTTP(f))
		err := s.Bill(ctx, e)
		if f.count() < failAt {
			reached = false
			if err != nil {
				t.Fatalf("Bill with no failure: %v", err)
			}
			break
		}
		t.Logf("crash at call %d %v (after=%v): Bill: %v", failAt, f.ops, sc.after, err)
	}
	for range 2 {
		billingtest.MustBill(t, healthy(), e)
	}
	billingtest.ExpectSpent(t, healthy(), project, keyID, sum, sum)
	if st := entryState(t, e.RequestID); st != "applied" {
		t.Fatalf("entry state %q, want applied", st)
	}
	tot := billingtest.MustTotals(t, healthy(), project, billingtest.Base, billingtest.Base.Add(time.Second))
	if tot.Total.Requests != int64(sc.gc) || tot.Total.CostNanos != sum {
		t.Fatalf("Totals %+v, want %d requests of %d", tot.Total, sc.gc, sum)
	}
	// The markers are bounded: whatever a crash left, the next Bill leaves
	// fewer than the threshold.
	next := billingtest.NewEntry(project, keyID, 1)
	billingtest.MustBill(t, healthy(), next)
	if n := markerCount(t, project); n >= sc.gc {
		t.Fatalf("%d markers left after the next Bill, want fewer than %d", n, sc.gc)
	}
	billingtest.ExpectSpent(t, healthy(), project, keyID, sum+1, sum+1)
	return reached
}

// TestCrashAtEveryStep makes a Bill fail at each of its calls in turn,
// before or after the call reached DynamoDB, with and without a collection
// in it, and once more at every call of the retry; then a healthy Bill
// runs (twice), and the spend, the ledger and the markers are exact.
func TestCrashAtEveryStep(t *testing.T) {
	for _, gc := range []int{1, 3, dynamoledger.DefaultGCThreshold} {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("gc=%d/after=%v", gc, after), func(t *testing.T) {
				n := 0
				for failAt := 1; ; failAt++ {
					if !(crashScenario{gc: gc, after: after, failAts: []int{failAt}}).run(t) {
						break
					}
					n++
				}
				if n < 4 {
					t.Fatalf("only %d crash points", n)
				}
				// Crash twice: at every call, then at every call of the
				// Bill that finishes it (the default threshold only adds
				// Bills before).
				if gc == dynamoledger.DefaultGCThreshold {
					return
				}
				for first := 1; first <= n; first++ {
					for second := 1; (crashScenario{gc: gc, after: after, failAts: []int{first, second}}).run(t); second++ {
					}
				}
			})
		}
	}
}

// gate is an HTTP client that holds the first call of an operation until
// released.
type gate struct {
	op      string
	reached chan struct{}
	release chan struct{}
	mu      sync.Mutex
	tripped bool
}

func (g *gate) Do(req *http.Request) (*http.Response, error) {
	g.mu.Lock()
	hold := !g.tripped && op(req) == g.op
	if hold {
		g.tripped = true
	}
	g.mu.Unlock()
	if hold {
		close(g.reached)
		<-g.release
	}
	return http.DefaultClient.Do(req)
}

// TestSlowBillAfterCollection is the race that a marker removed too early
// would lose: Bill B sees the entry pending and stalls before its step 3;
// Bill A of the same entry finishes it, and its collection removes the
// marker; then B's step 3 runs. The epoch fails it, and B finds the entry
// applied: counted once.
func TestSlowBillAfterCollection(t *testing.T) {
	ctx := t.Context()
	project, keyID := billingtest.ID("p"), billingtest.ID("k")
	e := billingtest.NewEntry(project, keyID, 14_000)
	g := &gate{op: "UpdateItem", reached: make(chan struct{}), release: make(chan struct{})}
	slow := newStore(t, dynamoledger.Options{GCThreshold: 1}, withHTTP(g))
	done := make(chan error, 1)
	go func() { done <- slow.Bill(ctx, e) }()
	<-g.reached

	fast := newStore(t, dynamoledger.Options{GCThreshold: 1})
	billingtest.MustBill(t, fast, e)
	if n, ep := markerCount(t, project), epoch(t, project); n != 0 || ep != "1" {
		t.Fatalf("after the fast Bill: %d markers, epoch %s; want 0 and 1", n, ep)
	}
	billingtest.ExpectSpent(t, fast, project, keyID, e.CostNanos, e.CostNanos)

	close(g.release)
	if err := <-done; err != nil {
		t.Fatalf("slow Bill: %v", err)
	}
	billingtest.ExpectBilledOnce(t, fast, e)
	if n := markerCount(t, project); n != 0 {
		t.Fatalf("%d markers, want 0", n)
	}
}

// A Bill whose cached epoch is stale (another instance collected) fails its
// step 3 once, sees the new epoch and bills.
func TestStaleEpoch(t *testing.T) {
	project, keyID := billingtest.ID("p"), billingtest.ID("k")
	var counter dynalite.Counter
	a := newStore(t, dynamoledger.Options{GCThreshold: 1}, dynalite.CountCalls(&counter))
	b := newStore(t, dynamoledger.Options{GCThreshold: 100}, dynalite.CountCalls(&counter))
	billingtest.MustAccount(t, b, project, keyID) // b caches epoch 0
	billingtest.MustBill(t, a, billingtest.NewEntry(project, keyID, 1))
	if ep := epoch(t, project); ep != "1" {
		t.Fatalf("epoch %s, want 1", ep)
	}
	counter.Reset()
	e := billingtest.NewEntry(project, keyID, 10)
	billingtest.MustBill(t, b, e)
	// Without a Hold: a failed Price UpdateItem and its GetItem, the
	// pointer, the entry, the index; then on each of the two counters (the
	// shard and the key, both collected by a) a failed UpdateItem, a
	// GetItem of the counter and one of the entry, the UpdateItem again;
	// the entry applied, the pointer deleted.
	want := map[string]int{"PutItem": 3, "UpdateItem": 6, "GetItem": 5, "DeleteItem": 1}
	if got := counter.Snapshot(); !maps.Equal(got, want) {
		t.Errorf("Bill with a stale epoch: calls %v, want %v", got, want)
	}
	billingtest.ExpectSpent(t, b, project, keyID, 11, 11)
	if n := markerCount(t, project); n != 1 {
		t.Fatalf("%d markers, want 1 (b collects from 100)", n)
	}
}

// Reconcile finishes an entry whose Bill died after writing it and its index
// item, and that nobody billed again.
func TestReconcileFinishesACrashedBill(t *testing.T) {
	ctx := t.Context()
	project, keyID := billingtest.ID("p"), billingtest.ID("k")
	e := billingtest.NewEntry(project, keyID, 14_000)
	// The project shard's UpdateItem (step 3) fails; the key's, made at
	// the same time, may land.
	f := &faulty{failIf: func(op string, body []byte) bool {
		return op == "UpdateItem" && bytes.Contains(body, []byte(`"spend#`))
	}}
	if err := newStore(t, dynamoledger.Options{}, noRetry, withHTTP(f)).Bill(ctx, e); err == nil {
		t.Fatalf("Bill did not fail")
	}
	t.Logf("calls: %v", f.ops)
	s := newStore(t, dynamoledger.Options{})
	if a, err := s.Account(ctx, project, keyID); err != nil || a.SpentNanos != 0 || (a.KeySpentNanos != 0 && a.KeySpentNanos != 14_000) {
		t.Fatalf("after the crash: %+v, %v; want the project's spend 0 and the key's 0 or 14000", a, err)
	}
	billingtest.MustBill(t, s, billingtest.NewEntry(project, keyID, 1))
	r, err := s.Reconcile(ctx, time.Now().Add(time.Second), true)
	if err != nil || !slices.ContainsFunc(r.Settled, func(x billing.Entry) bool { return x.RequestID == e.RequestID }) {
		t.Fatalf("Reconcile: %+v, %v; want %s settled", r, err, e.RequestID)
	}
	billingtest.ExpectSpent(t, s, project, keyID, 14_001, 14_001)
	r, err = s.Reconcile(ctx, time.Now().Add(time.Second), true)
	if err != nil || slices.ContainsFunc(r.Settled, func(x billing.Entry) bool { return x.RequestID == e.RequestID }) {
		t.Fatalf("Reconcile again: %+v, %v; want nothing of %s", r, err, e.RequestID)
	}
	billingtest.ExpectSpent(t, s, project, keyID, 14_001, 14_001)
}

// Many Bills on one account: the markers stay under the threshold (plus the
// Bills in flight), the epoch counts the collections.
func TestMarkersBounded(t *testing.T) {
	project, keyID := billingtest.ID("p"), billingtest.ID("k")
	s := newStore(t, dynamoledger.Options{})
	var sum int64
	for i := range 3*dynamoledger.DefaultGCThreshold + 2 {
		e := billingtest.NewEntry(project, keyID, int64(i+1))
		billingtest.MustBill(t, s, e)
		sum += e.CostNanos
		if n := markerCount(t, project); n >= dynamoledger.DefaultGCThreshold {
			t.Fatalf("after %d Bills: %d markers", i+1, n)
		}
	}
	if n, ep := markerCount(t, project), epoch(t, project); n != 2 || ep != "3" {
		t.Fatalf("%d markers, epoch %s; want 2 and 3", n, ep)
	}
	billingtest.ExpectSpent(t, s, project, keyID, sum, sum)
}

func TestUnavailable(t *testing.T) {
	addr, err := proc.FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + addr
	s := dynamoledger.New(dynalite.Client(t, endpoint, noRetry), "missing", dynamoledger.Options{})
	ctx := t.Context()
	e := billingtest.NewEntry("p", "k", 1)
	_, accountErr := s.Account(ctx, "p", "k")
	_, totalsErr := s.Totals(ctx, "p", billingtest.Base, billingtest.Base.Add(time.Hour))
	_, lookupErr := s.Lookup(ctx, "hash")
	for name, err := range map[string]error{
		"Bill":     s.Bill(ctx, e),
		"Account":  accountErr,
		"Totals":   totalsErr,
		"Lookup":   lookupErr,
		"Feedback": s.Feedback(ctx, billing.Feedback{RequestID: "r"}),
	} {
		if !errors.Is(err, billing.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
	}
	// A missing table too.
	missing := dynamoledger.New(dynalite.Client(t, server.Endpoint(t), noRetry), "no-such-table", dynamoledger.Options{})
	if err := missing.Bill(ctx, e); !errors.Is(err, billing.ErrUnavailable) {
		t.Errorf("Bill on a missing table: %v, want ErrUnavailable", err)
	}
}

// TestCallCounts measures the DynamoDB calls of each operation, on dynalite
// and through the ALL_OLD proxy (as on DynamoDB).
func TestCallCounts(t *testing.T) {
	var counter dynalite.Counter
	proxy := dynalite.AllOldProxy(t, server.Endpoint(t))
	stores := map[string]*dynamoledger.Store{
		"dynalite": newStore(t, dynamoledger.Options{GCThreshold: 2}, dynalite.CountCalls(&counter)),
		"DynamoDB": dynamoledger.New(dynalite.Client(t, proxy.Endpoint, dynalite.CountCalls(&counter)), sharedTable(t), dynamoledger.Options{GCThreshold: 2, Pepper: pepper, Shards: 1}),
	}
	ctx := t.Context()
	type calls = map[string]int
	var report []string
	for _, name := range []string{"dynalite", "DynamoDB"} {
		s := stores[name]
		project, keyID := billingtest.ID("p"), billingtest.ID("k")
		measure := func(what string, want calls, f func() error) {
			t.Helper()
			counter.Reset()
			if err := f(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			got := counter.Snapshot()
			report = append(report, fmt.Sprintf("%-9s %-44s %v", name, what, got))
			if !maps.Equal(got, want) {
				t.Errorf("%s %s: calls %v, want %v", name, what, got, want)
			}
		}
		e1 := billingtest.NewEntry(project, keyID, 1000)
		e2 := billingtest.NewEntry(project, keyID, 1000)
		again := calls{"UpdateItem": 1, "GetItem": 1}
		// The second Bill that counts: each counter then holds 2 markers
		// (GCThreshold 2) and is collected.
		noHold := calls{"UpdateItem": 6, "GetItem": 1, "PutItem": 3, "DeleteItem": 1, "BatchGetItem": 2}
		afterPrice := calls{"UpdateItem": 4, "GetItem": 1, "PutItem": 1, "DeleteItem": 1}
		if name == "DynamoDB" {
			again = calls{"UpdateItem": 1}
			// No entry: ALL_OLD has nothing, so a GetItem here too.
			noHold = calls{"UpdateItem": 6, "GetItem": 1, "PutItem": 3, "DeleteItem": 1, "BatchGetItem": 2}
			afterPrice = calls{"UpdateItem": 4, "PutItem": 1, "DeleteItem": 1}
		}
		hold := func(e billing.Entry) billing.Hold {
			return billing.Hold{RequestID: e.RequestID, Project: e.Project, KeyID: e.KeyID, Model: e.Model, At: e.At, Deadline: e.At.Add(time.Hour)}
		}
		measure("Seed (one key)", calls{"UpdateItem": 2}, func() error { return s.Seed(ctx, project, nil, map[string]*int64{keyID: nil}) })
		measure("Account", calls{"BatchGetItem": 1}, func() error { _, err := s.Account(ctx, project, keyID); return err })
		measure("Hold", calls{"PutItem": 2}, func() error { return s.Hold(ctx, hold(e1)) })
		measure("Price", calls{"UpdateItem": 1}, func() error { return s.Price(ctx, e1) })
		measure("Bill after Price (its price UpdateItem fails: priced already)", afterPrice, func() error { return s.Bill(ctx, e1) })
		measure("Bill again", again, func() error { return s.Bill(ctx, e1) })
		measure("Bill without Hold, collects 2+2 markers", noHold, func() error {
			return s.Bill(ctx, billingtest.NewEntry(project, keyID, 10))
		})
		e0 := billingtest.NewEntry(project, keyID, 0)
		_ = s.Hold(ctx, hold(e0))
		measure("Bill zero cost after Hold", calls{"UpdateItem": 2, "PutItem": 1, "DeleteItem": 1}, func() error { return s.Bill(ctx, e0) })
		_ = s.Hold(ctx, hold(e2))
		measure("Bill after Hold (no Price)", calls{"PutItem": 1, "UpdateItem": 4, "DeleteItem": 1}, func() error { return s.Bill(ctx, e2) })
		measure("Unhold", calls{"DeleteItem": 2}, func() error {
			e := billingtest.NewEntry(project, keyID, 1)
			if err := s.Hold(ctx, hold(e)); err != nil {
				return err
			}
			counter.Reset()
			return s.Unhold(ctx, project, e.RequestID)
		})
		measure("Totals", calls{"Query": 1}, func() error {
			_, err := s.Totals(ctx, project, billingtest.Base, billingtest.Base.Add(time.Hour))
			return err
		})
		measure("Feedback", calls{"UpdateItem": 1}, func() error {
			return s.Feedback(ctx, billing.Feedback{RequestID: e1.RequestID, EndUser: "u", Label: "good"})
		})
		measure("SetBalance", calls{"BatchGetItem": 1, "UpdateItem": 1}, func() error { return s.SetBalance(ctx, project, new(int64)) })
		measure("SetKeyLimit", calls{"UpdateItem": 1}, func() error { return s.SetKeyLimit(ctx, project, keyID, new(int64)) })
		measure("CreateProject", calls{"UpdateItem": 1}, func() error { return s.CreateProject(ctx, billingtest.ID("p"), nil) })
		var rec billing.KeyRecord
		measure("Issue", calls{"GetItem": 1, "PutItem": 2}, func() error {
			var err error
			_, rec, err = s.Issue(ctx, project)
			return err
		})
		measure("Lookup", calls{"GetItem": 1}, func() error { _, err := s.Lookup(ctx, rec.Hash); return err })
		measure("Revoke", calls{"GetItem": 1, "UpdateItem": 1}, func() error { return s.Revoke(ctx, rec.KeyID) })
		measure("ImportKey (new)", calls{"GetItem": 1, "PutItem": 2}, func() error { return s.ImportKey(ctx, project, "h-"+project, "cfg-"+project) })
		measure("ImportKey (known)", calls{"GetItem": 1}, func() error { return s.ImportKey(ctx, project, "h-"+project, "cfg-"+project) })
	}
	slices.Sort(report)
	t.Logf("DynamoDB calls per operation:\n%s", strings.Join(report, "\n"))
}

// The table is shared with the idempotency records, and the billing items
// never collide with them (other pk prefixes and sort keys).
func TestSharesTheIdempotencyTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	client := dynalite.Client(t, server.Endpoint(t))
	// EnsureTable on a table that exists is a no-op (another instance, or
	// the idempotency store, created it).
	if err := ddbtable.EnsureTable(ctx, client, sharedTable(t)); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	s := dynamoledger.New(client, sharedTable(t), dynamoledger.Options{})
	e := billingtest.NewEntry(billingtest.ID("p"), "k", 5)
	billingtest.MustBill(t, s, e)
	billingtest.ExpectBilledOnce(t, s, e)
}

func TestHolds(t *testing.T) {
	billingtest.RunHolds(t, func(t *testing.T) billingtest.Ledger {
		return newStore(t, dynamoledger.Options{Shards: dynamoledger.DefaultShards})
	})
}

func TestHoldsAllOld(t *testing.T) {
	billingtest.RunHolds(t, func(t *testing.T) billingtest.Ledger {
		proxy := dynalite.AllOldProxy(t, server.Endpoint(t))
		return dynamoledger.New(dynalite.Client(t, proxy.Endpoint), sharedTable(t), dynamoledger.Options{GCThreshold: 1})
	})
}
