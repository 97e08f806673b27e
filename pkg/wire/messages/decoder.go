package messages

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// RefusalText is the refusal sent to the client when Anthropic stops with
// stop_reason "refusal" before any output: Messages gives no refusal text of
// its own, and an OpenAI client looks for one in delta.refusal.
const RefusalText = "The provider declined to answer this request."

// errMalformed marks an event the Decoder cannot read.
var errMalformed = errors.New("malformed event")

// Decoder turns the events of a Messages stream into OpenAI
// chat.completion.chunk values, so that the rest of the gateway, which speaks
// Chat Completions, sees an Anthropic upstream as it sees any other:
//
//	message_start                 role chunk {"role":"assistant","content":""}
//	content_block_start text      (nothing unless it carries text)
//	content_block_start tool_use  delta.tool_calls[{index,id,type,function{name,arguments:""}}]
//	text_delta                    delta.content
//	input_json_delta              delta.tool_calls[{index,function{arguments}}]
//	content_block_stop            for a tool_use that streamed no input: arguments "{}"
//	thinking block, thinking_delta delta.reasoning_content (the signature is not carried)
//	the output tool's tool_use    its input as delta.content: the answer of a JSON
//	                              response_format (SetOutputTool)
//	message_delta stop_reason     finish_reason: end_turn, stop_sequence, pause_turn → stop;
//	                              max_tokens, model_context_window_exceeded → length;
//	                              tool_use → tool_calls (stop for the output tool);
//	                              refusal → content_filter
//	                              (after a delta.refusal of RefusalText when nothing was output);
//	                              stop_sequence's string as the choice's stop_reason (vLLM's field)
//	message_stop                  usage chunk (choices []), then done
//	ping, redacted_thinking, unknown nothing
//	error                         a FailTransient *llm.ProviderError
//
// Usage: prompt_tokens is input_tokens plus the cache creation and cache read
// tokens (OpenAI counts cached tokens in prompt_tokens), with
// prompt_tokens_details.cached_tokens the cache reads and
// prompt_tokens_details.cache_write_tokens the cache creation (OpenRouter's
// name); completion_tokens is output_tokens. A stream that reported no usage
// gets no usage chunk, so the gateway estimates it. The zero Decoder is not
// usable; use NewDecoder.
type Decoder struct {
	created int64
	id      string
	model   string

	// blocks maps a content block's index to its tool call's index, for
	// tool_use blocks only.
	blocks map[int]*toolBlock
	tools  int

	slot llm.UsageSlot // where a chunk's usage is read into

	// outputTool is the tool a JSON response_format is forced through;
	// outputBlock is its block's index once started (-1 before).
	outputTool  string
	outputBlock int

	output bool
	usage  usageCounts
	finish string
	done   bool
}

type toolBlock struct {
	index   int
	argsOut bool
}

// usageCounts are the usage counts a stream reported so far; saw is
// whether it reported any.
type usageCounts struct {
	input, output, cacheCreate, cacheRead int64
	// cache1h is the part of cacheCreate written to a one-hour cache;
	// tools the server tool calls, by "<tool>_requests".
	cache1h int64
	tools   map[string]int64
	saw     bool
}

// NewDecoder returns a Decoder whose chunks carry created as their
// "created" time.
func NewDecoder(created int64) *Decoder {
	return &Decoder{created: created, blocks: map[int]*toolBlock{}, outputBlock: -1}
}

// SetOutputTool names the tool whose call is the answer's text (the forced
// tool of a JSON response_format).
func (d *Decoder) SetOutputTool(name string) { d.outputTool = name }

// Done reports whether message_stop has been decoded.
func (d *Decoder) Done() bool { return d.done }

