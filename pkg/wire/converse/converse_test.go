package converse

import "testing"

func TestFinishReason(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "model_context_window_exceeded": "length",
		"tool_use": "tool_calls", "guardrail_intervened": "content_filter", "content_filtered": "content_filter",
		"malformed_model_output": "stop", "malformed_tool_use": "stop", "new_reason": "stop",
	} {
		if got := FinishReason(in); got != want {
			t.Errorf("FinishReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMessagesStopReason(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": "end_turn", "stop_sequence": "stop_sequence", "max_tokens": "max_tokens", "tool_use": "tool_use",
		"model_context_window_exceeded": "model_context_window_exceeded",
		"guardrail_intervened":          "refusal", "content_filtered": "refusal",
		"malformed_model_output": "end_turn", "malformed_tool_use": "end_turn", "new_reason": "end_turn",
	} {
		if got := MessagesStopReason(in); got != want {
			t.Errorf("MessagesStopReason(%q) = %q, want %q", in, got, want)
		}
	}
}
