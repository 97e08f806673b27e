package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/metrics"
)

// scriptedReconciler answers each Reconcile with the next of its results,
// and cancels the loop after the last.
type scriptedReconciler struct {
	results []billing.Reconciliation
	errs    []error
	calls   int
	cancel  context.CancelFunc
}

func (r *scriptedReconciler) Reconcile(context.Context, time.Time, bool) (billing.Reconciliation, error) {
	i := r.calls
	r.calls++
	if r.calls == len(r.results) {
		r.cancel()
	}
	return r.results[i], r.errs[i]
}

type sweeps []metrics.Sweep

func (s *sweeps) RecordSweep(w metrics.Sweep) { *s = append(*s, w) }

// TestReconcileRecordsSweeps: each run of the local server's reconciler is
// recorded with its counts, the settled cost and whether it failed.
func TestReconcileRecordsSweeps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &scriptedReconciler{
		results: []billing.Reconciliation{
			{Settled: []billing.Entry{{CostNanos: 5}, {CostNanos: 7}}, WrittenOff: []billing.Hold{{}}},
			{Skipped: []billing.Skip{{}, {}}},
		},
		errs:   []error{nil, errors.New("store down")},
		cancel: cancel,
	}
	var got sweeps
	Reconcile(ctx, r, time.Millisecond, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), &got)
	if len(got) != 2 {
		t.Fatalf("%d runs recorded, want 2: %+v", len(got), got)
	}
	for i := range got {
		got[i].Duration = 0
	}
	want := sweeps{{Settled: 2, WrittenOff: 1, SettledCostNanos: 12}, {Skipped: 2, Failed: true}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("run %d recorded as %+v, want %+v", i, got[i], want[i])
		}
	}
}
