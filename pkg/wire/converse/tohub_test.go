package converse

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

const testCreated = 1735689600

// chunkJSON is the wire form of a chunk of one choice.
func chunkJSON(delta, finish string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"amazon.nova-pro-v1:0","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
}

func blockDelta(i int32, d types.ContentBlockDelta) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{ContentBlockIndex: aws.Int32(i), Delta: d}}
}

func toolStart(i int32, id, name string) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{
		ContentBlockIndex: aws.Int32(i),
		Start:             &types.ContentBlockStartMemberToolUse{Value: types.ToolUseBlockStart{ToolUseId: aws.String(id), Name: aws.String(name)}},
	}}
}

func blockStop(i int32) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberContentBlockStop{Value: types.ContentBlockStopEvent{ContentBlockIndex: aws.Int32(i)}}
}

func textDelta(i int32, s string) types.ConverseStreamOutput {
	return blockDelta(i, &types.ContentBlockDeltaMemberText{Value: s})
}

func inputDelta(i int32, s string) types.ConverseStreamOutput {
	return blockDelta(i, &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String(s)}})
}

// decodeAll decodes events and returns the chunks and the error that
// stopped it. Each chunk is checked to be what llm.ParseChunk reads of its
// JSON, in every field the pipeline reads and in what a codec reads of its
// choice.
func decodeAll(t *testing.T, events ...types.ConverseStreamOutput) ([]llm.Chunk, error) {
	t.Helper()
	d := NewDecoder("chatcmpl-1", "amazon.nova-pro-v1:0", testCreated)
	var out []llm.Chunk
	for _, ev := range events {
		c, ok, err := d.Decode(ev)
		if ok {
			parsed, perr := llm.ParseChunk(c.Raw)
			if perr != nil {
				t.Fatalf("chunk %s: %v", c.Raw, perr)
			}
			if diff := cmp.Diff(parsed, c, cmpopts.IgnoreUnexported(llm.Chunk{})); diff != "" {
				t.Errorf("chunk %s (-parsed +decoded):\n%s", c.Raw, diff)
			}
			if got, want := firstChoice(&c), firstChoice(&parsed); !slices.Equal(got, want) {
				t.Errorf("chunk %s: FirstChoice %q, parsed %q", c.Raw, got, want)
			}
			out = append(out, c)
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// firstChoice is what a codec reads of a chunk's first choice.
func firstChoice(c *llm.Chunk) []string {
	var got []string
	finish := c.FirstChoice(&llm.DeltaFuncs{
		Text:      func(s string) { got = append(got, "text "+s) },
		Refusal:   func(s string) { got = append(got, "refusal "+s) },
		Reasoning: func(s string) { got = append(got, "reasoning "+s) },
		ToolCall: func(index int, id, name, args string) {
			got = append(got, fmt.Sprintf("tool %d %s %s %s", index, id, name, args))
		},
	})
	return append(got, "finish "+finish)
}

func TestDecoder(t *testing.T) {
	events := []types.ConverseStreamOutput{
		&types.ConverseStreamOutputMemberMessageStart{Value: types.MessageStartEvent{Role: types.ConversationRoleAssistant}},
		blockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{Value: &types.ReasoningContentBlockDeltaMemberText{Value: "Think."}}),
		blockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{Value: &types.ReasoningContentBlockDeltaMemberSignature{Value: "sig"}}),
		blockStop(0),
		textDelta(1, "Hel"),
		textDelta(1, ""),
		textDelta(1, "lo <b>"),
		blockStop(1),
		toolStart(2, "tooluse_1", "get_weather"),
		inputDelta(2, `{"city":`),
		inputDelta(2, `"Paris"}`),
		blockStop(2),
		toolStart(3, "tooluse_2", "get_time"),
		blockStop(3),
		&types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: types.StopReasonToolUse}},
		&types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: &types.TokenUsage{
			InputTokens: aws.Int32(100), OutputTokens: aws.Int32(20), TotalTokens: aws.Int32(155),
			CacheReadInputTokens: aws.Int32(30), CacheWriteInputTokens: aws.Int32(5),
		}}},
	}
	chunks, err := decodeAll(t, events...)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Raw          string
		Output       bool
		FinishReason string
		Text         string
	}
	var got []seen
	for _, c := range chunks {
		got = append(got, seen{string(c.Raw), c.Output, c.FinishReason, c.Text})
	}
	want := []seen{
		{chunkJSON(`{"role":"assistant","content":""}`, "null"), false, "", ""},
		{chunkJSON(`{"reasoning_content":"Think."}`, "null"), true, "", "Think."},
		{chunkJSON(`{"content":"Hel"}`, "null"), true, "", "Hel"},
		{chunkJSON(`{"content":"lo <b>"}`, "null"), true, "", "lo <b>"},
		{chunkJSON(`{"tool_calls":[{"index":0,"id":"tooluse_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null"), true, "", "get_weather"},
		{chunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null"), true, "", `{"city":`},
		{chunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null"), true, "", `"Paris"}`},
		{chunkJSON(`{"tool_calls":[{"index":1,"id":"tooluse_2","type":"function","function":{"name":"get_time","arguments":""}}]}`, "null"), true, "", "get_time"},
		{chunkJSON(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, "null"), true, "", "{}"},
		{chunkJSON(`{}`, `"tool_calls"`), false, "tool_calls", ""},
		{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"amazon.nova-pro-v1:0","choices":[],` +
			`"usage":{"prompt_tokens":135,"completion_tokens":20,"total_tokens":155,"prompt_tokens_details":{"cached_tokens":30,"cache_write_tokens":5}}}`, false, "", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}

	last := chunks[len(chunks)-1]
	if last.HasChoices || last.Usage == nil {
		t.Fatalf("the last chunk is not usage-only: %s", last.Raw)
	}
	u := last.Usage
	uncached, read, write := u.PromptParts()
	gotUsage := []int{u.PromptTokens, u.CompletionTokens, u.TotalTokens, uncached, read, write}
	if diff := cmp.Diff([]int{135, 20, 155, 100, 30, 5}, gotUsage); diff != "" {
		t.Errorf("usage [prompt completion total uncached cache-read cache-write] (-want +got):\n%s", diff)
	}

	var a llm.Assembler
	for _, c := range chunks {
		if err := a.AddChunk(&c); err != nil {
			t.Fatal(err)
		}
	}
	answer, err := a.Answer(*u)
	if err != nil {
		t.Fatal(err)
	}
	msg := answer.Choices[0].Message
	wantMsg := chat.Message{Role: "assistant", Content: aws.String("Hello <b>"), ReasoningContent: aws.String("Think."), ToolCalls: []chat.ToolCall{
		{ID: "tooluse_1", Type: "function", Function: chat.Function{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		{ID: "tooluse_2", Type: "function", Function: chat.Function{Name: "get_time", Arguments: `{}`}},
	}}
	msg.Refusal = nil
	if diff := cmp.Diff(wantMsg, msg); diff != "" {
		t.Errorf("assembled message (-want +got):\n%s", diff)
	}
}

func TestDecoderFinishReason(t *testing.T) {
	tests := map[types.StopReason]string{
		types.StopReasonEndTurn:                    "stop",
		types.StopReasonStopSequence:               "stop",
		types.StopReasonMaxTokens:                  "length",
		types.StopReasonModelContextWindowExceeded: "length",
		types.StopReasonToolUse:                    "tool_calls",
		types.StopReasonGuardrailIntervened:        "content_filter",
		types.StopReasonContentFiltered:            "content_filter",
		types.StopReasonMalformedModelOutput:       "stop",
		types.StopReasonMalformedToolUse:           "stop",
		"":                                         "stop",
		"something_new":                            "stop",
	}
	for reason, want := range tests {
		chunks, err := decodeAll(t, &types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: reason}})
		if err != nil || len(chunks) != 1 || chunks[0].FinishReason != want {
			t.Errorf("%q: chunks %v, err %v; want one with finish_reason %q", reason, chunks, err, want)
		}
	}
}

func TestDecoderUsage(t *testing.T) {
	tests := []struct {
		name  string
		usage *types.TokenUsage
		want  string // the usage object, "" for no chunk
	}{
		{"no cache", &types.TokenUsage{InputTokens: aws.Int32(12), OutputTokens: aws.Int32(3)},
			`{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}`},
		{"cache reads only", &types.TokenUsage{InputTokens: aws.Int32(2), OutputTokens: aws.Int32(3), CacheReadInputTokens: aws.Int32(10)},
			`{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":10}}`},
		{"no counts", &types.TokenUsage{}, `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`},
		{"negative counts", &types.TokenUsage{InputTokens: aws.Int32(-1), OutputTokens: aws.Int32(4)},
			`{"prompt_tokens":0,"completion_tokens":4,"total_tokens":4}`},
		{"no usage", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := decodeAll(t, &types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: tt.usage}})
			if err != nil {
				t.Fatal(err)
			}
			var got *llm.Usage
			if len(chunks) == 1 {
				got = chunks[0].Usage
			}
			if len(chunks) > 1 || !reflect.DeepEqual(got, llm.ReadUsage([]byte(tt.want))) {
				t.Errorf("chunks %d, usage %+v; want %s", len(chunks), got, tt.want)
			}
		})
	}
}

