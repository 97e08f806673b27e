package llm

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPriceOfPremiumUnits: one-hour cache writes are priced at their own
// price, and each server tool call the usage counts at the tool's price
// per call, in the same nano-dollar rounding as the tokens. The prices are
// Anthropic's for Claude Sonnet 4.5 (1h cache write $6 per million tokens,
// web search $10 per 1,000 searches).
func TestPriceOfPremiumUnits(t *testing.T) {
	p := Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75, CacheWrite1h: 6,
		Tools: map[string]float64{"web_search": 0.01, "file_search": 0.0025}}
	for _, c := range []struct {
		name  string
		usage string
		want  float64
	}{
		// 100 5-minute writes, 1,000 1-hour writes: 100×3.75 + 1,000×6 + 40×15.
		{"1h writes", `{"prompt_tokens":1100,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":1100,"cache_write_1h_tokens":1000}}`, 0.006975},
		// More 1h writes than writes: clamped to the writes.
		{"1h beyond the writes", `{"prompt_tokens":100,"completion_tokens":0,"prompt_tokens_details":{"cache_write_tokens":100,"cache_write_1h_tokens":500}}`, 0.0006},
		// 1,000 input + 3 searches: $0.003 + $0.03.
		{"searches", `{"prompt_tokens":1000,"completion_tokens":0,"server_tool_use":{"web_search_requests":3,"web_fetch_requests":2}}`, 0.033},
		{"two tools", `{"prompt_tokens":0,"completion_tokens":0,"server_tool_use":{"web_search_requests":1,"file_search_requests":4}}`, 0.02},
		{"garbage counts", `{"prompt_tokens":0,"completion_tokens":0,"server_tool_use":{"web_search_requests":-2,"file_search_requests":"x","web_search":7}}`, 0},
	} {
		u, err := ParseUsage(json.RawMessage(c.usage))
		if err != nil {
			t.Fatal(err)
		}
		if got := PriceOf(u, p); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	u, _ := ParseUsage(json.RawMessage(`{"prompt_tokens":1,"completion_tokens":1,"server_tool_use":{"web_search_requests":3,"web_fetch_requests":0,"code_execution_requests":1}}`))
	if diff := cmp.Diff(map[string]int{"web_search": 3, "code_execution": 1}, u.ServerToolCalls); diff != "" {
		t.Errorf("ToolCalls (-want +got):\n%s", diff)
	}
}
