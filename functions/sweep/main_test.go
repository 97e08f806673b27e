package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/faultproxy"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
)

var server dynalite.Shared

func TestMain(m *testing.M) { dynalite.Main(m, &server) }

// fakeReconciler answers Reconcile with rec and err, and records its calls.
type fakeReconciler struct {
	rec   billing.Reconciliation
	err   error
	calls []bool // apply of each call
	nows  []time.Time
}

func (f *fakeReconciler) Reconcile(_ context.Context, now time.Time, apply bool) (billing.Reconciliation, error) {
	f.calls = append(f.calls, apply)
	f.nows = append(f.nows, now)
	return f.rec, f.err
}

// Identifiers that must never reach the log or the metrics.
const (
	secretKeyID = "key_SECRETKEYID0001"
	secretReqID = "req_SECRETREQUEST0001"
	secretProj  = "projSECRET"
)

func newTestSweeper(r billing.Reconciler) (*sweeper, *bytes.Buffer, *bytes.Buffer) {
	var logs, emf bytes.Buffer
	at := time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)
	clock := at
	return &sweeper{
		r: r, log: slog.New(slog.NewJSONHandler(&logs, nil)), out: &emf, stage: "prod",
		now: func() time.Time { t := clock; clock = clock.Add(1500 * time.Millisecond); return t },
	}, &logs, &emf
}

// emfLine decodes the single EMF line and checks its declaration.
func emfLine(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one EMF line, got %d: %q", len(lines), out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	var decl struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &decl); err != nil {
		t.Fatal(err)
	}
	if decl.AWS.Timestamp != time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC).UnixMilli() || len(decl.AWS.CloudWatchMetrics) != 1 {
		t.Fatalf("_aws = %+v", decl.AWS)
	}
	cw := decl.AWS.CloudWatchMetrics[0]
	if cw.Namespace != "Buzzgate" || len(cw.Dimensions) != 1 || strings.Join(cw.Dimensions[0], ",") != "Stage" || m["Stage"] != "prod" {
		t.Errorf("namespace/dimensions: %+v, Stage %v", cw, m["Stage"])
	}
	units := map[string]string{
		"SweepSettled": "Count", "SweepWrittenOff": "Count", "SweepSettledCost": "None", "SweepDuration": "Milliseconds",
	}
	if len(cw.Metrics) != len(units) {
		t.Errorf("metrics %+v, want %v", cw.Metrics, units)
	}
	for _, mt := range cw.Metrics {
		if units[mt.Name] != mt.Unit {
			t.Errorf("metric %s unit %q, want %q", mt.Name, mt.Unit, units[mt.Name])
		}
		if _, ok := m[mt.Name].(float64); !ok {
			t.Errorf("metric %s has no numeric value on the line", mt.Name)
		}
	}
	return m
}

func TestRunReportsCounts(t *testing.T) {
	f := &fakeReconciler{rec: billing.Reconciliation{
		Settled: []billing.Entry{
			{RequestID: secretReqID, Project: secretProj, KeyID: secretKeyID, CostNanos: 1_500_000_000},
			{RequestID: secretReqID + "2", Project: secretProj, KeyID: secretKeyID, CostNanos: 250_000_000},
		},
		WrittenOff: []billing.Hold{{RequestID: secretReqID + "3", Project: secretProj, KeyID: secretKeyID}},
	}}
	s, logs, emf := newTestSweeper(f)
	res, err := s.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Settled: 2, WrittenOff: 1, SettledCostNanos: 1_750_000_000}); res != want {
		t.Errorf("Result = %+v, want %+v", res, want)
	}
	if len(f.calls) != 1 || !f.calls[0] || !f.nows[0].Equal(time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("Reconcile calls: apply %v at %v; want one with apply at the run's start", f.calls, f.nows)
	}
	m := emfLine(t, emf.String())
	if m["SweepSettled"] != 2.0 || m["SweepWrittenOff"] != 1.0 || m["SweepSettledCost"] != 1.75 || m["SweepDuration"] != 1500.0 {
		t.Errorf("metric values: %v", m)
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", logs, err)
	}
	if line["level"] != "INFO" || line["settled"] != 2.0 || line["written_off"] != 1.0 || line["settled_cost_usd"] != 1.75 {
		t.Errorf("log line %v", line)
	}
	for _, secret := range []string{secretKeyID, secretReqID, secretProj} {
		if strings.Contains(logs.String()+emf.String(), secret) {
			t.Errorf("%q reached the log or the metrics", secret)
		}
	}
}

func TestRunFails(t *testing.T) {
	boom := errors.New("dynamodb unreachable")
	f := &fakeReconciler{err: boom, rec: billing.Reconciliation{Settled: []billing.Entry{{CostNanos: 1}}}}
	s, logs, emf := newTestSweeper(f)
	res, err := s.run(context.Background())
	if !errors.Is(err, boom) {
		t.Fatalf("run: %v, want the Reconcile error (Lambda counts it in Errors)", err)
	}
	if res.Settled != 1 {
		t.Errorf("Result = %+v: what was settled before the error is reported", res)
	}
	if m := emfLine(t, emf.String()); m["SweepSettled"] != 1.0 {
		t.Errorf("metrics on failure: %v", m)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), boom.Error()) {
		t.Errorf("log %q: want an error line with the cause", logs)
	}
}

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
	if _, err := s.run(ctx); err != nil {
		t.Errorf("after Restore: %v", err)
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
