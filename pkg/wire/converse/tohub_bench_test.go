package converse

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
)

// benchEvents is a typical ConverseStream answer: its start, a short
// thought, 200 pieces of text, a tool call in three pieces, its stop and
// its usage.
func benchEvents() []types.ConverseStreamOutput {
	evs := []types.ConverseStreamOutput{
		&types.ConverseStreamOutputMemberMessageStart{Value: types.MessageStartEvent{Role: types.ConversationRoleAssistant}},
		blockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{Value: &types.ReasoningContentBlockDeltaMemberText{Value: "Let me think."}}),
		blockStop(0),
	}
	for range 200 {
		evs = append(evs, textDelta(1, " token"))
	}
	evs = append(evs, blockStop(1),
		toolStart(2, "tooluse_1", "get_weather"), inputDelta(2, `{"city":`), inputDelta(2, `"Paris"}`), blockStop(2),
		&types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: types.StopReasonToolUse}},
		&types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: &types.TokenUsage{
			InputTokens: aws.Int32(100), OutputTokens: aws.Int32(220), TotalTokens: aws.Int32(320)}}})
	return evs
}

// BenchmarkConverseDecode turns one answer's events into the chunks a
// client's codec reads.
func BenchmarkConverseDecode(b *testing.B) {
	evs := benchEvents()
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder("chatcmpl-1", "amazon.nova-pro-v1:0", testCreated)
		for _, ev := range evs {
			if _, _, err := d.Decode(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}
