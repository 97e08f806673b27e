package bedrock

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/anthropic"
	"github.com/buzzgate/buzzgate/pkg/wire/converse"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// TestEventFailure: an exception inside a ConverseStream answer, as either
// decoder reads it (Chat Completions chunks, Messages events), ends the
// stream with the *llm.ProviderError of its class and Bedrock's message.
func TestEventFailure(t *testing.T) {
	chat := func(ev types.ConverseStreamOutput) error {
		_, _, err := converse.NewDecoder("chatcmpl-1", "amazon.nova-pro-v1:0", 1735689600).Decode(ev)
		return err
	}
	msgs := func(ev types.ConverseStreamOutput) error {
		e := messages.NewConverseEncoder("msg_1", "m")
		if _, err := e.Encode(&types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{
			ContentBlockIndex: aws.Int32(0), Delta: &types.ContentBlockDeltaMemberText{Value: "partial"}}}); err != nil {
			t.Fatal(err)
		}
		_, err := e.Encode(ev)
		return err
	}
	tests := []struct {
		decoder    string
		decode     func(types.ConverseStreamOutput) error
		tag, value string
		class      llm.FailureClass
		msg        string
	}{
		{"chat", chat, "throttlingException", `{"message":"Too many requests"}`, llm.FailThrottled, "throttlingException: Too many requests"},
		{"chat", chat, "validationException", `{"message":"The model returned an invalid tool use"}`, llm.FailRejected, "The model returned an invalid tool use"},
		{"chat", chat, "validationException", ``, llm.FailRejected, "validationException"},
		{"chat", chat, "modelStreamErrorException", `{"Message":"broken"}`, llm.FailTransient, "modelStreamErrorException: broken"},
		{"chat", chat, "internalServerException", `not json`, llm.FailTransient, "internalServerException"},
		{"chat", chat, "serviceUnavailableException", `{}`, llm.FailTransient, "serviceUnavailableException"},
		{"messages", msgs, "throttlingException", `{"message":"Too many requests"}`, llm.FailThrottled, "throttlingException: Too many requests"},
		{"messages", msgs, "validationException", `{"Message":"Bad input"}`, llm.FailRejected, "Bad input"},
		{"messages", msgs, "modelStreamErrorException", `not json`, llm.FailTransient, "modelStreamErrorException"},
		{"messages", msgs, "internalServerException", `{}`, llm.FailTransient, "internalServerException"},
	}
	for _, tt := range tests {
		t.Run(tt.decoder+"/"+tt.tag, func(t *testing.T) {
			err := eventFailure(tt.decode(&types.UnknownUnionMember{Tag: tt.tag, Value: []byte(tt.value)}))
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("err %v; want a *llm.ProviderError", err)
			}
			if pe.Class != tt.class || pe.Message != tt.msg {
				t.Errorf("class %v, message %q; want %v, %q", pe.Class, pe.Message, tt.class, tt.msg)
			}
		})
	}
	other := &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream event"}
	if err := eventFailure(other); err != other {
		t.Errorf("eventFailure of another error: %v", err)
	}
}

// TestMessagesEventsObserved: what the gateway reads of the Messages events
// passed through (the anthropic adapter's Observer) is what the encoder
// says of them.
func TestMessagesEventsObserved(t *testing.T) {
	block := func(i int32, d types.ContentBlockDelta) types.ConverseStreamOutput {
		return &types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{ContentBlockIndex: aws.Int32(i), Delta: d}}
	}
	stop := func(i int32) types.ConverseStreamOutput {
		return &types.ConverseStreamOutputMemberContentBlockStop{Value: types.ContentBlockStopEvent{ContentBlockIndex: aws.Int32(i)}}
	}
	reasoning := func(r types.ReasoningContentBlockDelta) types.ConverseStreamOutput {
		return block(0, &types.ContentBlockDeltaMemberReasoningContent{Value: r})
	}
	e := messages.NewConverseEncoder("msg_1", "nova-pro")
	var evs []llm.Chunk
	for _, ev := range []types.ConverseStreamOutput{
		&types.ConverseStreamOutputMemberMessageStart{Value: types.MessageStartEvent{Role: types.ConversationRoleAssistant}},
		reasoning(&types.ReasoningContentBlockDeltaMemberText{Value: "Let me "}),
		reasoning(&types.ReasoningContentBlockDeltaMemberText{Value: "think."}),
		reasoning(&types.ReasoningContentBlockDeltaMemberSignature{Value: "sig"}),
		stop(0),
		block(1, &types.ContentBlockDeltaMemberText{Value: "Hello <b>"}),
		block(1, &types.ContentBlockDeltaMemberText{Value: ""}),
		stop(1),
		&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{
			ContentBlockIndex: aws.Int32(2),
			Start:             &types.ContentBlockStartMemberToolUse{Value: types.ToolUseBlockStart{ToolUseId: aws.String("tooluse_1"), Name: aws.String("get_weather")}},
		}},
		block(2, &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String(`{"city":`)}}),
		block(2, &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String(`"Paris"}`)}}),
		stop(2),
		&types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: types.StopReasonToolUse}},
		&types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: &types.TokenUsage{
			InputTokens: aws.Int32(12), OutputTokens: aws.Int32(34), CacheReadInputTokens: aws.Int32(9000), CacheWriteInputTokens: aws.Int32(100),
			TotalTokens: aws.Int32(9146)}}},
	} {
		chunks, err := e.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, chunks...)
	}
	if len(evs) != 15 {
		t.Fatalf("%d events, want 15", len(evs))
	}
	var obs anthropic.Observer
	for i, ev := range evs {
		c, err := obs.Observe(ev.Event, ev.Raw)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if c.Output != ev.Output || c.Text != ev.Text || c.FinishReason != ev.FinishReason {
			t.Errorf("event %d %s: observed output %v text %q finish %q; encoder says %v %q %q", i, ev.Event, c.Output, c.Text, c.FinishReason, ev.Output, ev.Text, ev.FinishReason)
		}
		if ev.Event == messages.EventMessageDelta && string(c.Usage) != string(ev.Usage) {
			t.Errorf("observed usage %s, encoder's %s", c.Usage, ev.Usage)
		}
	}
	if !obs.Done() {
		t.Error("the observer did not see message_stop")
	}
}
