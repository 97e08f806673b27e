package responses

import "testing"

func TestFinishReason(t *testing.T) {
	for _, tt := range []struct {
		incomplete bool
		reason     string
		tools      bool
		want       string
	}{
		{false, "", false, "stop"},
		{false, "", true, "tool_calls"},
		{true, "max_output_tokens", false, "length"},
		{true, "max_output_tokens", true, "length"},
		{true, "", false, "length"},
		{true, "content_filter", true, "content_filter"},
		{false, "content_filter", false, "stop"},
	} {
		if got := FinishReason(tt.incomplete, tt.reason, tt.tools); got != tt.want {
			t.Errorf("FinishReason(%v, %q, %v) = %q, want %q", tt.incomplete, tt.reason, tt.tools, got, tt.want)
		}
	}
}

func TestEnding(t *testing.T) {
	for finish, want := range map[string]struct{ status, reason string }{
		"stop":           {"completed", ""},
		"tool_calls":     {"completed", ""},
		"":               {"completed", ""},
		"length":         {"incomplete", "max_output_tokens"},
		"content_filter": {"incomplete", "content_filter"},
	} {
		status, details := Ending(finish)
		reason := ""
		if details != nil {
			reason = details.Reason
		}
		if status != want.status || reason != want.reason || (details == nil) != (want.reason == "") {
			t.Errorf("Ending(%q) = %q, %+v, want %q, %q", finish, status, details, want.status, want.reason)
		}
	}
}
