package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// UpstreamRequest is one call to one provider.
type UpstreamRequest struct {
	// Model is the route's upstream model name; Body already carries it.
	Model string
	// Proto is Body's protocol: ProtoChat, or the provider's own
	// (Caps.Native) for a client's request passed through.
	Proto Proto
	// Body is the request to send, as JSON. In Chat Completions: the
	// client's fields less the gateway-owned ones, with "model" replaced,
	// "stream" true and stream_options.include_usage true. Passed through:
	// the client's body with "model" replaced and "stream" true. The
	// gateway always calls upstream streaming, so that one rule (fallback
	// until the first output) and one timeout (first_token_timeout) cover
	// both kinds of client request. Nil when Parts holds the body.
	Body []byte
	// Parts is the body as the pieces the router spliced it from, in
	// order: the client's own values where they are, between the
	// gateway's few bytes. A body this large is sent as its pieces, never
	// joined (Bytes joins them for an adapter that reads the body).
	Parts [][]byte
	// Header holds the protocol's request headers to forward with a body
	// passed through (anthropic-version, anthropic-beta).
	Header map[string][]string

	// view is Body's Chat Completions view, once decoded (ChatView).
	view    *chat.RequestView
	viewErr error
}

// Bytes is the body in one piece: Body, or Parts joined once (and kept in
// Body).
func (r *UpstreamRequest) Bytes() []byte {
	if r.Body == nil && r.Parts != nil {
		r.Body = bytes.Join(r.Parts, nil)
	}
	return r.Body
}

// Pieces is the body as pieces to send in order, without joining them:
// Parts, or Body as one piece.
func (r *UpstreamRequest) Pieces() [][]byte {
	if r.Parts != nil {
		return r.Parts
	}
	return [][]byte{r.Body}
}

// Provider is one upstream, as the router uses it. Adapters
// (pkg/provider/...) implement it; they make exactly one attempt per call and
// never retry on their own: retrying is the router's job alone.
type Provider interface {
	Name() string
	// Caps is what the provider can do besides ChatStream. It does not
	// change: the router reads it once, when it is made.
	Caps() Caps
	// ChatStream sends req. It returns a stream once the upstream accepted
	// the request (HTTP 200), or a *ProviderError.
	ChatStream(ctx context.Context, req *UpstreamRequest) (ChunkStream, error)
}

// Caps is what a provider can do besides ChatStream. The zero value is a
// provider of Chat Completions with no output limit of its own that
// cannot count tokens.
type Caps struct {
	// Native is the protocol the provider takes requests in as they are:
	// the router sends it a client's own body (with the route's model)
	// when the client speaks that protocol, and the stream's chunks are
	// then that protocol's events (Chunk.Proto), passed to the client
	// unchanged. ProtoChat for a provider that takes only Chat
	// Completions.
	Native Proto
	// MaxOutputTokens is the most output tokens (of each choice) the
	// provider lets a request that sets no limit produce, when it sets a
	// limit of its own on such a request (Anthropic's Messages requires
	// max_tokens: its adapter sends one); 0 when it sets none. The router
	// reads it for what a request without a limit may produce (reserved
	// against a tpm).
	MaxOutputTokens int
	// Counter counts the input tokens of a Messages request upstream;
	// nil when the provider cannot.
	Counter TokenCounter
}

// ChunkStream is an upstream's answer, chunk by chunk. A stream embeds
// NoReports for what it cannot tell.
type ChunkStream interface {
	// Next returns the next chunk. It returns io.EOF after "data: [DONE]",
	// ErrStreamCut when the stream ended without it, and a *ProviderError
	// for an error event, a malformed chunk or a broken connection.
	Next() (Chunk, error)
	// Ready reports that Next will return without waiting for the network
	// (conservatively: false when unsure). It is called from the goroutine
	// that calls Next.
	Ready() bool
	// Report is what the stream tells besides its chunks, as of now. It
	// is called from the goroutine that calls Next.
	Report() StreamReport
	// Close releases the connection. It is safe to call more than once.
	Close() error
}

// StreamReport is what a stream tells besides its chunks.
type StreamReport struct {
	// Dropped names the request's fields the adapter's translation into
	// another protocol left out (top-level keys, or paths such as
	// messages[].name), for the answer's x-gateway-dropped header
	// (docs/translation.md); nil when it left none out.
	Dropped []string
	// Usage is the usage the provider reported so far, before its usage
	// chunk or without one (an Anthropic stream reports the prompt's
	// tokens at its start): a stream that breaks off before its end is
	// then billed on those counts, not on an estimate. Nil when nothing
	// was reported; a usage chunk, once read, supersedes it.
	Usage *Usage
}

