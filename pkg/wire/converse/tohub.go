package converse

import (
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// Decoder turns the events of one ConverseStream answer into
// chat.completion.chunks, made from the events' typed fields
// (llm.ChatChunk), with the JSON OpenAI would send:
//
//	messageStart                   role chunk {"role":"assistant","content":""}
//	contentBlockStart toolUse      delta.tool_calls[{index,id,type,function{name,arguments:""}}],
//	                               tool calls counted from 0
//	contentBlockDelta text         delta.content
//	contentBlockDelta toolUse      delta.tool_calls[{index,function{arguments}}] of the
//	                               block's tool call (the last one started when the
//	                               block is not known)
//	contentBlockDelta reasoning    delta.reasoning_content (signatures and redacted
//	                               reasoning are not carried)
//	contentBlockStop               nothing; for a toolUse block that streamed no
//	                               input: arguments "{}", so that they parse
//	messageStop stopReason         finish_reason (FinishReason)
//	metadata usage                 usage chunk (choices [])
//	an exception                   an *Exception
//	anything else                  nothing
//
// Usage: prompt_tokens is inputTokens plus the cache read and cache write
// tokens (OpenAI counts cached tokens in prompt_tokens), with
// prompt_tokens_details.cached_tokens the cache reads and
// prompt_tokens_details.cache_write_tokens the cache writes (the names
// llm.Usage.PromptParts reads); completion_tokens is outputTokens. A
// metadata event without usage gets no usage chunk, so the gateway
// estimates it. The zero Decoder is not usable; use NewDecoder.
type Decoder struct {
	id, model string
	created   int64

	// blocks maps a toolUse content block's index to its tool call; last
	// is the tool call started last.
	blocks map[int32]*toolCall
	last   *toolCall
	tools  int
	// usage holds the usage of the answer's metadata event.
	usage llm.UsageSlot
}

type toolCall struct {
	index   int
	argsOut bool
}

// NewDecoder returns a decoder whose chunks carry id, model and
// created.
func NewDecoder(id, model string, created int64) *Decoder {
	return &Decoder{id: id, model: model, created: created, blocks: map[int32]*toolCall{}}
}

// Decode returns the chunk of one event, when it has one (ok). A metadata
// event yields a usage-only chunk ("choices": [], "usage": {...}). An
// exception member of the union is returned as an *Exception, which the
// adapter classifies, never a panic.
func (d *Decoder) Decode(ev types.ConverseStreamOutput) (ch llm.Chunk, ok bool, err error) {
	switch ev := ev.(type) {
	case *types.ConverseStreamOutputMemberMessageStart:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		empty := ""
		return d.emit(chat.Delta{Role: "assistant", Content: &empty}, nil)
	case *types.ConverseStreamOutputMemberContentBlockStart:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		start, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse)
		if !ok || start == nil {
			return llm.Chunk{}, false, nil // images and tool results: nothing a Chat Completions client reads
		}
		tc := &toolCall{index: d.tools}
		d.tools++
		d.blocks[aws.ToInt32(ev.Value.ContentBlockIndex)] = tc
		d.last = tc
		name, empty := aws.ToString(start.Value.Name), ""
		return d.emit(chat.Delta{ToolCalls: []chat.DeltaToolCall{{
			Index: tc.index, ID: aws.ToString(start.Value.ToolUseId), Type: "function",
			Function: &chat.DeltaFunction{Name: &name, Arguments: &empty},
		}}}, nil)
	case *types.ConverseStreamOutputMemberContentBlockDelta:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		switch delta := ev.Value.Delta.(type) {
		case *types.ContentBlockDeltaMemberText:
			if delta == nil || delta.Value == "" {
				return llm.Chunk{}, false, nil
			}
			return d.emit(chat.Delta{Content: &delta.Value}, nil)
		case *types.ContentBlockDeltaMemberToolUse:
			if delta == nil || aws.ToString(delta.Value.Input) == "" {
				return llm.Chunk{}, false, nil
			}
			tc := d.blocks[aws.ToInt32(ev.Value.ContentBlockIndex)]
			if tc == nil {
				tc = d.last
			}
			if tc == nil {
				return llm.Chunk{}, false, nil // no tool call started: nothing to add the input to
			}
			tc.argsOut = true
			return d.emit(chat.Delta{ToolCalls: []chat.DeltaToolCall{{
				Index: tc.index, Function: &chat.DeltaFunction{Arguments: delta.Value.Input},
			}}}, nil)
		case *types.ContentBlockDeltaMemberReasoningContent:
			if delta == nil {
				return llm.Chunk{}, false, nil
			}
			text, ok := delta.Value.(*types.ReasoningContentBlockDeltaMemberText)
			if !ok || text == nil || text.Value == "" {
				return llm.Chunk{}, false, nil
			}
			return d.emit(chat.Delta{ReasoningContent: &text.Value}, nil)
		}
		return llm.Chunk{}, false, nil // citations, images, tool results
	case *types.ConverseStreamOutputMemberContentBlockStop:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		tc := d.blocks[aws.ToInt32(ev.Value.ContentBlockIndex)]
		if tc == nil || tc.argsOut {
			return llm.Chunk{}, false, nil
		}
		tc.argsOut = true
		args := "{}"
		return d.emit(chat.Delta{ToolCalls: []chat.DeltaToolCall{{
			Index: tc.index, Function: &chat.DeltaFunction{Arguments: &args},
		}}}, nil)
	case *types.ConverseStreamOutputMemberMessageStop:
		if ev == nil {
			return llm.Chunk{}, false, nil
		}
		finish := FinishReason(string(ev.Value.StopReason))
		return d.emit(chat.Delta{}, &finish)
	case *types.ConverseStreamOutputMemberMetadata:
		if ev == nil || ev.Value.Usage == nil {
			return llm.Chunk{}, false, nil
		}
		return d.write(chat.Chunk{ID: d.id, Object: chat.ObjectChunk, Created: d.created, Model: d.model,
			Choices: []chat.ChunkChoice{}, Usage: ChatUsage(ev.Value.Usage)})
	case *types.UnknownUnionMember:
		if ex := ExceptionOf(ev); ex != nil {
			return llm.Chunk{}, false, ex
		}
		return llm.Chunk{}, false, nil // a member added after this was written
	}
	return llm.Chunk{}, false, nil
}

