package bedrock

import (
	"context"
	"errors"
	"io"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/wire/converse"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// converseStream calls ConverseStream with req, a Chat Completions body,
// translated (converse.FromHub); its answer's events come back as
// chat.completion.chunks (converse.Decoder).
func (c *Client) converseStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	s, id, err := c.open(ctx, req, converse.FromHub)
	if err != nil {
		return nil, err
	}
	s.dec = &chatEvents{dec: converse.NewDecoder("chatcmpl-"+id, req.Model, c.now().Unix())}
	return s, nil
}

// messagesStream calls ConverseStream with req, a Messages client's body
// passed through, translated to Converse (messages.ToConverse); the answer
// comes back as Anthropic Messages events (messages.ConverseEncoder), so
// that the client gets what Converse and Messages share: cache points,
// thinking and its signatures, tool use.
func (c *Client) messagesStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	s, id, err := c.open(ctx, req, func(req *llm.UpstreamRequest) (*bedrockruntime.ConverseStreamInput, []string, error) {
		return messages.ToConverse(req.Model, req.Bytes())
	})
	if err != nil {
		return nil, err
	}
	s.dec = messages.NewConverseEncoder("msg_bdrk_"+id, req.Model)
	return s, nil
}

// eventDecoder turns a ConverseStream answer's events into the client's
// chunks.
type eventDecoder interface {
	// Encode is the chunks of one event.
	Encode(ev types.ConverseStreamOutput) ([]llm.Chunk, error)
	// End is what is still owed when the events end cleanly.
	End() []llm.Chunk
}

// chatEvents decodes the events into chat.completion.chunks.
type chatEvents struct {
	dec *converse.Decoder
	one [1]llm.Chunk // an event is one chunk at most, read before the next event
}

func (e *chatEvents) Encode(ev types.ConverseStreamOutput) ([]llm.Chunk, error) {
	ch, ok, err := e.dec.Decode(ev)
	if !ok {
		return nil, err
	}
	e.one[0] = ch
	return e.one[:], nil
}

func (e *chatEvents) End() []llm.Chunk { return nil }

// open translates req's body to Converse with translate and makes the
// ConverseStream call: its events, to be decoded, and the AWS request id.
func (c *Client) open(ctx context.Context, req *llm.UpstreamRequest,
	translate func(*llm.UpstreamRequest) (*bedrockruntime.ConverseStreamInput, []string, error)) (*eventChunks, string, error) {
	in, dropped, err := translate(req)
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
	usage    *llm.Usage
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
				s.take(s.dec.End())
				continue
			}
			chunks, err := s.dec.Encode(ev)
			if err != nil {
				return llm.Chunk{}, eventFailure(err)
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
		s.finished = s.finished || ch.Finished != 0 || (ch.Usage != nil && !ch.HasChoices)
	}
	s.pending = chunks
}

// eventFailure is err, the error of decoding an event, with an exception
// in the stream classified (exceptionFailure).
func eventFailure(err error) error {
	var ex *converse.Exception
	if errors.As(err, &ex) {
		return exceptionFailure(ex.Name, ex.Message)
	}
	return err
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