// NoReports is what a stream that tells nothing besides its chunks says:
// it is never Ready, and its Report is empty. A ChunkStream embeds it for
// the methods it has nothing to say in.
type NoReports struct{}

// Ready is false: Next may wait.
func (NoReports) Ready() bool { return false }

// Report is empty.
func (NoReports) Report() StreamReport { return StreamReport{} }

// Chunk is one piece of a streamed answer. In the gateway's own protocol
// (Proto ProtoChat, Chat Completions' chat.completion.chunk) it is typed:
// ID to Choices are what the chunk says, which a translation reads and
// sets, and Output to Text are derived from them. Raw is the JSON object
// as the upstream sent it (the SSE data payload), which a Chat Completions
// client gets as it is, so that fields the gateway does not know pass
// through untouched; a chunk built from its typed fields has none.
type Chunk struct {
	// Proto is the chunk's protocol: ProtoChat for a chat.completion.chunk,
	// or a provider's native one (Caps.Native) for an event of a request
	// passed through, whose Raw and Event go to the client as they are. Of
	// such an event's typed fields, only those its observer sets are read:
	// Output, Text, Usage, and Seen and Finished (1 on the event that ends
	// the answer); its stop reason stays in Raw, in its own vocabulary.
	Proto Proto
	// Event is the SSE event name of a passed-through event ("" for Chat).
	Event string
	Raw   []byte

	ID                string
	Model             string
	Created           int64
	SystemFingerprint string
	ServiceTier       string
	// Choices are the chunk's choices, in the order sent; an empty list
	// for a usage-only chunk ("choices": []).
	Choices []ChunkChoice
	// Usage is the chunk's usage, read once by the decoder that made the
	// chunk, or nil when it has none.
	Usage *Usage

	// Output is true when the chunk carries text, a tool call, a refusal or
	// a reasoning model's thinking: the first such chunk fixes the provider
	// for the rest of the request.
	Output bool
	// FinishReason is the first non-empty finish_reason among the choices,
	// in Chat Completions' vocabulary; "" on an event passed through.
	FinishReason string
	// Seen and Finished are the chunk's choices, and those of them with a
	// finish_reason, as bits by index (bit i for index i; indexes from 63
	// on share bit 63): with n over 1, an answer is finished once every
	// choice it had finished, not at the first.
	Seen, Finished uint64
	// HasChoices is false for a usage-only chunk ("choices": []).
	HasChoices bool
	// Text is the content, refusal, reasoning and tool-call text the chunk
	// adds (a tool call's name, then its arguments), for counting the
	// tokens of an answer whose upstream reported no usage.
	Text string
}

// ChunkChoice is what one choice of a chunk adds.
type ChunkChoice struct {
	Index int
	Delta Delta
	// Logprobs is the choice's logprobs object, nil when it had none.
	Logprobs *chat.Logprobs
	// FinishReason is "" until the choice ends.
	FinishReason string
	// StopSequence is the stop sequence that ended the choice, when the
	// upstream says (vLLM's stop_reason, when a string), else nil.
	StopSequence *string
}

// Delta is the message text a choice's chunk adds.
type Delta struct {
	Role string
	// Content and Refusal are nil when the chunk has no such field (or
	// null).
	Content *string
	Refusal *string
	// ReasoningContent and Reasoning are a reasoning model's thinking, as
	// OpenAI-compatible servers stream it (vLLM, DeepSeek and Together as
	// reasoning_content, Groq and OpenRouter as reasoning): output, though
	// not the answer's content. A value that is not a string (neither is
	// OpenAI's own field) reads as "".
	ReasoningContent string
	Reasoning        string
	ToolCalls        []ToolCallDelta
	// FunctionCall is the legacy function_call.
	FunctionCall *chat.Function
}

// Thinking is the delta's reasoning text: ReasoningContent, else
// Reasoning.
func (d *Delta) Thinking() string {
	if d.ReasoningContent != "" {
		return d.ReasoningContent
	}
	return d.Reasoning
}

