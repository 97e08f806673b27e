package openairesponses

import (
	"bytes"
	"io"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/sse"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// converter turns a stream's events into its chunks: passed through, one
// chunk an event; translated, as many chat.completion.chunk values as the
// event makes (often none).
type converter interface {
	// add appends the chunks of one event (its SSE name and data) to out.
	add(out []llm.Chunk, name string, data []byte) ([]llm.Chunk, error)
	// done reports whether the terminal event was read.
	done() bool
	// report is the request's fields left out and the usage reported so
	// far (llm.StreamReport).
	report() llm.StreamReport
}

// passThrough hands every event on as it is, observed.
type passThrough struct{ obs responses.Observer }

func (p *passThrough) add(out []llm.Chunk, name string, data []byte) ([]llm.Chunk, error) {
	c, err := p.obs.Observe(name, data)
	if err != nil {
		return out, err
	}
	return append(out, c), nil
}
func (p *passThrough) done() bool { return p.obs.Done() }
func (p *passThrough) report() llm.StreamReport {
	return llm.StreamReport{Usage: p.obs.UsageSoFar()}
}

// translation decodes the events into chat.completion.chunk values.
type translation struct {
	dec *responses.Decoder
	// dropped are the request's fields the translation left out.
	dropped []string
}

func (t *translation) add(out []llm.Chunk, name string, data []byte) ([]llm.Chunk, error) {
	chunks, err := t.dec.Decode(name, data)
	return append(out, chunks...), err
}
func (t *translation) done() bool { return t.dec.Done() }

func (t *translation) report() llm.StreamReport {
	return llm.StreamReport{Dropped: t.dropped, Usage: t.dec.UsageSoFar()}
}

// stream is an upstream's 200 answer: an event stream, or, when body.Events
// is nil, a Response JSON body (an upstream that ignored "stream": true) read
// whole on the first Next.
type stream struct {
	body upstream.Body
	conv converter

	// pending holds the chunks made and not yet returned, from next on
	// (its array is reused from event to event).
	pending []llm.Chunk
	next    int
	// then is a failure met after the pending chunks (while Ready read
	// ahead, or in a JSON answer), returned once they are.
	then error

	jsonRead bool
	err      error // sticky: io.EOF after the terminal event, or the first failure

}

var done = []byte("[DONE]")

// Next returns the next chunk: io.EOF once the terminal event
// (response.completed, response.incomplete) was returned, and on every later
// call; llm.ErrStreamCut when the body ended before one; ErrClosed after
// Close; the context's error (wrapped) once the caller's context is done;
// and a FailTransient *llm.ProviderError for an error event, a failed
// response, a malformed or oversized event or a broken connection. After an
// error every call returns the same error. Next must not be called
// concurrently with itself; Close may be called at any time, and unblocks a
// waiting Next.
func (s *stream) Next() (llm.Chunk, error) {
	for {
		if s.err != nil {
			return llm.Chunk{}, s.err
		}
		if err := s.body.Stopped(); err != nil {
			return s.fail(err)
		}
		if s.next < len(s.pending) {
			c := s.pending[s.next]
			s.pending[s.next] = llm.Chunk{}
			if s.next++; s.next == len(s.pending) {
				s.pending, s.next = s.pending[:0], 0
			}
			return c, nil
		}
		if s.then != nil {
			return s.fail(s.then)
		}
		if s.conv.done() {
			if s.body.Events != nil {
				s.body.Events.Release()
			}
			s.err = io.EOF
			return llm.Chunk{}, io.EOF
		}
		if err := s.read(); err != nil {
			return s.fail(err)
		}
	}
}

// read adds the chunks of the next event, or of the whole JSON answer, to
// pending.
func (s *stream) read() error {
	if s.body.Events == nil {
		if s.jsonRead {
			// A Response that did not end (no terminal status): as cut as
			// a stream without its terminal event.
			return llm.ErrStreamCut
		}
		s.jsonRead = true
		return s.readJSON()
	}
	ev, err := s.body.Events.Next()
	if err != nil {
		return s.body.ReadError(err)
	}
	return s.add(ev)
}

// add converts one event into pending. An empty event is no chunk (a
// keep-alive of sorts); "[DONE]", which the Responses API does not send but
// compatible servers may, ends the stream.
func (s *stream) add(ev sse.Event) error {
	data := bytes.TrimSpace(ev.Data)
	switch {
	case len(data) == 0:
		return nil
	case bytes.Equal(data, done):
		return llm.ErrStreamCut // the terminal event, had it come, would have ended the stream first
	}
	var err error
	s.pending, err = s.conv.add(s.pending, ev.Event, ev.Data)
	return err
}

// readJSON reads a whole Response and converts the events it would have
// streamed; a failure among them comes after the chunks before it.
func (s *stream) readJSON() error {
	body, err := s.body.ReadAll()
	if err != nil {
		return err
	}
	events, err := responses.ResponseEvents(body)
	if err != nil {
		return err
	}
	for _, ev := range events {
		if s.pending, err = s.conv.add(s.pending, ev.Name, ev.Data); err != nil {
			s.then = err
			return nil
		}
		if s.conv.done() {
			break
		}
	}
	return nil
}

// Ready reports whether Next can return at once without reading from the
// network (llm.ChunkStream): a chunk, a failure or the end is at hand. An
// event that makes no chunk (an empty one; most events, translated) is no
// reason to be ready, so Ready converts the events already buffered, which
// costs no wait, until one makes a chunk.
func (s *stream) Ready() bool {
	if s.err != nil || s.body.Closed() {
		return false
	}
	if s.next < len(s.pending) || s.then != nil || s.conv.done() {
		return true
	}
	if s.body.Events == nil {
		return false // the JSON body is read by Next
	}
	for s.body.Events.Ready() {
		ev, err := s.body.Events.Next() // a whole event is buffered: no wait
		if err == nil {
			err = s.add(ev)
		} else {
			err = s.body.ReadError(err)
		}
		if err != nil {
			s.then = err
			return true
		}
		if s.next < len(s.pending) || s.conv.done() {
			return true
		}
	}
	return false
}

// Report is the request's fields the translation left out (none passed
// through), and the usage of a terminal or failed Response read so far,
// in the Chat Completions shape: the Responses API reports none before.
func (s *stream) Report() llm.StreamReport { return s.conv.report() }

func (s *stream) fail(err error) (llm.Chunk, error) {
	s.err = err
	s.pending, s.next, s.then = nil, 0, nil
	return llm.Chunk{}, err
}

// Close closes the answer's body, which unblocks a Next waiting on it. It is
// idempotent and safe to call concurrently with Next.
func (s *stream) Close() error { return s.body.Close() }
