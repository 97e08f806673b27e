package simulated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// answer is the text of one simulated answer, made word by word as it is
// read, and the waits between its words: each happens in the call that
// needs the word, so no goroutine runs, and Close or the request's context
// ends a wait. Its Close may be called from another goroutine, as closing
// an HTTP body would be.
type answer struct {
	// ctx is the call's context, kept because the answer outlives the
	// call that started it exactly as an HTTP response body outlives the
	// round trip, and its waits must end when the request is cancelled.
	ctx context.Context
	cfg catalog.Simulated

	// prefix starts the first word: the provider's name.
	prefix string
	// promptTokens is the usage's prompt (input) tokens; the completion
	// tokens are cfg.Words, one per word.
	promptTokens int
	// rng is the word generator's state, seeded from the last user text.
	rng uint64
	// made counts the words made.
	made int

	done      chan struct{}
	closeOnce sync.Once
}

// newAnswer starts the answer of provider name to a request whose last
// user text is lastUser and whose text is contentBytes long. seed, which
// depends on lastUser alone, also makes the answer's id, so that a
// conversation's answer does not change with the gateway's own edits to
// the request (model name, stream options). The text is hashed, never
// logged.
func newAnswer(ctx context.Context, name string, cfg catalog.Simulated, lastUser string, contentBytes int) (a *answer, seed uint64) {
	h := fnv.New64a()
	h.Write([]byte(lastUser))
	seed = h.Sum64()
	return &answer{
		ctx:          ctx,
		cfg:          cfg,
		prefix:       "Simulated answer from " + name + ":",
		promptTokens: max(1, llm.EstimateTokens(contentBytes)),
		rng:          seed,
		done:         make(chan struct{}),
	}, seed
}

// word returns the next word's text, " <word>" (the first after the
// prefix), after its wait: the first token latency before the first, the
// chunk latency before each later one.
func (a *answer) word() (string, error) {
	wait := a.cfg.ChunkLatency.D()
	if a.made == 0 {
		wait = a.cfg.FirstTokenLatency.D()
	}
	if err := sleep(a.ctx, a.done, wait); err != nil {
		return "", err
	}
	text := " " + nextWord(&a.rng)
	if a.made == 0 {
		text = a.prefix + text
	}
	a.made++
	return text, nil
}

// closed reports whether Close was called.
func (a *answer) closed() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// Close ends the answer: a waiting or later read returns ErrClosed.
func (a *answer) Close() error {
	a.closeOnce.Do(func() { close(a.done) })
	return nil
}

// stream is one simulated answer as Chat Completions chunks. Next is not
// safe for concurrent use (no ChunkStream is), but Close may be called
// from another goroutine to abort a waiting Next.
type stream struct {
	*answer
	llm.NoReports
	name  string
	id    string
	model string
	// chunks parses its chunks, which share their id and model.
	chunks llm.ChunkParser

	// step is the next chunk: 0 the role chunk, 1..Words the content
	// chunks, Words+1 the finish chunk, Words+2 the usage chunk, then EOF.
	step int
	// err, once set, is returned by every later Next: io.EOF after the
	// last chunk, or the context error that cut the stream.
	err error
}

// Next returns the next chunk, waiting first as the config says: the first
// token latency before the first content chunk, the chunk latency before each
// later one.
func (s *stream) Next() (llm.Chunk, error) {
	if s.closed() {
		return llm.Chunk{}, ErrClosed
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
		text, err := s.word()
		if err != nil {
			return s.cut(err)
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

// nextWord advances the generator state rng and returns its word. The FNV
// hash of the last user text seeds a splitmix64 sequence, which spreads
// even similar hashes into unrelated word choices.
func nextWord(rng *uint64) string {
	*rng += 0x9e3779b97f4a7c15
	z := *rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return vocabulary[z%uint64(len(vocabulary))]
}
