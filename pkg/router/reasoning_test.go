package router

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// scriptStream returns its chunks in order, each after its delay, then end.
type scriptStream struct {
	llm.NoReports
	ctx    context.Context
	chunks []string
	delays []time.Duration
	end    error
	i      int
}

func (s *scriptStream) Next() (llm.Chunk, error) {
	if s.i >= len(s.chunks) {
		return llm.Chunk{}, s.end
	}
	if d := s.delays[s.i]; d > 0 {
		select {
		case <-time.After(d):
		case <-s.ctx.Done():
			return llm.Chunk{}, s.ctx.Err()
		}
	}
	s.i++
	return llm.ParseChunk([]byte(s.chunks[s.i-1]))
}

func (s *scriptStream) Close() error { return nil }

type scriptProvider struct {
	name   string
	chunks []string
	delays []time.Duration
	end    error
}

func (p *scriptProvider) Name() string   { return p.name }
func (p *scriptProvider) Caps() llm.Caps { return llm.Caps{} }
func (p *scriptProvider) ChatStream(ctx context.Context, _ *llm.UpstreamRequest) (llm.ChunkStream, error) {
	d := p.delays
	if d == nil {
		d = make([]time.Duration, len(p.chunks))
	}
	return &scriptStream{ctx: ctx, chunks: p.chunks, delays: d, end: p.end}, nil
}

// TestReasoningChunksAreOutput: a reasoning model on vLLM, DeepSeek,
// Together, Groq or OpenRouter streams delta.reasoning_content or
// delta.reasoning before any content. Those chunks are output: the provider
// is answering, so its first-token timeout (200 ms for a) does not fire
// and hand the request to b, as it did (a streamed its thinking for 500 ms).
func TestReasoningChunksAreOutput(t *testing.T) {
	w := newWorld(t, nil)
	var chunks []string
	var delays []time.Duration
	for i := 0; i < 10; i++ {
		chunks = append(chunks, `{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"thinking "},"finish_reason":null}]}`)
		delays = append(delays, 50*time.Millisecond)
	}
	chunks = append(chunks,
		`{"id":"x","choices":[{"index":0,"delta":{"content":"42"},"finish_reason":null}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	delays = append(delays, 0, 0)
	a := &scriptProvider{name: "a", chunks: chunks, delays: delays, end: io.EOF}
	r, err := New(w.cfg, map[string]llm.Provider{"a": a, "b": w.fakes["b"], "c": w.fakes["c"], "d": w.fakes["d"]}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ans, err := run(r, decode(t, plain), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer ans.Close()
	if ans.Provider != "a" {
		t.Errorf("answered by %q at depth %d, want a: it was streaming its reasoning for 500ms, and the 200ms first-token timeout dropped it", ans.Provider, ans.Depth)
	}
}

// TestSeveralChoicesCutAfterFirstFinishIsIncomplete: with n=2 an upstream
// streams both choices interleaved; choice 0 finishes first. When the stream
// is then cut, choice 1 never finished: the answer is incomplete, not whole
// (before, the first choice's finish marked the whole answer finished and
// the cut ended it as [DONE]).
func TestSeveralChoicesCutAfterFirstFinishIsIncomplete(t *testing.T) {
	w := newWorld(t, nil)
	a := &scriptProvider{name: "a", end: llm.ErrStreamCut, chunks: []string{
		`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
		`{"id":"x","choices":[{"index":1,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"x","choices":[{"index":1,"delta":{"content":" there, I was about to"},"finish_reason":null}]}`,
	}}
	r, err := New(w.cfg, map[string]llm.Provider{"a": a, "b": w.fakes["b"], "c": w.fakes["c"], "d": w.fakes["d"]}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ans, err := run(r, decode(t, `{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer ans.Close()
	var end error
	for {
		if _, err := ans.Next(); err != nil {
			end = err
			break
		}
	}
	if end != ErrIncomplete {
		t.Errorf("end = %v, want ErrIncomplete: choice 1 never got its finish_reason", end)
	}
}
