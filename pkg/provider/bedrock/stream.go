package bedrock

import (
	"context"
	"errors"
	"io"
	"net/http"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/smithy-go"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

// converseStream calls ConverseStream with req, a Chat Completions body,
// translated; its answer's events come back as chat.completion.chunks.
func (c *Client) converseStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	if ctx.Err() != nil {
		return nil, upstream.ContextError("bedrock", ctx)
	}
	in, dropped, err := converseInput(req.Model, req.Bytes())
	if err != nil {
		return nil, err
	}
	out, err := c.runtime.ConverseStream(ctx, in)
	if err != nil {
		return nil, classify(ctx, err)
	}
	id, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	es := out.GetStream()
	return &converseChunks{
		ctx: ctx, es: es, dropped: dropped,
		dec: newConverseDecoder("chatcmpl-"+id, req.Model, c.now().Unix()),
	}, nil
}

// classify is the error of a failed call: the context's when it ended, else
// a *llm.ProviderError classified as an HTTP upstream's status would be
// (Status): 429 throttled, 400 rejected with Bedrock's message, 403 and 404
// a configuration failure, the rest transient; no answer at all is a
// connection failure.
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return upstream.ContextError("bedrock", ctx)
	}
	code, _, msg := Status(err)
	switch code {
	case 0:
		return &llm.ProviderError{Class: llm.FailTransient, Message: "connection failed", Err: err}
	case http.StatusTooManyRequests:
		return &llm.ProviderError{Class: llm.FailThrottled, Status: code, Message: msg, Err: err}
	case http.StatusBadRequest:
		if msg == "" {
			msg = "no reason given"
		}
		return &llm.ProviderError{Class: llm.FailRejected, Status: code, Message: msg, Err: err}
	case http.StatusForbidden, http.StatusNotFound:
		return &llm.ProviderError{Class: llm.FailConfig, Status: code, Message: msg, Err: err}
	}
	return &llm.ProviderError{Class: llm.FailTransient, Status: code, Message: msg, Err: err}
}

// converseChunks is a ConverseStream answer read as Chat Completions chunks.
type converseChunks struct {
	ctx     context.Context
	es      *bedrockruntime.ConverseStreamEventStream
	dec     *converseDecoder
	parser  llm.ChunkParser
	pending [][]byte
	dropped []string
	ended   bool // messageStop or metadata seen
}

// Next returns the next chunk: io.EOF after the stream's end, ErrStreamCut
// when it ended before its messageStop, a *llm.ProviderError for an
// exception in the stream or a broken connection.
func (s *converseChunks) Next() (llm.Chunk, error) {
	for len(s.pending) == 0 {
		select {
		case ev, ok := <-s.es.Events():
			if !ok {
				return llm.Chunk{}, s.end()
			}
			raws, err := s.dec.decode(ev)
			if err != nil {
				return llm.Chunk{}, err
			}
			s.pending = raws
		case <-s.ctx.Done():
			return llm.Chunk{}, upstream.ContextError("bedrock", s.ctx)
		}
	}
	raw := s.pending[0]
	s.pending = s.pending[1:]
	ch, err := s.parser.Parse(raw)
	if err != nil {
		return llm.Chunk{}, &llm.ProviderError{Class: llm.FailTransient, Message: "malformed Converse event", Err: err}
	}
	if ch.FinishReason != "" || (ch.Usage != nil && !ch.HasChoices) {
		s.ended = true
	}
	return ch, nil
}

// end is the error for a closed event channel.
func (s *converseChunks) end() error {
	err := s.es.Err()
	switch {
	case err == nil && s.ended:
		return io.EOF
	case err == nil:
		return llm.ErrStreamCut
	case s.ctx.Err() != nil:
		return upstream.ContextError("bedrock", s.ctx)
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return classify(s.ctx, err)
	}
	return &llm.ProviderError{Class: llm.FailTransient, Message: "the stream broke", Err: err}
}

// Dropped names the request's fields the translation left out.
func (s *converseChunks) Dropped() []string { return s.dropped }

// Close ends the call.
func (s *converseChunks) Close() error { return s.es.Close() }
