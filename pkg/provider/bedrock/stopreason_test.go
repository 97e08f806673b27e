package bedrock

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/buzzgate/buzzgate/pkg/wire/converse"
)

// TestConverseStopReasons: pkg/wire/converse names every stop reason the
// SDK knows, with the SDK's value.
func TestConverseStopReasons(t *testing.T) {
	names := []string{
		converse.StopEndTurn, converse.StopToolUse, converse.StopMaxTokens, converse.StopStopSequence,
		converse.StopGuardrailIntervened, converse.StopContentFiltered, converse.StopMalformedModelOutput,
		converse.StopMalformedToolUse, converse.StopModelContextWindowExceeded,
	}
	for _, r := range types.StopReason("").Values() {
		if !slices.Contains(names, string(r)) {
			t.Errorf("stop reason %q is not in pkg/wire/converse", r)
		}
	}
}
