package simulated

import (
	"context"
	"errors"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// TestCountTokens: an Anthropic-protocol simulated provider answers
// count_tokens with the gateway's estimate, after its fail mode; one that
// speaks Chat Completions cannot count and calls nothing.
func TestCountTokens(t *testing.T) {
	body := []byte(`{"model":"m","system":"Be brief.","messages":[{"role":"user","content":"Say hello, please"}]}`)
	req := &llm.TokenCountRequest{Model: "route-model", Body: body}
	got, err := New("sim", catalog.Simulated{Protocol: "anthropic"}).Caps().Counter.CountTokens(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := messages.EstimateInputTokens(body) // 9 + 17 bytes: 7 tokens
	if got.InputTokens != want || want != 7 || string(got.Body) != `{"input_tokens":7}` {
		t.Errorf("count %d %s, want %d", got.InputTokens, got.Body, want)
	}

	if c := New("sim", catalog.Simulated{}).Caps().Counter; c != nil {
		t.Errorf("the openai protocol: counter %T, want none", c)
	}

	for _, c := range []struct {
		fail  string
		class llm.FailureClass
	}{{"throttle", llm.FailThrottled}, {"reject", llm.FailRejected}, {"error", llm.FailTransient}} {
		_, err := New("sim", catalog.Simulated{Protocol: "anthropic", Fail: c.fail}).Caps().Counter.CountTokens(context.Background(), req)
		var pe *llm.ProviderError
		if !errors.As(err, &pe) || pe.Class != c.class {
			t.Errorf("fail %s: %v, want class %v", c.fail, err, c.class)
		}
	}
}
