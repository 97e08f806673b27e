package llm

import (
	"encoding/json"
	"testing"
)

// PriceOf prices each part of the prompt at its own price, clamping
// details that do not add up (an upstream's bug) to the prompt's size.
func TestPriceOf(t *testing.T) {
	p := Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	for _, c := range []struct {
		name  string
		usage string
		want  float64
	}{
		{"no details", `{"prompt_tokens":1000,"completion_tokens":100}`, 0.0045},
		{"reads and writes", `{"prompt_tokens":9112,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":9000,"cache_write_tokens":100}}`, 0.003711},
		{"reasoning is output", `{"prompt_tokens":10,"completion_tokens":50,"completion_tokens_details":{"reasoning_tokens":30}}`, 0.00078},
		{"reads beyond the prompt", `{"prompt_tokens":10,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":50,"cache_write_tokens":5}}`, 0.000003},
		{"writes beyond the rest", `{"prompt_tokens":10,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":4,"cache_write_tokens":50}}`, 0.0000237},
		{"garbage details", `{"prompt_tokens":10,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":"x","cache_write_tokens":-3}}`, 0.00003},
	} {
		u, err := ParseUsage(json.RawMessage(c.usage))
		if err != nil {
			t.Fatal(err)
		}
		if got := PriceOf(u, p); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
