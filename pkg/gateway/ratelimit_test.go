package gateway

import (
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/ratelimit"
)

// The headers report the tightest counter of each kind, each against its
// own limit, and Anthropic's names only when asked.
func TestRateHeaders(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 30, 0, time.UTC)
	reset := now.Add(30 * time.Second)
	usages := []ratelimit.Usage{
		{Scope: "p", Limit: ratelimit.Limit{RPM: 10, TPM: 1000}, Requests: 3, Tokens: 100, Reset: reset},
		{Scope: "k", Limit: ratelimit.Limit{RPM: 5, TPM: 5000}, Requests: 3, Tokens: 100, Reset: reset},
	}
	h := rateHeaders(usages, now, false)
	want := map[string]string{
		"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "2", "x-ratelimit-reset-requests": "30s",
		"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "900", "x-ratelimit-reset-tokens": "30s",
	}
	if len(h) != len(want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
	a := rateHeaders(usages[:1], now, true)
	if a["anthropic-ratelimit-requests-remaining"] != "7" || a["anthropic-ratelimit-tokens-reset"] != "2026-12-03T10:01:00Z" {
		t.Errorf("Anthropic's headers: %v", a)
	}
}