// TestDecoderExceptions: an exception member is an *Exception of its name
// and Bedrock's message (the adapter classifies it); a member of another
// name is nothing.
func TestDecoderExceptions(t *testing.T) {
	tests := []struct {
		tag, value string
		msg        string
	}{
		{"throttlingException", `{"message":"Too many requests"}`, "Too many requests"},
		{"validationException", `{"message":"The model returned an invalid tool use"}`, "The model returned an invalid tool use"},
		{"validationException", ``, ""},
		{"modelStreamErrorException", `{"Message":"broken"}`, "broken"},
		{"internalServerException", `not json`, ""},
		{"serviceUnavailableException", `{}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.tag, func(t *testing.T) {
			chunks, err := decodeAll(t, &types.UnknownUnionMember{Tag: tt.tag, Value: []byte(tt.value)})
			var ex *Exception
			if len(chunks) != 0 || !errors.As(err, &ex) {
				t.Fatalf("chunks %d, err %v; want an *Exception", len(chunks), err)
			}
			if ex.Name != tt.tag || ex.Message != tt.msg {
				t.Errorf("exception %q, message %q; want %q, %q", ex.Name, ex.Message, tt.tag, tt.msg)
			}
		})
	}
	chunks, err := decodeAll(t, &types.UnknownUnionMember{Tag: "somethingNew", Value: []byte(`{}`)})
	if len(chunks) != 0 || err != nil {
		t.Errorf("an unknown member: chunks %d, err %v; want nothing", len(chunks), err)
	}
	if ex := ExceptionOf(textDelta(0, "x")); ex != nil {
		t.Errorf("ExceptionOf an event: %v", ex)
	}
}

// TestDecoderNil decodes events with nothing in them: every nil
// pointer of the SDK's types, and members of no kind the decoder reads.
func TestDecoderNil(t *testing.T) {
	events := []types.ConverseStreamOutput{
		nil,
		(*types.ConverseStreamOutputMemberMessageStart)(nil),
		(*types.ConverseStreamOutputMemberContentBlockStart)(nil),
		(*types.ConverseStreamOutputMemberContentBlockDelta)(nil),
		(*types.ConverseStreamOutputMemberContentBlockStop)(nil),
		(*types.ConverseStreamOutputMemberMessageStop)(nil),
		(*types.ConverseStreamOutputMemberMetadata)(nil),
		(*types.UnknownUnionMember)(nil),
		&types.ConverseStreamOutputMemberContentBlockStart{},
		&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{Start: (*types.ContentBlockStartMemberToolUse)(nil)}},
		&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{Start: &types.ContentBlockStartMemberImage{}}},
		&types.ConverseStreamOutputMemberContentBlockDelta{},
		blockDelta(0, (*types.ContentBlockDeltaMemberText)(nil)),
		blockDelta(0, (*types.ContentBlockDeltaMemberToolUse)(nil)),
		blockDelta(0, (*types.ContentBlockDeltaMemberReasoningContent)(nil)),
		blockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{}),
		blockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{Value: (*types.ReasoningContentBlockDeltaMemberText)(nil)}),
		blockDelta(0, &types.ContentBlockDeltaMemberToolUse{}),
		blockDelta(0, &types.ContentBlockDeltaMemberCitation{}),
		inputDelta(0, `{"a":1}`), // no tool call started: nowhere to put it
		&types.ConverseStreamOutputMemberContentBlockStop{},
		&types.ConverseStreamOutputMemberMetadata{},
	}
	chunks, err := decodeAll(t, events...)
	if err != nil || len(chunks) != 0 {
		t.Errorf("chunks %d, err %v; want none", len(chunks), err)
	}

	// A tool call whose start names nothing, and input for a block whose
	// index is not given: it goes to the tool call started last.
	chunks, err = decodeAll(t,
		&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{Start: &types.ContentBlockStartMemberToolUse{}}},
		&types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{
			ContentBlockIndex: aws.Int32(7), Delta: &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String("{}")}},
		}},
		&types.ConverseStreamOutputMemberContentBlockStop{},
	)
	var raws []string
	for _, c := range chunks {
		raws = append(raws, string(c.Raw))
	}
	want := []string{
		chunkJSON(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"","arguments":""}}]}`, "null"),
		chunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, "null"),
	}
	if diff := cmp.Diff(want, raws); err != nil || diff != "" {
		t.Errorf("err %v, chunks (-want +got):\n%s", err, diff)
	}
}
