package simulated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// stream is one simulated answer. It runs no goroutine: each chunk is made,
// after its wait, inside the Next call that returns it. Next is not safe for
// concurrent use (no ChunkStream is), but Close may be called from another
// goroutine to abort a waiting Next, as closing an HTTP body would.
type stream struct {
	llm.NoReports
	// ctx is the call's context, kept because the stream outlives
	// ChatStream exactly as an HTTP response body outlives the round trip,
	// and its waits must end when the request is cancelled.
	ctx  context.Context
	name string
	cfg  catalog.Simulated

	id     string
	model  string
	prefix string
	// promptTokens is reported in the usage chunk; completion tokens are
	// cfg.Words, one per content chunk.
	promptTokens int
	// rng is the word generator's state, seeded from the message hash.
	rng uint64
	// chunks parses its chunks, which share their id and model.
	chunks llm.ChunkParser

	// step is the next chunk: 0 the role chunk, 1..Words the content
	// chunks, Words+1 the finish chunk, Words+2 the usage chunk, then EOF.
	step int
	// err, once set, is returned by every later Next: io.EOF after the
	// last chunk, or the context error that cut the stream.
	err error

	done      chan struct{}
	closeOnce sync.Once
}

// Next returns the next chunk, waiting first as the config says: the first
// token latency before the first content chunk, the chunk latency before each
// later one.
func (s *stream) Next() (llm.Chunk, error) {
	select {
	case <-s.done:
		return llm.Chunk{}, ErrClosed
	default:
	}
	if s.err != nil {
		return llm.Chunk{}, s.err
	}
	// A cancelled request ends the stream even when no wait is due, as it
	// would end a read from a real upstream's connection.
	if err := s.ctx.Err(); err != nil {
		return s.cut(err)
	}

	w := chat.Chunk{ID: s.id, Object: chat.ObjectChunk, Created: created, Model: s.model}
	words := s.cfg.Words
	switch {
	case s.step == 0:
		empty := ""
		w.Choices = []chat.ChunkChoice{{Delta: chat.Delta{Role: chat.RoleAssistant, Content: &empty}}}
	case s.step <= words:
		wait := s.cfg.ChunkLatency.D()
		if s.step == 1 {
			wait = s.cfg.FirstTokenLatency.D()
		}
		if err := sleep(s.ctx, s.done, wait); err != nil {
			return s.cut(err)
		}
		text := " " + s.nextWord()
		if s.step == 1 {
			text = s.prefix + text
		}
		w.Choices = []chat.ChunkChoice{{Delta: chat.Delta{Content: &text}}}
	case s.step == words+1:
		stop := chat.FinishStop
		w.Choices = []chat.ChunkChoice{{FinishReason: &stop}}
	case s.step == words+2:
		// The gateway always asks for usage (stream_options.include_usage),
		// so it always comes, in a chunk of its own with no choices.
		w.Choices = []chat.ChunkChoice{}
		u, err := json.Marshal(chat.Usage{
			PromptTokens:     int64(s.promptTokens),
			CompletionTokens: int64(words),
			TotalTokens:      int64(s.promptTokens + words),
		})
		if err != nil {
			return s.malformed(err)
		}
		w.Usage = u
	default:
		// The end of the stream: what "data: [DONE]" is for a real one.
		s.err = io.EOF
		return llm.Chunk{}, io.EOF
	}
	s.step++

	raw, err := json.Marshal(w)
	if err != nil {
		return s.malformed(err)
	}
	// The chunk goes through the same parser as a real upstream's, so that
	// the router sees exactly what it would see from one.
	c, err := s.chunks.Parse(raw)
	if err != nil {
		return s.malformed(err)
	}
	return c, nil
}

// Close ends the stream: any waiting or later Next returns ErrClosed.
func (s *stream) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	return nil
}

// cut ends the stream on err: ErrClosed as such, a context error wrapped
// (not as a ProviderError: the router tells a cancellation or a timeout from
// a provider failure by the context).
func (s *stream) cut(err error) (llm.Chunk, error) {
	if errors.Is(err, ErrClosed) {
		return llm.Chunk{}, ErrClosed
	}
	s.err = fmt.Errorf("simulated provider %s: stream: %w", s.name, err)
	return llm.Chunk{}, s.err
}

// malformed reports a chunk that could not be made, as a real upstream's
// malformed chunk would be reported. It cannot happen with the wire types
// above; it is handled rather than panicked on all the same.
func (s *stream) malformed(err error) (llm.Chunk, error) {
	s.err = &llm.ProviderError{Class: llm.FailTransient, Message: "simulated provider made a malformed chunk", Err: err}
	return llm.Chunk{}, s.err
}

// nextWord returns the answer's next word. The FNV hash of the message seeds
// a splitmix64 sequence, which spreads even similar hashes into unrelated
// word choices.
func (s *stream) nextWord() string { return nextWord(&s.rng) }

// nextWord advances the generator state rng and returns its word.
func nextWord(rng *uint64) string {
	*rng += 0x9e3779b97f4a7c15
	z := *rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return vocabulary[z%uint64(len(vocabulary))]
}