// Decode reads one event's data (its JSON; name is the SSE event name, used
// only when the data has no "type") and returns the chunks it becomes, none
// for most events. An error event is a FailTransient *llm.ProviderError with
// the upstream's message; data that is not an event object is a
// FailTransient *llm.ProviderError too. After message_stop, Done is true and
// later events are ignored.
func (d *Decoder) Decode(name string, data []byte) ([]llm.Chunk, error) {
	if d.done {
		return nil, nil
	}
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream event", Err: errors.Join(errMalformed, err)}
	}
	if ev.Type == "" {
		ev.Type = name
	}
	switch ev.Type {
	case EventMessageStart:
		if ev.Message == nil {
			return nil, malformedEvent("message_start without message")
		}
		d.id, d.model = ev.Message.ID, ev.Message.Model
		d.usage.add(ev.Message.Usage)
		empty := ""
		return d.emit(nil, chat.Delta{Role: "assistant", Content: &empty}, nil)
	case EventContentBlockStart:
		cb := ev.ContentBlock
		if cb == nil {
			return nil, malformedEvent("content_block_start without content_block")
		}
		switch cb.Type {
		case BlockText:
			if cb.Text == "" {
				return nil, nil
			}
			return d.emit(nil, chat.Delta{Content: &cb.Text}, nil)
		case BlockThinking:
			if cb.Thinking == "" {
				return nil, nil
			}
			return d.emit(nil, chat.Delta{ReasoningContent: &cb.Thinking}, nil)
		case BlockToolUse:
			if d.outputTool != "" && cb.Name == d.outputTool && d.outputBlock < 0 {
				d.outputBlock = ev.Index
				return nil, nil
			}
			tb := &toolBlock{index: d.tools}
			d.tools++
			d.blocks[ev.Index] = tb
			empty := ""
			return d.emit(nil, chat.Delta{ToolCalls: []chat.DeltaToolCall{{
				Index: tb.index, ID: cb.ID, Type: "function",
				Function: &chat.DeltaFunction{Name: &cb.Name, Arguments: &empty},
			}}}, nil)
		}
		return nil, nil // redacted thinking, server tools: nothing a Chat Completions client reads
	case EventContentBlockDelta:
		if ev.Delta == nil {
			return nil, malformedEvent("content_block_delta without delta")
		}
		switch ev.Delta.Type {
		case DeltaText:
			if ev.Delta.Text == "" {
				return nil, nil
			}
			return d.emit(nil, chat.Delta{Content: &ev.Delta.Text}, nil)
		case DeltaThinking:
			if ev.Delta.Thinking == "" {
				return nil, nil
			}
			return d.emit(nil, chat.Delta{ReasoningContent: &ev.Delta.Thinking}, nil)
		case DeltaInputJSON:
			if ev.Index == d.outputBlock && d.outputBlock >= 0 {
				if ev.Delta.PartialJSON == "" {
					return nil, nil
				}
				return d.emit(nil, chat.Delta{Content: &ev.Delta.PartialJSON}, nil)
			}
			tb := d.blocks[ev.Index]
			if tb == nil || ev.Delta.PartialJSON == "" {
				return nil, nil
			}
			tb.argsOut = true
			return d.emit(nil, chat.Delta{ToolCalls: []chat.DeltaToolCall{{
				Index: tb.index, Function: &chat.DeltaFunction{Arguments: &ev.Delta.PartialJSON},
			}}}, nil)
		}
		return nil, nil
	case EventContentBlockStop:
		tb := d.blocks[ev.Index]
		if tb == nil || tb.argsOut {
			return nil, nil
		}
		tb.argsOut = true
		args := "{}"
		return d.emit(nil, chat.Delta{ToolCalls: []chat.DeltaToolCall{{
			Index: tb.index, Function: &chat.DeltaFunction{Arguments: &args},
		}}}, nil)
	case EventMessageDelta:
		d.usage.add(ev.Usage)
		if ev.Delta == nil || ev.Delta.StopReason == "" {
			return nil, nil
		}
		stop := ev.Delta.StopReason
		finish := FinishReason(stop)
		if finish == chat.FinishToolCalls && d.outputBlock >= 0 && d.tools == 0 {
			finish = chat.FinishStop // the output tool's call is the answer
		}
		d.finish = finish
		var out []llm.Chunk
		if stop == StopRefusal && !d.output {
			refusal := RefusalText
			c, err := d.emit(nil, chat.Delta{Refusal: &refusal}, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, c...)
		}
		var stopSeq *string
		if stop == StopStopSequence && ev.Delta.StopSequence != nil {
			stopSeq = ev.Delta.StopSequence
		}
		c, err := d.emitStop(chat.Delta{}, &finish, stopSeq)
		return append(out, c...), err
	case EventMessageStop:
		d.done = true
		if !d.usage.saw {
			return nil, nil
		}
		return d.emit(d.usage.json(), chat.Delta{}, nil)
	case EventError:
		msg := "unspecified upstream error"
		if ev.Error != nil && ev.Error.Message != "" {
			msg = ev.Error.Message
		}
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: msg, Err: &llm.ChunkError{Message: msg}}
	}
	return nil, nil // ping, and event types added after this was written
}

func malformedEvent(what string) *llm.ProviderError {
	return &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream event", Err: errors.New(what)}
}

// add takes an event's usage: message_delta's counts are cumulative, so
// the last one wins.
func (c *usageCounts) add(u *Usage) {
	if u == nil {
		return
	}
	set := func(dst *int64, v *int64) {
		if v != nil && *v >= 0 {
			*dst = *v
			c.saw = true
		}
	}
	set(&c.input, u.InputTokens)
	set(&c.output, u.OutputTokens)
	set(&c.cacheCreate, u.CacheCreationInputTokens)
	set(&c.cacheRead, u.CacheReadInputTokens)
	if u.CacheCreation != nil {
		set(&c.cache1h, u.CacheCreation.Ephemeral1hInputTokens)
	}
	for name, n := range u.ServerToolUse {
		if n != nil && *n >= 0 && strings.HasSuffix(name, "_requests") {
			if c.tools == nil {
				c.tools = make(map[string]int64, len(u.ServerToolUse))
			}
			c.tools[name] = *n
		}
	}
}

