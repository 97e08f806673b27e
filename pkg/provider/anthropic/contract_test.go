package anthropic_test

import (
	"testing"

	"github.com/buzzgate/buzzgate/pkg/provider/adaptertest"
	"github.com/buzzgate/buzzgate/pkg/provider/anthropic"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

// TestContract runs the adapter contract against a fake Messages upstream,
// through the shared HTTP client the gateway uses.
func TestContract(t *testing.T) {
	adaptertest.Run(t, adaptertest.Adapter{
		New: func(t *testing.T, s adaptertest.Script) adaptertest.Upstream {
			f := adaptertest.NewFake(t, adaptertest.Messages, s)
			t.Cleanup(upstream.HTTPClient(nil).CloseIdleConnections)
			return adaptertest.Upstream{
				Provider: anthropic.New("contract", f.URL, "sk-ant-contract", nil),
				Calls:    f.Calls,
				Received: f.Received,
			}
		},
		Cannot: map[adaptertest.Feature]string{
			adaptertest.PassThrough: "the adapter translates the request to a Messages body",
		},
	})
}
