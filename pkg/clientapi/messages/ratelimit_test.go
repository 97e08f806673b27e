package messages

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/gateway"
)

// TestRateHeaders: a Messages answer reports its rate limits in
// Anthropic's headers too, the reset as an RFC 3339 time in UTC.
func TestRateHeaders(t *testing.T) {
	reset := time.Date(2026, 12, 3, 11, 1, 0, 0, time.FixedZone("CET", 3600))
	h := map[string]string{"x-ratelimit-remaining-requests": "7"}
	API.Spec().RateHeaders.AddRateHeaders(h, []gateway.RateLimit{
		{Kind: "requests", Limit: 10, Remaining: 7, Reset: reset},
		{Kind: "tokens", Limit: 1000, Remaining: 900, Reset: reset},
	})
	want := map[string]string{
		"x-ratelimit-remaining-requests":         "7",
		"anthropic-ratelimit-requests-limit":     "10",
		"anthropic-ratelimit-requests-remaining": "7",
		"anthropic-ratelimit-requests-reset":     "2026-12-03T10:01:00Z",
		"anthropic-ratelimit-tokens-limit":       "1000",
		"anthropic-ratelimit-tokens-remaining":   "900",
		"anthropic-ratelimit-tokens-reset":       "2026-12-03T10:01:00Z",
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}
