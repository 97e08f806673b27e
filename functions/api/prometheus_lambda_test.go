//go:build integration

package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
)

// TestPrometheusNotUnderLambda: under the Lambda emulator, with
// BUZZGATE_METRICS_ADDR set, the function answers, writes its metrics as
// EMF lines, says it ignores the variable, and nothing listens there.
func TestPrometheusNotUnderLambda(t *testing.T) {
	maddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	emu := startEmulator(t, []string{"AWS_LAMBDA_FUNCTION_TIMEOUT=60", "BUZZGATE_METRICS_ADDR=" + maddr})
	checkAnswer(t, invokeEvent(t, emu, "chat-completion.json"), "application/json", "alpha", "0")
	checkAnswer(t, invokeEvent(t, emu, "chat-completion-fallback.json"), "application/json", "alpha", "1")
	// The function is initialised and has served: had it started a
	// listener, it would be accepting by now.
	if c, err := net.DialTimeout("tcp", maddr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on %s (BUZZGATE_METRICS_ADDR) under Lambda", maddr)
	}
	out := emu.Output()
	if !strings.Contains(out, "BUZZGATE_METRICS_ADDR is ignored under Lambda") {
		t.Errorf("the function did not say it ignores BUZZGATE_METRICS_ADDR:\n%s", out)
	}
	if n := strings.Count(out, `"Requests":1`); n != 2 {
		t.Errorf("%d EMF lines with Requests, want 2:\n%s", n, out)
	}
}
