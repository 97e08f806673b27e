package openai

import (
	"bytes"
	"io"

	"github.com/buzzgate/buzzgate/pkg/llm"
	upstreamhttp "github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/sse"
)

// stream is an upstream's 200 answer: an event stream, or, when body.Events
// is nil, a chat.completion JSON body read whole on the first Next.
type stream struct {
	llm.NoReports // a Chat Completions answer is not translated
	body          upstreamhttp.Body

	chunks llm.ChunkParser
	// ahead is an event (or the error in its place) that Ready read ahead,
	// for the next Next to start from (hasAhead).
	ahead    sse.Event
	aheadErr error
	hasAhead bool

	jsonRead bool        // the JSON body has been read and converted
	pending  []llm.Chunk // its chunks not yet returned

	err error // sticky: io.EOF after [DONE], or the first failure
}

var done = []byte("[DONE]")

// Next returns the next chunk: io.EOF after [DONE] (and on every later call),
// llm.ErrStreamCut when the body ended without it, ErrClosed after Close, the
// context's error (wrapped) once the caller's context is done, and a
// FailTransient *llm.ProviderError for an error event, a malformed or
// oversized chunk or a broken connection. After an error every call returns
// the same error. Next must not be called concurrently with itself; Close may
// be called at any time, and unblocks a waiting Next.
func (s *stream) Next() (llm.Chunk, error) {
	if s.err != nil {
		return llm.Chunk{}, s.err
	}
	if err := s.body.Stopped(); err != nil {
		return s.fail(err)
	}
	if s.body.Events == nil {
		return s.nextJSON()
	}
	for {
		ev, err := s.nextEvent()
		if err != nil {
			return s.fail(s.body.ReadError(err))
		}
		data := bytes.TrimSpace(ev.Data)
		if bytes.Equal(data, done) {
			s.body.Events.Release()
			s.err = io.EOF
			return llm.Chunk{}, io.EOF
		}
		if len(data) == 0 {
			continue // an empty event is no chunk: a keep-alive of sorts (see Ready)
		}
		c, err := s.chunks.Parse(ev.Data)
		if err != nil {
			return s.fail(chunkFailure(err))
		}
		return c, nil
	}
}

// nextEvent is the event Ready read ahead, else the next one.
func (s *stream) nextEvent() (sse.Event, error) {
	if !s.hasAhead {
		return s.body.Events.Next()
	}
	ev, err := s.ahead, s.aheadErr
	s.ahead, s.aheadErr, s.hasAhead = sse.Event{}, nil, false
	return ev, err
}

// Ready reports whether Next can return at once without reading from the
// network (llm.ChunkStream): a whole chunk, or the end marker, is buffered.
// An empty event is no chunk (Next skips it and reads on), so Ready reads
// past the empty events buffered, which costs no wait, and keeps the first
// other event for Next.
func (s *stream) Ready() bool {
	if s.err != nil || s.body.Closed() {
		return false
	}
	if s.body.Events == nil {
		return s.jsonRead && len(s.pending) > 0
	}
	for !s.hasAhead && s.body.Events.Ready() {
		ev, err := s.body.Events.Next() // a whole event is buffered: no wait
		if err == nil && len(bytes.TrimSpace(ev.Data)) == 0 {
			continue
		}
		s.ahead, s.aheadErr, s.hasAhead = ev, err, true
	}
	return s.hasAhead
}

func (s *stream) nextJSON() (llm.Chunk, error) {
	if !s.jsonRead {
		s.jsonRead = true
		body, err := s.body.ReadAll()
		if err != nil {
			return s.fail(err)
		}
		chunks, err := completionChunks(body)
		if err != nil {
			return s.fail(err)
		}
		s.pending = chunks
	}
	if len(s.pending) == 0 {
		s.err = io.EOF
		return llm.Chunk{}, io.EOF
	}
	c := s.pending[0]
	s.pending[0] = llm.Chunk{}
	s.pending = s.pending[1:]
	return c, nil
}

func (s *stream) fail(err error) (llm.Chunk, error) {
	s.err = err
	return llm.Chunk{}, err
}

// Close closes the answer's body, which unblocks a Next waiting on it. It is
// idempotent and safe to call concurrently with Next.
func (s *stream) Close() error { return s.body.Close() }
