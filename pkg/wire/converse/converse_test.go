package converse

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
)

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

// TestStopReasons: this package names every stop reason the SDK knows,
// with the SDK's value.
func TestStopReasons(t *testing.T) {
	names := []string{
		StopEndTurn, StopToolUse, StopMaxTokens, StopStopSequence,
		StopGuardrailIntervened, StopContentFiltered, StopMalformedModelOutput,
		StopMalformedToolUse, StopModelContextWindowExceeded,
	}
	for _, r := range types.StopReason("").Values() {
		if !slices.Contains(names, string(r)) {
			t.Errorf("stop reason %q is not in pkg/wire/converse", r)
		}
	}
}
