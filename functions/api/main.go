// Command api is buzzgate's gateway. Under AWS Lambda, or the Runtime
// Interface Emulator (AWS_LAMBDA_RUNTIME_API is set), it serves API Gateway
// REST proxy events and streams its answers (pkg/lambdaedge), or buffers
// them when SAM CLI runs it locally (AWS_SAM_LOCAL=true); elsewhere it
// serves HTTP on BUZZGATE_ADDR (default 127.0.0.1:8080), and Prometheus
// metrics on BUZZGATE_METRICS_ADDR when that is set. Either way it logs
// JSON lines to stderr.
//
// buzzgate is licensed under the Apache License, Version 2.0 (LICENSE at
// the repository's root); docs/licenses.md lists the licences of the
// modules it links.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/buzzgate/buzzgate/internal/gcfloor"
	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/lambdaedge"
	"github.com/buzzgate/buzzgate/pkg/metrics"
)

func main() {
	// BUZZGATE_LOG_LEVEL: debug, info (default), warn or error.
	var level slog.Level
	if v := os.Getenv("BUZZGATE_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			level = slog.LevelInfo
		}
	}
	// The live heap is a few MiB: without a floor, every few large request
	// bodies would start a collection (internal/gcfloor).
	defer gcfloor.Start(gcfloor.Floor)()
	run := serveHTTP
	var out io.Writer = os.Stderr
	if os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		run = serveLambda
	} else {
		// The local server writes its log lines in batches (lineBuffer).
		lb := newLineBuffer(os.Stderr, 64<<10, 100*time.Millisecond)
		defer lb.Close()
		out = lb
	}
	logger := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level}))
	// Also the log package's output (the Lambda runtime's, net/http's), as
	// warnings: it reports failures.
	slog.SetDefault(logger)
	slog.SetLogLoggerLevel(slog.LevelWarn)
	if err := run(logger); err != nil {
		logger.Error("buzzgate stopped", "error", err)
		if lb, ok := out.(*lineBuffer); ok {
			lb.Close()
		}
		os.Exit(1)
	}
}

// serveLambda builds the gateway during Lambda's init phase (at most 10s,
// and not billed the same way), then serves events; it returns only when
// the app cannot be built.
func serveLambda(logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	a, err := app.New(ctx, app.Options{Getenv: os.Getenv, Logger: logger})
	cancel()
	if err != nil {
		return err
	}
	h := finishWithin(a, logger, 0)
	if samLocal(os.Getenv) {
		// Buffered, the answer itself waits for the finishing writes:
		// not for most of the 900 s a deployed invocation may wait.
		h = finishWithin(a, logger, samLocalFinishWait)
		logger.Info("buzzgate serving Lambda events, buffered for SAM CLI (AWS_SAM_LOCAL)", "models", len(a.Config.Models), "providers", len(a.Config.Providers))
		lambdaedge.StartBuffered(h)
		return nil
	}
	logger.Info("buzzgate serving Lambda events", "models", len(a.Config.Models), "providers", len(a.Config.Providers))
	lambdaedge.Start(h)
	return nil
}

// samLocalFinishWait bounds how long a buffered answer under SAM CLI waits
// for finishing writes that failed (a local DynamoDB gone); what is left,
// the leases and the reconciler settle, as when an environment dies.
const samLocalFinishWait = 10 * time.Second

// samLocal reports whether SAM CLI runs the function (`sam local invoke`,
// `sam local start-api`): it sets AWS_SAM_LOCAL=true in every local
// container and reads the answer as a buffered API Gateway proxy response
// (JSON), which it cannot do with the streamed integration format. There
// the function answers buffered: an event stream arrives whole. Deployed,
// the variable is unset and the answer streams.
func samLocal(getenv func(string) string) bool {
	return getenv("AWS_SAM_LOCAL") == "true"
}

