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

	"github.com/buzzgate/buzzgate/pkg/billing"
)

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
		"SweepSettled": "Count", "SweepWrittenOff": "Count", "SweepSkipped": "Count", "SweepSettledCost": "None", "SweepDuration": "Milliseconds",
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
		Skipped:    []billing.Skip{{RequestID: secretReqID + "4", Project: secretProj, Reason: "an entry " + secretReqID + "4 it cannot read"}},
	}}
	s, logs, emf := newTestSweeper(f)
	res, err := s.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Settled: 2, WrittenOff: 1, Skipped: 1, SettledCostNanos: 1_750_000_000}); res != want {
		t.Errorf("Result = %+v, want %+v", res, want)
	}
	if len(f.calls) != 1 || !f.calls[0] || !f.nows[0].Equal(time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("Reconcile calls: apply %v at %v; want one with apply at the run's start", f.calls, f.nows)
	}
	m := emfLine(t, emf.String())
	if m["SweepSettled"] != 2.0 || m["SweepWrittenOff"] != 1.0 || m["SweepSkipped"] != 1.0 || m["SweepSettledCost"] != 1.75 || m["SweepDuration"] != 1500.0 {
		t.Errorf("metric values: %v", m)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log %q: %v", logs, err)
		}
		lines = append(lines, line)
	}
	if len(lines) != 2 || lines[0]["level"] != "ERROR" || lines[0]["skipped"] != 1.0 {
		t.Fatalf("log lines %v: want an error line for the skipped hold, then the run's", lines)
	}
	if line := lines[1]; line["level"] != "INFO" || line["settled"] != 2.0 || line["written_off"] != 1.0 || line["skipped"] != 1.0 || line["settled_cost_usd"] != 1.75 {
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

// TestRunCostPlainDecimal: the run's settled cost is a plain decimal in
// its log line and its metrics line, as an answer's usage.cost is.
func TestRunCostPlainDecimal(t *testing.T) {
	f := &fakeReconciler{rec: billing.Reconciliation{Settled: []billing.Entry{{RequestID: secretReqID, Project: secretProj, KeyID: secretKeyID, CostNanos: 500}}}}
	s, logs, emf := newTestSweeper(f)
	if _, err := s.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"settled_cost_usd":0.0000005,`) || !strings.Contains(emf.String(), `"SweepSettledCost":0.0000005`) {
		t.Errorf("log %s\nmetrics %s", logs, emf)
	}
}