// ToolCallDelta is what a chunk adds to the tool call at Index.
type ToolCallDelta struct {
	Index    int
	ID       string
	Type     string
	Function chat.Function
}

// addText appends s to the chunk's Text (the first piece is kept as it is,
// without a copy).
func (c *Chunk) addText(s string) {
	if c.Text == "" {
		c.Text = s
	} else if s != "" {
		c.Text += s
	}
}

// NonEmptyString is the value of raw when it is a non-empty JSON string,
// else "".
func NonEmptyString(raw json.RawMessage) string {
	if len(raw) <= 2 || raw[0] != '"' {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// ChunkError is an error object an upstream sent inside its stream.
type ChunkError struct {
	Message string
}

func (e *ChunkError) Error() string { return "upstream error event: " + e.Message }

// ParseChunk reads one SSE data payload. An "error" object in the payload is
// returned as a *ChunkError; anything that is not a JSON object is an error.
func ParseChunk(raw []byte) (Chunk, error) { return parseChunk(raw, nil) }

// ChunkParser parses the chunks of one stream as ParseChunk does, but the
// strings a stream repeats in every chunk (id, model, system_fingerprint,
// service_tier) are allocated once and shared by the chunks that repeat
// them: a provider streaming a token a chunk sends them hundreds of times.
// The zero value is ready; not for concurrent use.
type ChunkParser struct {
	seen chunkStrings
	// usage holds the usage of the stream's first chunk with usage: a
	// stream's one usage chunk is read without an allocation of its own.
	usage UsageSlot
}

// Parse is ParseChunk for the stream's next chunk.
func (p *ChunkParser) Parse(raw []byte) (Chunk, error) { return parseChunk(raw, p) }

func parseChunk(raw []byte, p *ChunkParser) (Chunk, error) {
	var seen *chunkStrings
	var slot *UsageSlot
	if p != nil {
		seen, slot = &p.seen, &p.usage
	}
	h := new(chunkHead)
	if err := decodeChunk(raw, h, seen); err != nil {
		return Chunk{}, fmt.Errorf("malformed chunk: %w", err)
	}
	if seen != nil {
		seen.remember(h)
	}
	if len(h.Error) > 0 && string(h.Error) != "null" {
		// Only the message is read: a member of an unexpected type
		// beside it does not lose it.
		var e chat.UpstreamErrorBody
		_ = json.Unmarshal(h.Error, &e)
		if e.Message == "" {
			e.Message = "unspecified upstream error"
		}
		return Chunk{}, &ChunkError{Message: e.Message}
	}
	c := h.chunk(raw)
	c.Usage = slot.Read(h.Usage)
	c.derive()
	return c, nil
}

// derive sets the fields derived from the chunk's choices: Output, Text,
// FinishReason, Seen, Finished and HasChoices.
func (c *Chunk) derive() {
	c.HasChoices = len(c.Choices) > 0
	for i := range c.Choices {
		ch := &c.Choices[i]
		d := &ch.Delta
		if d.Content != nil && *d.Content != "" {
			c.Output = true
			c.addText(*d.Content)
		}
		if d.Refusal != nil && *d.Refusal != "" {
			c.Output = true
			c.addText(*d.Refusal)
		}
		// A reasoning model's thinking is output: the provider is
		// answering (its first-token timeout must not end it), and it is
		// billed as completion tokens.
		for _, s := range [...]string{d.ReasoningContent, d.Reasoning} {
			if s != "" {
				c.Output = true
				c.addText(s)
			}
		}
		if len(d.ToolCalls) > 0 || d.FunctionCall != nil {
			c.Output = true
			for _, tc := range d.ToolCalls {
				c.addText(tc.Function.Name)
				c.addText(tc.Function.Arguments)
			}
			if d.FunctionCall != nil {
				c.addText(d.FunctionCall.Name)
				c.addText(d.FunctionCall.Arguments)
			}
		}
		bit := uint64(1) << min(max(ch.Index, 0), 63)
		c.Seen |= bit
		if ch.FinishReason != "" {
			c.Finished |= bit
			if c.FinishReason == "" {
				c.FinishReason = ch.FinishReason
			}
		}
	}
}

// undecoded reports a chunk made with only Raw, whose typed fields are
// read from Raw when wanted.
func (c *Chunk) undecoded() bool {
	return c.Choices == nil && len(c.Raw) > 0 && c.Proto == ProtoChat
}