// ChatUsage is a Converse usage as the Chat Completions usage object.
func ChatUsage(u *types.TokenUsage) json.RawMessage {
	count := func(p *int32) int64 { return int64(max(aws.ToInt32(p), 0)) }
	input, output := count(u.InputTokens), count(u.OutputTokens)
	read, write := count(u.CacheReadInputTokens), count(u.CacheWriteInputTokens)
	prompt := input + read + write
	w := chat.Usage{PromptTokens: prompt, CompletionTokens: output, TotalTokens: prompt + output}
	if read > 0 || write > 0 {
		w.PromptTokensDetails = &chat.PromptTokensDetails{CachedTokens: read, CacheWriteTokens: write}
	}
	b, _ := json.Marshal(w) // numbers only: it always encodes
	return b
}

// emit is one chunk of one choice with delta and finish (nil: null).
func (d *Decoder) emit(delta chat.Delta, finish *string) (llm.Chunk, bool, error) {
	return d.write(chat.Chunk{ID: d.id, Object: chat.ObjectChunk, Created: d.created, Model: d.model,
		Choices: []chat.ChunkChoice{{Delta: delta, FinishReason: finish}}})
}

// write is the chunk c.
func (d *Decoder) write(c chat.Chunk) (llm.Chunk, bool, error) {
	ch, err := llm.ChatChunk(&c, &d.usage)
	if err != nil {
		return llm.Chunk{}, false, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream event", Err: err}
	}
	return ch, true, nil
}

// Exception is an exception member of a ConverseStream answer: the
// member's name ("throttlingException") and Bedrock's message, "" when its
// payload has none.
type Exception struct {
	Name, Message string
}

func (e *Exception) Error() string {
	if e.Message == "" {
		return e.Name
	}
	return e.Name + ": " + e.Message
}

// ExceptionOf is the exception an event of a ConverseStream answer is, or
// nil when it is none: a member the SDK does not model whose name ends in
// "Exception" (IsException).
func ExceptionOf(ev types.ConverseStreamOutput) *Exception {
	u, ok := ev.(*types.UnknownUnionMember)
	if !ok || u == nil || !IsException(u.Tag) {
		return nil
	}
	var body Error // "Message" too: encoding/json ignores case
	_ = json.Unmarshal(u.Value, &body)
	return &Exception{Name: u.Tag, Message: body.Message}
}
