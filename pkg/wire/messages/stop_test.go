package messages

import "testing"

func TestFinishReason(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
		"model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter", "new_reason": "stop",
	} {
		if got := FinishReason(in); got != want {
			t.Errorf("FinishReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStopReason(t *testing.T) {
	for _, tt := range []struct {
		finish         string
		toolUse, refus bool
		seq, want      string
	}{
		{"stop", false, false, "", "end_turn"},
		{"", false, false, "", "end_turn"},
		{"stop", false, false, "END", "stop_sequence"},
		{"", false, false, "END", "stop_sequence"},
		{"length", false, false, "END", "max_tokens"},
		{"length", false, false, "", "max_tokens"},
		{"content_filter", false, false, "", "refusal"},
		{"stop", false, true, "", "refusal"},
		{"length", false, true, "", "refusal"},
		{"tool_calls", false, false, "", "tool_use"},
		{"function_call", false, false, "", "tool_use"},
		{"stop", true, false, "", "tool_use"},
		{"something_new", false, false, "", "end_turn"},
	} {
		if got := StopReason(tt.finish, tt.toolUse, tt.refus, tt.seq); got != tt.want {
			t.Errorf("StopReason(%q, %v, %v, %q) = %q, want %q", tt.finish, tt.toolUse, tt.refus, tt.seq, got, tt.want)
		}
	}
}
