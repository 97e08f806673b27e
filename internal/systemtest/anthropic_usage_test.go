package systemtest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// TestAnthropicCutStreamKeepsReportedPrompt: an Anthropic upstream reports
// the prompt's size in message_start (input_tokens 10,
// providertest.PromptTokens) and then fails after its first text. The usage
// chunk the client gets (and the cost billed) keeps the 10 input tokens the
// provider reported, with the completion estimated from what was produced
// ("Hello": 2 tokens at four bytes a token); before, both were estimated,
// the prompt from the whole request body (30 tokens).
func TestAnthropicCutStreamKeepsReportedPrompt(t *testing.T) {
	url, claude, _ := anthropicFirst(t)
	for _, how := range []providertest.CutMode{providertest.CutError, providertest.CutClose} {
		claude.Script(providertest.Response{Text: []string{"Hello", " world"}, Cut: &providertest.Cut{After: 1, How: how}})
		s := mustCall(t, url, chatBody(`"stream":true,"stream_options":{"include_usage":true}`))
		if s.status != 200 || s.provider != "claude" {
			t.Fatalf("status %d from %q: %s", s.status, s.provider, s.body)
		}
		var usage map[string]any
		for _, ev := range strings.Split(s.body, "\n\n") {
			var ch struct {
				Usage map[string]any `json:"usage"`
			}
			if json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &ch) == nil && ch.Usage != nil {
				usage = ch.Usage
			}
		}
		if usage == nil {
			t.Fatalf("cut %d: no usage chunk in %s", how, s.body)
		}
		if usage["prompt_tokens"] != float64(providertest.PromptTokens) || usage["completion_tokens"] != float64(2) || usage["estimated"] != true {
			t.Errorf("cut mode %d: usage %v, want the 10 input tokens Anthropic reported in message_start and 2 estimated completion tokens", how, usage)
		}
	}
}
