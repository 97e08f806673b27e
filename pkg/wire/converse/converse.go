// Package converse is Amazon Bedrock's Converse vocabulary: its stop
// reasons, and how each reads as the hub's (Chat Completions')
// finish_reason and as a Messages stop_reason; the Bedrock Runtime's error
// types, and which members of a stream are exceptions; the JSON of
// ConverseStream's events, of InvokeModelWithResponseStream's chunk
// events, and of the Bedrock Runtime's error body, as a fake upstream
// writes them. The Bedrock
// adapter reads these through the AWS SDK (bedrockruntime/types); this
// package names the protocol's words as strings, the SDK's
// types.StopReason values, and declares its own JSON shapes, so that it
// stays a leaf.
package converse

import "github.com/buzzgate/buzzgate/pkg/wire/messages"

// The stop reasons of a Converse answer (messageStop's stopReason).
const (
	StopEndTurn                    = "end_turn"
	StopToolUse                    = "tool_use"
	StopMaxTokens                  = "max_tokens"
	StopStopSequence               = "stop_sequence"
	StopGuardrailIntervened        = "guardrail_intervened"
	StopContentFiltered            = "content_filtered"
	StopMalformedModelOutput       = "malformed_model_output"
	StopMalformedToolUse           = "malformed_tool_use"
	StopModelContextWindowExceeded = "model_context_window_exceeded"
)

// FinishReason is a Converse stop reason as a Chat Completions
// finish_reason, which is its Messages stop reason's: max_tokens and
// model_context_window_exceeded are length, tool_use is tool_calls, a
// guardrail or a content filter is content_filter, and end_turn,
// stop_sequence and any other reason are stop.
func FinishReason(stopReason string) string {
	return messages.FinishReason(MessagesStopReason(stopReason))
}

// MessagesStopReason is a Converse stop reason as a Messages stop_reason:
// the reasons the two protocols share keep their name, a guardrail or a
// content filter is a refusal, and any other reason is end_turn.
func MessagesStopReason(stopReason string) string {
	switch stopReason {
	case StopEndTurn, StopToolUse, StopMaxTokens, StopStopSequence, StopModelContextWindowExceeded:
		return stopReason
	case StopGuardrailIntervened, StopContentFiltered:
		return messages.StopRefusal
	}
	return messages.StopEndTurn
}
