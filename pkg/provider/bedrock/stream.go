package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

// converseStream calls ConverseStream with req, a Chat Completions body,
// translated; its answer's events come back as chat.completion.chunks.
func (c *Client) converseStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	s, id, err := c.open(ctx, req, converseInput)
	if err != nil {
		return nil, err
	}
	s.dec = &chatEvents{dec: newConverseDecoder("chatcmpl-"+id, req.Model, c.now().Unix())}
	return s, nil
}

// messagesStream calls ConverseStream with req, a Messages client's body
// passed through, translated to Converse (messagesConverseInput); the answer
// comes back as Anthropic Messages events (messagesEncoder), so that the
// client gets what Converse and Messages share: cache points, thinking and
// its signatures, tool use.
func (c *Client) messagesStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	s, id, err := c.open(ctx, req, messagesConverseInput)
	if err != nil {
		return nil, err
	}
	id = "msg_bdrk_" + id
	s.dec = &messagesEvents{enc: newMessagesEncoder(id, req.Model), id: id, model: req.Model}
	return s, nil
}

// eventDecoder turns a ConverseStream answer's events into the client's
// chunks.
type eventDecoder interface {
	// decode is the chunks of one event.
	decode(ev types.ConverseStreamOutput) ([]llm.Chunk, error)
	// end is what is still owed when the events end cleanly.
	end() []llm.Chunk
}

// chatEvents decodes the events into chat.completion.chunks.
type chatEvents struct {
	dec *converseDecoder
	one [1]llm.Chunk // an event is one chunk at most, read before the next event
}

func (e *chatEvents) decode(ev types.ConverseStreamOutput) ([]llm.Chunk, error) {
	ch, ok, err := e.dec.decode(ev)
	if !ok {
		return nil, err
	}
	e.one[0] = ch
	return e.one[:], nil
}

func (e *chatEvents) end() []llm.Chunk { return nil }

// messagesEvents encodes the events as Anthropic Messages events.
type messagesEvents struct {
	enc       *messagesEncoder
	id, model string
}

func (e *messagesEvents) decode(ev types.ConverseStreamOutput) ([]llm.Chunk, error) {
	evs, err := e.enc.encode(ev)
	return e.chunks(evs), err
}

func (e *messagesEvents) end() []llm.Chunk { return e.chunks(e.enc.end()) }

// chunks are evs as the chunks of a stream passed through.
func (e *messagesEvents) chunks(evs []messagesEvent) []llm.Chunk {
	out := make([]llm.Chunk, len(evs))
	for i, ev := range evs {
		c := llm.Chunk{Proto: llm.ProtoMessages, Event: ev.Name, Raw: ev.Data, HasChoices: true,
			Output: ev.Output, Text: ev.Text, FinishReason: ev.Finish, Usage: ev.Usage, ID: e.id, Model: e.model}
		if ev.Finish != "" {
			c.Seen, c.Finished = 1, 1
		}
		out[i] = c
	}
	return out
}

// open translates req's body to Converse with translate and makes the
// ConverseStream call: its events, to be decoded, and the AWS request id.
func (c *Client) open(ctx context.Context, req *llm.UpstreamRequest,
	translate func(modelID string, body []byte) (*bedrockruntime.ConverseStreamInput, []string, error)) (*eventChunks, string, error) {
	in, dropped, err := translate(req.Model, req.Bytes())
	if err != nil {
		return nil, "", err
	}
	es, id, err := c.converse(ctx, in)
	if err != nil {
		return nil, "", err
	}
	return &eventChunks{ctx: ctx, es: es, dropped: dropped}, id, nil
}

// converse makes the ConverseStream call: its event stream and AWS request
// id, or the context's error when it ended, or the failure classified.
func (c *Client) converse(ctx context.Context, in *bedrockruntime.ConverseStreamInput) (*bedrockruntime.ConverseStreamEventStream, string, error) {
	if ctx.Err() != nil {
		return nil, "", upstream.ContextError("bedrock", ctx)
	}
	out, err := c.runtime.ConverseStream(ctx, in, ownStream)
	if err != nil {
		return nil, "", classify(ctx, err)
	}
	id, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	return out.GetStream(), id, nil
}

// eventChunks is a ConverseStream answer read as the client's chunks, which
// dec makes from its events (Chat Completions chunks, or Messages events).
type eventChunks struct {
	llm.NoReports // never Ready: events come over a channel
	ctx           context.Context
	es            *bedrockruntime.ConverseStreamEventStream
	dec           eventDecoder
	dropped       []string

	pending  []llm.Chunk
	usage    json.RawMessage
	finished bool // the answer's end was read
	closed   bool // the event channel closed
}

// Next returns the next chunk: io.EOF after the answer's end, ErrStreamCut
// when the events stopped before it, a *llm.ProviderError for an exception
// in the stream or a broken connection.
func (s *eventChunks) Next() (llm.Chunk, error) {
	for len(s.pending) == 0 {
		if s.closed {
			if s.finished {
				return llm.Chunk{}, io.EOF
			}
			return llm.Chunk{}, llm.ErrStreamCut
		}
		select {
		case ev, ok := <-s.es.Events():
			if !ok {
				s.closed = true
				if err := s.es.Err(); err != nil {
					return llm.Chunk{}, s.failure(err)
				}
				s.take(s.dec.end())
				continue
			}
			chunks, err := s.dec.decode(ev)
			if err != nil {
				return llm.Chunk{}, err
			}
			s.take(chunks)
		case <-s.ctx.Done():
			return llm.Chunk{}, upstream.ContextError("bedrock", s.ctx)
		}
	}
	ch := s.pending[0]
	s.pending = s.pending[1:]
	if ch.Usage != nil {
		s.usage = ch.Usage
	}
	return ch, nil
}

// take makes chunks the pending ones. The answer ends at its finish, or
// at a usage-only chunk (after the finish).
func (s *eventChunks) take(chunks []llm.Chunk) {
	for i := range chunks {
		ch := &chunks[i]
		s.finished = s.finished || ch.FinishReason != "" || (ch.Usage != nil && !ch.HasChoices)
	}
	s.pending = chunks
}

// failure is the error of a stream that ended with err.
func (s *eventChunks) failure(err error) error {
	if s.ctx.Err() != nil {
		return upstream.ContextError("bedrock", s.ctx)
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return classify(s.ctx, err)
	}
	return &llm.ProviderError{Class: llm.FailTransient, Message: "the stream broke", Err: err}
}

// Report is the request's fields the translation left out, and the usage
// the answer reported so far (Chat Completions shape), or nil.
func (s *eventChunks) Report() llm.StreamReport {
	return llm.StreamReport{Dropped: s.dropped, Usage: s.usage}
}

// Close ends the call.
func (s *eventChunks) Close() error { return s.es.Close() }
