// Command api is buzzgate's gateway: it serves the HTTP API on
// BUZZGATE_ADDR (default 127.0.0.1:8080).
package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/buzzgate/buzzgate/pkg/app"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(logger); err != nil {
		logger.Error("buzzgate stopped", "error", err)
		os.Exit(1)
	}
}

func run(logger *slog.Logger) error {
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
	errc := make(chan error, 1)
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
	return nil
}
