package bedrock

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/buzzgate/buzzgate/pkg/llm"
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

// TestEventChunksEnd: the answer's end is the chunk either decoder marks
// Finished (a Chat chunk's finish_reason; a Messages message_delta, whose
// stop reason stays in its own vocabulary), or a usage-only chunk; the
// chunks before it leave the answer unfinished, so that events that stop
// there are a cut stream rather than a whole answer.
func TestEventChunksEnd(t *testing.T) {
	events := []types.ConverseStreamOutput{
		&types.ConverseStreamOutputMemberMessageStart{Value: types.MessageStartEvent{Role: types.ConversationRoleAssistant}},
		&types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{
			ContentBlockIndex: aws.Int32(0), Delta: &types.ContentBlockDeltaMemberText{Value: "Hi"}}},
		&types.ConverseStreamOutputMemberContentBlockStop{Value: types.ContentBlockStopEvent{ContentBlockIndex: aws.Int32(0)}},
		&types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: types.StopReasonEndTurn}},
		&types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{
			Usage: &types.TokenUsage{InputTokens: aws.Int32(3), OutputTokens: aws.Int32(1), TotalTokens: aws.Int32(4)}}},
	}
	for _, dec := range []struct {
		name string
		make func() eventDecoder
	}{
		{"chat", func() eventDecoder {
			return &chatEvents{dec: converse.NewDecoder("chatcmpl-1", "amazon.nova-pro-v1:0", 1735689600)}
		}},
		{"messages", func() eventDecoder { return messages.NewConverseEncoder("msg_1", "amazon.nova-pro-v1:0") }},
	} {
		t.Run(dec.name, func(t *testing.T) {
			s := &eventChunks{dec: dec.make()}
			for i, ev := range events {
				chunks, err := s.dec.Encode(ev)
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				s.take(chunks)
				// Finished from the stop on (the Messages encoder holds
				// message_delta until the usage comes).
				if want := i >= 3 && (dec.name == "chat" || i == 4); s.finished != want {
					t.Errorf("after event %d: finished %v, want %v", i, s.finished, want)
				}
			}
		})
	}
}
