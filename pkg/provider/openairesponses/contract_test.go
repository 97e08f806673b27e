package openairesponses_test

import (
	"testing"

	"github.com/buzzgate/buzzgate/pkg/provider/adaptertest"
	"github.com/buzzgate/buzzgate/pkg/provider/openairesponses"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

// TestContract runs the adapter contract, in translation (a Chat
// Completions request), against a fake Responses upstream, through the
// shared HTTP client the gateway uses.
func TestContract(t *testing.T) {
	adaptertest.Run(t, adaptertest.Adapter{
		New: func(t *testing.T, s adaptertest.Script) adaptertest.Upstream {
			f := adaptertest.NewResponsesFake(t, s)
			t.Cleanup(upstream.HTTPClient(nil).CloseIdleConnections)
			return adaptertest.Upstream{
				Provider: openairesponses.New("contract", f.URL, "sk-contract", nil),
				Calls:    f.Calls,
				Received: f.Received,
			}
		},
		Cannot: map[adaptertest.Feature]string{
			adaptertest.PassThrough:   "a Chat Completions request is translated to a Responses body",
			adaptertest.EarlyUsage:    "Responses reports usage in its terminal event only",
			adaptertest.EndMarker:     "a Responses stream ends at its terminal event, which also finishes the answer",
			adaptertest.StopSequences: "Responses has no stop sequences",
		},
	})
}
