package bedrock

import (
	"context"
	"encoding/json"
	"io"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

// messagesStream calls ConverseStream with req, a Messages client's body
// passed through, translated to Converse (messagesConverseInput); the answer
// comes back as Anthropic Messages events (messagesEncoder), so that the
// client gets what Converse and Messages share: cache points, thinking and
// its signatures, tool use.
func (c *Client) messagesStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	if ctx.Err() != nil {
		return nil, upstream.ContextError("bedrock", ctx)
	}
	in, dropped, err := messagesConverseInput(req.Model, req.Bytes())
	if err != nil {
		return nil, err
	}
	out, err := c.runtime.ConverseStream(ctx, in)
	if err != nil {
		return nil, classify(ctx, err)
	}
	id, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	return &messagesChunks{ctx: ctx, es: out.GetStream(), enc: newMessagesEncoder("msg_bdrk_"+id, req.Model), id: "msg_bdrk_" + id, model: req.Model, dropped: dropped}, nil
}

// messagesChunks is a ConverseStream answer read as Messages events.
type messagesChunks struct {
	ctx       context.Context
	es        *bedrockruntime.ConverseStreamEventStream
	enc       *messagesEncoder
	id, model string
	pending   []messagesEvent
	dropped   []string
	usage     json.RawMessage
	finished  bool // message_delta with a stop reason sent
	ended     bool // the event channel closed
}

// Next returns the next event: io.EOF after message_stop, ErrStreamCut when
// the stream ended before its messageStop, a *llm.ProviderError for an
// exception in the stream or a broken connection.
func (s *messagesChunks) Next() (llm.Chunk, error) {
	for len(s.pending) == 0 {
		if s.ended {
			if s.finished {
				return llm.Chunk{}, io.EOF
			}
			return llm.Chunk{}, llm.ErrStreamCut
		}
		select {
		case ev, ok := <-s.es.Events():
			if !ok {
				s.ended = true
				if err := s.es.Err(); err != nil {
					if s.ctx.Err() != nil {
						return llm.Chunk{}, upstream.ContextError("bedrock", s.ctx)
					}
					return llm.Chunk{}, classify(s.ctx, err)
				}
				s.pending = s.enc.end()
				continue
			}
			evs, err := s.enc.encode(ev)
			if err != nil {
				return llm.Chunk{}, err
			}
			s.pending = evs
		case <-s.ctx.Done():
			return llm.Chunk{}, upstream.ContextError("bedrock", s.ctx)
		}
	}
	ev := s.pending[0]
	s.pending = s.pending[1:]
	c := llm.Chunk{Proto: llm.ProtoMessages, Event: ev.Name, Raw: ev.Data, HasChoices: true,
		Output: ev.Output, Text: ev.Text, FinishReason: ev.Finish, Usage: ev.Usage}
	if ev.Usage != nil {
		s.usage = ev.Usage
	}
	if ev.Finish != "" {
		c.Seen, c.Finished = 1, 1
		s.finished = true
	}
	c.ID, c.Model = s.id, s.model
	return c, nil
}

// UsageSoFar is the usage the stream reported so far (Chat-shaped), or nil.
func (s *messagesChunks) UsageSoFar() json.RawMessage { return s.usage }

// Dropped names the request's fields the translation left out.
func (s *messagesChunks) Dropped() []string { return s.dropped }

// Close ends the call.
func (s *messagesChunks) Close() error { return s.es.Close() }
