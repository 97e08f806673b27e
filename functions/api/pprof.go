//go:build pprof

package main

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
)

// A build with -tags pprof (tools/loadbench -profile) serves
// net/http/pprof on BUZZGATE_PPROF_ADDR.
func init() {
	startPprof = func(addr string, logger *slog.Logger) {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index) // and the named profiles: allocs, heap, ...
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		go func() { logger.Warn("pprof listener stopped", "error", http.ListenAndServe(addr, mux)) }()
		logger.Warn("pprof listening", "addr", addr)
	}
}
