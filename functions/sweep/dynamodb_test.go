//go:build integration

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/faultproxy"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
)

// server is the dynalite server the package's DynamoDB tests share,
// started by the first test that needs it.
var server dynalite.Shared

func TestMain(m *testing.M) { dynalite.Main(m, &server) }

// TestSweepOnDynamoDB builds the ledger as the function does (from the
// environment) against dynalite, through a fault proxy: it settles a priced
// hold and writes off an unpriced one, both past their deadline, leaves a
// hold within its deadline alone, and fails (an error for Lambda's Errors
// metric) while the table cannot be reached.
func TestSweepOnDynamoDB(t *testing.T) {
	endpoint := server.Endpoint(t)
	proxy, err := faultproxy.New(strings.TrimPrefix(endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetGentleUpstream(true) // fault the link, not dynalite
	t.Cleanup(func() { proxy.Close() })
	// A table of its own: Reconcile sees every project of a table.
	table := dynalite.Table(t, dynalite.Client(t, endpoint), "sweep")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.URL())
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	ctx := context.Background()

	// The gateway's side: a ledger on the same table, without the proxy.
	gw := dynamoledger.New(dynalite.Client(t, endpoint), table, dynamoledger.Options{})
	if err := gw.Seed(ctx, "acme", nil, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	hold := func(id string, deadline time.Time) billing.Hold {
		h := billing.Hold{RequestID: id, Project: "acme", KeyID: "key_sweep0001", Model: "demo/chat", At: now.Add(-10 * time.Minute), Deadline: deadline}
		if err := gw.Hold(ctx, h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	priced := hold("req_sweeppriced00001", now.Add(-time.Minute))
	if err := gw.Price(ctx, billing.Entry{RequestID: priced.RequestID, Project: "acme", KeyID: priced.KeyID, Model: priced.Model, Provider: "alpha", CostNanos: 42, At: priced.At}); err != nil {
		t.Fatal(err)
	}
	hold("req_sweepunpriced001", now.Add(-time.Minute))
	hold("req_sweeplater000001", now.Add(time.Hour))

	ledger, err := newLedger(ctx, func(k string) string { return map[string]string{envTable: table}[k] })
	if err != nil {
		t.Fatal(err)
	}
	s, _, emf := newTestSweeper(ledger)
	s.now = time.Now
	res, err := s.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Settled: 1, WrittenOff: 1, SettledCostNanos: 42}); res != want {
		t.Errorf("first run: %+v, want %+v", res, want)
	}
	if !strings.Contains(emf.String(), `"SweepSettled":1`) {
		t.Errorf("EMF %q", emf)
	}
	acct, err := gw.Account(ctx, "acme", priced.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	if acct.SpentNanos != 42 {
		t.Errorf("spent %d after the sweep, want 42", acct.SpentNanos)
	}
	// Again: nothing left to do.
	if res, err := s.run(ctx); err != nil || res != (Result{}) {
		t.Errorf("second run: %+v, %v; want nothing", res, err)
	}

	// The table cannot be reached: the run fails.
	proxy.Cut()
	if _, err := s.run(ctx); err == nil {
		t.Error("run succeeded while DynamoDB was cut off")
	}
	proxy.Restore()
	// The first runs may meet connections the cut reset that the SDK's
	// transport still holds as idle (a Bill writes its items at once, so
	// there may be several): with one attempt a call, such a run fails.
	// Once they are spent, a run succeeds.
	var runErr error
	for range 10 {
		if _, runErr = s.run(ctx); runErr == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if runErr != nil {
		t.Errorf("after Restore: %v", runErr)
	}
}

// TestFaultProxyMatchesDynamoDBOps checks faultproxy.DynamoDBOp against the
// AWS SDK's real requests (the sweep's tests are where both meet): the
// answer of the matched operation is lost, the others go through.
func TestFaultProxyMatchesDynamoDBOps(t *testing.T) {
	endpoint := server.Endpoint(t)
	proxy, err := faultproxy.New(strings.TrimPrefix(endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetGentleUpstream(true) // fault the link, not dynalite
	t.Cleanup(func() { proxy.Close() })
	ctx := context.Background()
	table := dynalite.Table(t, dynalite.Client(t, endpoint), "sweepfp")
	ledger := dynamoledger.New(dynalite.Client(t, proxy.URL(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }), table, dynamoledger.Options{})
	proxy.DropResponses(1, faultproxy.DynamoDBOp("Query"))
	if _, err := ledger.Account(ctx, "acme", "key_faultproxy01"); err != nil {
		t.Fatalf("Account (no Query): %v", err)
	}
	if _, err := ledger.Reconcile(ctx, time.Now(), false); err == nil {
		t.Error("Reconcile succeeded though its Query's answer was dropped")
	}
	if st := proxy.Stats(); st.Dropped != 1 || st.DropsLeft != 0 {
		t.Errorf("Stats = %+v, want 1 dropped", st)
	}
	if _, err := ledger.Reconcile(ctx, time.Now(), false); err != nil {
		t.Errorf("Reconcile after the drop: %v", err)
	}
}
