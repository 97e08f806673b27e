package openai_test

import (
	"testing"

	"github.com/buzzgate/buzzgate/pkg/provider/adaptertest"
	"github.com/buzzgate/buzzgate/pkg/provider/openai"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

// TestContract runs the adapter contract against a fake Chat Completions
// upstream, through the shared HTTP client the gateway uses.
func TestContract(t *testing.T) {
	adaptertest.Run(t, adaptertest.Adapter{
		New: func(t *testing.T, s adaptertest.Script) adaptertest.Upstream {
			f := adaptertest.NewFake(t, adaptertest.ChatCompletions, s)
			t.Cleanup(upstream.HTTPClient(nil).CloseIdleConnections)
			return adaptertest.Upstream{
				Provider: openai.New("contract", f.URL, "sk-contract", nil),
				Calls:    f.Calls,
				Received: f.Received,
			}
		},
		Cannot: map[adaptertest.Feature]string{
			adaptertest.EarlyUsage: "Chat Completions reports usage in its last chunk only",
		},
	})
}