// soFar is the usage reported so far, as the hub carries it (read into
// slot, llm.UsageSlot), or nil when none was reported.
func (c *usageCounts) soFar(slot *llm.UsageSlot) *llm.Usage {
	if !c.saw {
		return nil
	}
	return slot.Read(c.json())
}

// json is the counts as the Chat Completions usage object.
func (c *usageCounts) json() json.RawMessage {
	prompt := c.input + c.cacheCreate + c.cacheRead
	w := chat.Usage{PromptTokens: prompt, CompletionTokens: c.output, TotalTokens: prompt + c.output}
	if c.cacheRead > 0 || c.cacheCreate > 0 {
		w.PromptTokensDetails = &chat.PromptTokensDetails{CachedTokens: c.cacheRead, CacheWriteTokens: c.cacheCreate, CacheWrite1hTokens: min(c.cache1h, c.cacheCreate)}
	}
	for name, n := range c.tools {
		if n > 0 {
			if w.ServerToolUse == nil {
				w.ServerToolUse = make(map[string]int64, len(c.tools))
			}
			w.ServerToolUse[name] = n
		}
	}
	return jsonobj.Marshal(w)
}

// UsageSoFar is the usage reported by the events decoded so far (the
// counts of message_start, then message_delta's), as the hub carries it,
// or nil when none was reported.
func (d *Decoder) UsageSoFar() *llm.Usage { return d.usage.soFar(nil) }

// emit builds one chunk: a usage-only chunk when usage is set, else one
// choice with delta and finish.
func (d *Decoder) emit(usage json.RawMessage, delta chat.Delta, finish *string) ([]llm.Chunk, error) {
	if usage == nil {
		return d.emitStop(delta, finish, nil)
	}
	return d.write(chat.Chunk{ID: d.id, Object: chat.ObjectChunk, Created: d.created, Model: d.model, Usage: usage, Choices: []chat.ChunkChoice{}})
}

// emitStop builds one chunk of one choice with delta, finish and the stop
// sequence that ended the answer (nil for none).
func (d *Decoder) emitStop(delta chat.Delta, finish, stopSeq *string) ([]llm.Chunk, error) {
	return d.write(chat.Chunk{ID: d.id, Object: chat.ObjectChunk, Created: d.created, Model: d.model,
		Choices: []chat.ChunkChoice{{Delta: delta, FinishReason: finish, StopReason: stopSeq}}})
}

func (d *Decoder) write(w chat.Chunk) ([]llm.Chunk, error) {
	c, err := llm.ChatChunk(&w, &d.slot)
	if err != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream event", Err: err}
	}
	if c.Output {
		d.output = true
	}
	return []llm.Chunk{c}, nil
}

// MessageEvents turns a whole Message (a non-streamed answer) into the events
// it would have streamed, so that one decoder reads both. An error envelope
// is its error event.
func MessageEvents(body []byte) ([][]byte, error) {
	var m struct {
		Message
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream answer", Err: err}
	}
	if m.Type == TypeError || !jsonobj.IsNull(m.Error) {
		return [][]byte{body}, nil
	}
	events := [][]byte{jsonobj.Marshal(MessageStart{Type: EventMessageStart, Message: Message{
		ID: m.ID, Type: TypeMessage, Role: RoleAssistant, Model: m.Model,
		Content: []ContentBlock{}, Usage: m.Usage}})}
	empty := ""
	for i, b := range m.Content {
		var start ContentBlock
		var delta Delta
		switch b.Type {
		case BlockText:
			start = ContentBlock{Type: BlockText, Text: &empty}
			delta = Delta{Type: DeltaText, Text: b.Text}
		case BlockToolUse:
			input := string(jsonobj.NonNull(b.Input))
			start = ContentBlock{Type: BlockToolUse, ID: b.ID, Name: b.Name, Input: json.RawMessage("{}")}
			delta = Delta{Type: DeltaInputJSON, PartialJSON: &input}
		default:
			continue
		}
		events = append(events,
			jsonobj.Marshal(ContentBlockStart{Type: EventContentBlockStart, Index: i, ContentBlock: start}),
			jsonobj.Marshal(ContentBlockDelta{Type: EventContentBlockDelta, Index: i, Delta: delta}),
			jsonobj.Marshal(ContentBlockStop{Type: EventContentBlockStop, Index: i}))
	}
	if m.StopReason != nil && *m.StopReason != "" {
		events = append(events,
			jsonobj.Marshal(MessageDelta{Type: EventMessageDelta, Delta: StopDelta{StopReason: m.StopReason}}),
			jsonobj.Marshal(MessageStop{Type: EventMessageStop}))
	}
	return events, nil
}
