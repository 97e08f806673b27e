package messages

import (
	"net/http"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/anthropic"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// anthropicBody is the Messages body the anthropic adapter sends upstream
// for up, a Chat Completions body to model: it calls a fake Anthropic API
// through the adapter and returns what the fake received. A request the
// adapter refuses before any call returns the adapter's error.
func anthropicBody(t *testing.T, model string, up []byte) ([]byte, error) {
	t.Helper()
	srv := providertest.NewAnthropic(t)
	c := anthropic.New("anthropic", srv.URL(), "test-key", http.DefaultClient)
	s, err := c.ChatStream(t.Context(), &llm.UpstreamRequest{Model: model, Body: up})
	if err != nil {
		return nil, err
	}
	for {
		if _, err := s.Next(); err != nil {
			break
		}
	}
	s.Close()
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the fake Anthropic API got %d calls, want 1", len(reqs))
	}
	return reqs[0].Body, nil
}
