package gateway

import (
	"strconv"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/ratelimit"
)

// The headers report the tightest counter of each kind, each against its
// own limit, and hand the same to the client API's own headers.
func TestRateHeaders(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 30, 0, time.UTC)
	reset := now.Add(30 * time.Second)
	usages := []ratelimit.Usage{
		{Scope: "p", Limit: ratelimit.Limit{RPM: 10, TPM: 1000}, Requests: 3, Tokens: 100, Reset: reset},
		{Scope: "k", Limit: ratelimit.Limit{RPM: 5, TPM: 5000}, Requests: 3, Tokens: 100, Reset: reset},
	}
	h := rateHeaders(usages, now, nil)
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
	a := rateHeaders(usages[:1], now, apiHeaders{})
	if a["api-requests-remaining"] != "7" || a["api-tokens-reset"] != "2026-12-03T10:01:00Z" || a["x-ratelimit-remaining-requests"] != "7" {
		t.Errorf("the API's headers: %v", a)
	}
}

// apiHeaders is a client API's own rate-limit headers, for the tests.
type apiHeaders struct{}

func (apiHeaders) AddRateHeaders(h map[string]string, limits []RateLimit) {
	for _, l := range limits {
		h["api-"+l.Kind+"-limit"] = strconv.FormatInt(l.Limit, 10)
		h["api-"+l.Kind+"-remaining"] = strconv.FormatInt(l.Remaining, 10)
		h["api-"+l.Kind+"-reset"] = l.Reset.UTC().Format(time.RFC3339)
	}
}
