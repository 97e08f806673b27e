package bedrock

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
)

// convBenchEvents is a typical ConverseStream answer: its start, a short
// thought, 200 pieces of text, a tool call in three pieces, its stop and
// its usage.
func convBenchEvents() []types.ConverseStreamOutput {
	evs := []types.ConverseStreamOutput{
		&types.ConverseStreamOutputMemberMessageStart{Value: types.MessageStartEvent{Role: types.ConversationRoleAssistant}},
		convBlockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{Value: &types.ReasoningContentBlockDeltaMemberText{Value: "Let me think."}}),
		convBlockStop(0),
	}
	for range 200 {
		evs = append(evs, convTextDelta(1, " token"))
	}
	evs = append(evs, convBlockStop(1),
		convToolStart(2, "tooluse_1", "get_weather"), convInputDelta(2, `{"city":`), convInputDelta(2, `"Paris"}`), convBlockStop(2),
		&types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: types.StopReasonToolUse}},
		&types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: &types.TokenUsage{
			InputTokens: aws.Int32(100), OutputTokens: aws.Int32(220), TotalTokens: aws.Int32(320)}}})
	return evs
}

// BenchmarkConverseDecode turns one answer's events into the chunks a
// client's codec reads.
func BenchmarkConverseDecode(b *testing.B) {
	evs := convBenchEvents()
	b.ReportAllocs()
	for b.Loop() {
		d := newConverseDecoder("chatcmpl-1", "amazon.nova-pro-v1:0", convCreated)
		for _, ev := range evs {
			if _, _, err := d.decode(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}
