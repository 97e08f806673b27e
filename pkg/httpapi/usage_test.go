package httpapi

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// A next_cursor decodes to what made it; anything else is refused.
func TestUsageCursor(t *testing.T) {
	c := usageCursor{From: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 2, 1, 0, 0, 0, 5, time.UTC), Shard: 3, After: "2026-01-02T00:00:00.000000000Z#req_1"}
	got, ok := decodeUsageCursor(c.encode())
	if !ok || !got.From.Equal(c.From) || !got.To.Equal(c.To) || got.Shard != c.Shard || got.After != c.After {
		t.Errorf("round trip: %+v %v, want %+v", got, ok, c)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	for _, bad := range []string{
		"not base64!",
		b64([]byte("not json")),
		b64([]byte(`{"f":"2026-01-01T00:00:00Z"}`)), // no to
		b64([]byte(`{"f":"2026-01-01T00:00:00Z","t":"2026-01-02T00:00:00Z","x":1}`)),
		b64([]byte(`{"f":"2026-01-01T00:00:00Z","t":"2026-01-02T00:00:00Z","a":"` + strings.Repeat("x", 1024) + `"}`)),
	} {
		if c, ok := decodeUsageCursor(bad); ok {
			t.Errorf("decodeUsageCursor(%q) = %+v, want refused", bad, c)
		}
	}
}
