package simulated_test

import (
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/provider/adaptertest"
	"github.com/buzzgate/buzzgate/pkg/provider/simulated"
)

// TestContract runs the adapter contract on the simulated provider, in
// each protocol it speaks. Its config scripts a fixed set of behaviours:
// the rest of the contract is checked on the adapters that face real
// upstreams, and listed here as what it cannot do.
func TestContract(t *testing.T) {
	for _, protocol := range []string{"openai", "anthropic"} {
		t.Run(protocol, func(t *testing.T) {
			adaptertest.Run(t, adaptertest.Adapter{
				New: func(t *testing.T, s adaptertest.Script) adaptertest.Upstream {
					return adaptertest.Upstream{Provider: simulated.New("contract", config(t, protocol, s))}
				},
				Cannot: cannot(protocol),
			})
		})
	}
}

// serverError is the 5xx the simulated provider fails with in protocol.
func serverError(protocol string) int {
	if protocol == "anthropic" {
		return 529 // overloaded_error
	}
	return 500
}

func cannot(protocol string) map[adaptertest.Feature]string {
	const inProcess = "it answers in process, with no connection and no HTTP"
	m := map[adaptertest.Feature]string{
		adaptertest.ScriptedText:      "its words come from a hash of the prompt",
		adaptertest.EmptyAnswer:       "it answers at least one word",
		adaptertest.ToolCalls:         "it answers with text only",
		adaptertest.FinishReasons:     "its answers always finish with stop",
		adaptertest.ScriptedUsage:     "its prompt tokens are estimated, its completion tokens are its words",
		adaptertest.OmittedUsage:      "it always reports usage",
		adaptertest.RetryAfterHint:    "its throttle always hints 1s",
		adaptertest.ErrorMessage:      "its rejection has a fixed message",
		adaptertest.ConnectionFailure: inProcess,
		adaptertest.Cuts:              "its answers always end properly",
		adaptertest.MalformedEvents:   "it makes its own events",
		adaptertest.ErrorEvents:       "it sends no error event",
		adaptertest.KeepAlives:        "it sends no keep-alive",
		adaptertest.JSONAnswer:        "it always streams",
		adaptertest.CallCount:         inProcess,
		adaptertest.ObservedRequest:   inProcess,
		adaptertest.PassThrough:       inProcess,
	}
	if protocol == "openai" {
		m[adaptertest.EarlyUsage] = "its Chat Completions stream reports usage in its last chunk only"
	}
	for _, code := range adaptertest.StatusCodes() {
		if code != 400 && code != 429 && code != serverError(protocol) {
			m[adaptertest.Status(code)] = "it fails with 400, 429 or its one 5xx only"
		}
	}
	return m
}

// config is s as the simulated provider's config.
func config(t *testing.T, protocol string, s adaptertest.Script) catalog.Simulated {
	t.Helper()
	cfg := catalog.Simulated{Protocol: protocol, Words: len(s.Text)}
	switch s.Status {
	case 0, 200:
	case 400:
		cfg.Fail = "reject"
	case 429:
		cfg.Fail = "throttle"
	case serverError(protocol):
		cfg.Fail = "error"
	default:
		t.Fatalf("the simulated provider cannot answer with status %d", s.Status)
	}
	if s.Hang {
		cfg.Fail = "hang"
	}
	// A stall is a wait the contract ends: by the context or Close.
	const stall = catalog.Duration(time.Hour)
	switch {
	case s.Cut == adaptertest.NoCut:
	case s.Cut == adaptertest.CutStall && s.CutAfter == 0:
		cfg.FirstTokenLatency = stall
	case s.Cut == adaptertest.CutStall && s.CutAfter == 1:
		cfg.ChunkLatency = stall
	default:
		t.Fatalf("the simulated provider cannot stop its answer (mode %d) after %d pieces", s.Cut, s.CutAfter)
	}
	if cfg.Fail == "" && cfg.Words == 0 {
		t.Fatal("the simulated provider cannot answer without words")
	}
	return cfg
}
