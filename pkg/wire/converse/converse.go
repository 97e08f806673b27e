// Package converse is Amazon Bedrock's Converse protocol: its stop
// reasons, and how each reads as the hub's (Chat Completions')
// finish_reason; the Bedrock Runtime's error types, and which members of a
// stream are exceptions; the JSON of ConverseStream's events, of
// InvokeModelWithResponseStream's chunk events, and of the Bedrock
// Runtime's error body, as a fake upstream writes them; and its
// translation to and from the hub: a Chat Completions request as a
// ConverseStream call (FromHub), a ConverseStream answer's events as
// chat.completion.chunks (Decoder). The call and the events are the AWS
// SDK's types (bedrockruntime and its types), which the Bedrock adapter
// sends and reads; the adapter keeps the transport, the credentials and
// the classification of Bedrock's exceptions.
package converse

import "github.com/buzzgate/buzzgate/pkg/wire/chat"

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
// finish_reason: max_tokens and model_context_window_exceeded are length,
// tool_use is tool_calls, a guardrail or a content filter is
// content_filter, and end_turn, stop_sequence and any other reason are
// stop.
func FinishReason(stopReason string) string {
	switch stopReason {
	case StopMaxTokens, StopModelContextWindowExceeded:
		return chat.FinishLength
	case StopToolUse:
		return chat.FinishToolCalls
	case StopGuardrailIntervened, StopContentFiltered:
		return chat.FinishContentFilter
	}
	return chat.FinishStop
}
