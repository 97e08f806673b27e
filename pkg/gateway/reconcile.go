package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/metrics"
)

// DefaultReconcileEvery is how often the local server reconciles.
const DefaultReconcileEvery = 5 * time.Minute

// Reconcile runs the ledger's reconciler every interval until ctx ends: the
// local server's sweep (under Lambda the scheduled SweepFunction does it).
// It settles holds past their deadline: a priced one is billed, an unpriced
// one is written off at zero and logged.
// Each run is recorded in m when it is not nil.
func Reconcile(ctx context.Context, r billing.Reconciler, every time.Duration, now func() time.Time, log *slog.Logger, m metrics.SweepRecorder) {
	if every <= 0 {
		every = DefaultReconcileEvery
	}
	if now == nil {
		now = time.Now
	}
	t := time.NewTicker(every)
	defer t.Stop()
	// A first pass at start, so that a process restarted more often than
	// every interval still reconciles.
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// Of a tick and the end, both ready, select takes either:
			// no run starts after the end.
			if ctx.Err() != nil {
				return
			}
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		start := time.Now()
		rep, err := r.Reconcile(rctx, now(), true)
		cancel()
		if m != nil {
			var cost int64
			for _, e := range rep.Settled {
				cost += e.CostNanos
			}
			m.RecordSweep(metrics.Sweep{Settled: len(rep.Settled), WrittenOff: len(rep.WrittenOff), Skipped: len(rep.Skipped),
				SettledCostNanos: cost, Duration: time.Since(start), Failed: err != nil})
		}
		if len(rep.Skipped) > 0 {
			// Which ones and why: `admin reconcile` lists them.
			log.Error("reconcile could not settle some holds; the next run tries them again", "skipped", len(rep.Skipped))
		}
		if err != nil {
			log.Warn("reconcile stopped; the next run goes on", "error", err, "settled", len(rep.Settled), "written_off", len(rep.WrittenOff))
			continue
		}
		if len(rep.Settled) > 0 || len(rep.WrittenOff) > 0 {
			var cost int64
			for _, e := range rep.Settled {
				cost += e.CostNanos
			}
			log.Warn("reconciled bills left by failed or crashed requests", "settled", len(rep.Settled),
				"settled_cost_usd", billing.NanosToUSD(cost), "written_off", len(rep.WrittenOff))
		}
	}
}