// finishWithin keeps each invocation open after its answer (flushed) while
// the finisher retries a write of its own request that failed (a record's
// completion, a bill; steps an earlier invocation left retrying do not
// hold it):
// a Lambda execution environment is frozen between invocations, so a retry
// left for later might never run. It waits until the invocation's deadline
// less a margin; what is still undone then, the SweepFunction settles
// (bills) or the record's lease ends (a 409 for its retries). Buffered
// (under SAM CLI) the flush sends nothing, so there the answer waits too.
//
// limit, when positive, bounds the wait further.
func finishWithin(a *app.App, logger *slog.Logger, limit time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gctx, group := gateway.WithGroup(r.Context())
		a.Handler.ServeHTTP(w, r.WithContext(gctx))
		if group.Pending() == 0 {
			return
		}
		_ = http.NewResponseController(w).Flush()
		ctx := context.WithoutCancel(r.Context())
		if d, ok := r.Context().Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
			defer cancel()
		}
		if limit > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
		}
		if err := group.Wait(ctx); err != nil {
			logger.Warn("finishing steps still pending at the invocation's end", "pending", group.Pending())
		}
	})
}

// startPprof serves net/http/pprof on addr; nil unless built with -tags
// pprof.
var startPprof func(addr string, logger *slog.Logger)

func serveHTTP(logger *slog.Logger) error {
	initCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(initCtx, app.Options{Getenv: os.Getenv, Logger: logger})
	if err != nil {
		return err
	}
	addr := os.Getenv(app.EnvAddr)
	if addr == "" {
		addr = app.DefaultAddr
	}
	srv := &http.Server{
		Addr:              addr,
		Handler:           a.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if a.Reconciler != nil {
		// The local server settles what failed or crashed requests left
		// (under Lambda the scheduled SweepFunction does).
		sweeps, _ := a.Metrics.(metrics.SweepRecorder)
		go gateway.Reconcile(ctx, a.Reconciler, gateway.DefaultReconcileEvery, nil, logger, sweeps)
	}
	// BUZZGATE_PPROF_ADDR (off by default): net/http/pprof on its own
	// loopback listener, for profiling under load (tools/loadbench), in
	// a build with -tags pprof only (pprof.go), which keeps it and its
	// dependencies out of the Lambda bootstrap.
	if pa := os.Getenv("BUZZGATE_PPROF_ADDR"); pa != "" {
		if host, _, err := net.SplitHostPort(pa); err != nil || !net.ParseIP(host).IsLoopback() {
			return fmt.Errorf("BUZZGATE_PPROF_ADDR=%q: want a loopback IP:port", pa)
		}
		if startPprof == nil {
			return fmt.Errorf("BUZZGATE_PPROF_ADDR is set but this binary was built without -tags pprof")
		}
		startPprof(pa, logger)
	}
	errc := make(chan error, 2)
	// BUZZGATE_METRICS_ADDR: GET /metrics for Prometheus on a listener of
	// its own, never the API's, so it can stay private while the API is
	// exposed.
	var msrv *http.Server
	if a.MetricsHandler != nil {
		ln, err := net.Listen("tcp", a.MetricsAddr)
		if err != nil {
			return fmt.Errorf("%s=%q: %w", app.EnvMetricsAddr, a.MetricsAddr, err)
		}
		msrv = &http.Server{Handler: a.MetricsHandler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
		go func() { errc <- fmt.Errorf("metrics listener: %w", msrv.Serve(ln)) }()
		logger.Info("buzzgate serving Prometheus metrics", "addr", ln.Addr().String(), "path", "/metrics")
	}
	go func() { errc <- srv.ListenAndServe() }()
	logger.Info("buzzgate listening", "addr", addr, "models", len(a.Config.Models), "providers", len(a.Config.Providers))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if msrv != nil {
		// Scrapes go on while the API drains; they end with it.
		_ = msrv.Close()
	}
	// Writes still being retried (a record's completion, a bill) get a last
	// chance of their own; what they leave, the reconciler and the leases
	// finish.
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelDrain()
	if err := a.Finisher.Drain(drainCtx); err != nil {
		logger.Warn("finishing steps left undone at shutdown", "pending", a.Finisher.Pending())
	}
	return nil
}
