package upstream

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		ms, s string
		want  time.Duration
	}{
		{"", "", 0},
		{"250", "", 250 * time.Millisecond},
		{"12.5", "", 12500 * time.Microsecond},
		{"90000", "", 60 * time.Second},
		{"1e300", "", 60 * time.Second},
		{"NaN", "", 0},
		{"-5", "3", 3 * time.Second},
		{"junk", "3", 3 * time.Second},
		{"", "0", 0},
		{"", "-1", 0},
		{"", "1.5", 1500 * time.Millisecond},
		{"", now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second},
		{"", now.Add(-10 * time.Second).Format(http.TimeFormat), 0},
		{"", now.Add(time.Hour).Format(http.TimeFormat), 60 * time.Second},
		{"", "soon", 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.ms != "" {
			h.Set("retry-after-ms", tt.ms)
		}
		if tt.s != "" {
			h.Set("retry-after", tt.s)
		}
		if got := RetryAfter(h, now); got != tt.want {
			t.Errorf("RetryAfter(ms=%q, s=%q) = %v, want %v", tt.ms, tt.s, got, tt.want)
		}
	}
}

func TestPlainText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  hi  ", "hi"},
		{"a\nb", "a b"},
		{"\x00\x01\x7f", ""},
		{"ok\xff\xfe", "ok"},
		{"\u0085x", "x"}, // C1 control (NEL) as space, trimmed
		{"\u009bx", "x"}, // C1 control removed
		{"日本語", "日本語"},   // multi-byte text kept
	}
	for _, tt := range tests {
		if got := PlainText([]byte(tt.in), 512); got != tt.want {
			t.Errorf("PlainText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := PlainText([]byte("ab日"), 4); got != "ab" {
		t.Errorf("rune cut at the limit: got %q, want %q", got, "ab")
	}
}

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		base, want string
		bad        bool
	}{
		{"https://api.example.com/v1/", "https://api.example.com/v1/chat", false},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/chat", false},
		{"ftp://example.com", "", true},
		{"/v1", "", true},
		{"http://[::1", "", true},
	} {
		got, err := Endpoint(tc.base, "/chat")
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("Endpoint(%q) = %q, %v", tc.base, got, err)
		}
	}
}

func TestHTTPClientNeverFollowsRedirects(t *testing.T) {
	mine := &http.Client{Timeout: time.Second}
	for _, c := range []*http.Client{HTTPClient(nil), HTTPClient(mine)} {
		if c.CheckRedirect == nil || c.CheckRedirect(nil, nil) != http.ErrUseLastResponse {
			t.Errorf("a client that follows redirects: %+v", c)
		}
	}
	if mine.CheckRedirect != nil || HTTPClient(mine).Timeout != time.Second {
		t.Error("HTTPClient changed the caller's client, or dropped its settings")
	}
}
