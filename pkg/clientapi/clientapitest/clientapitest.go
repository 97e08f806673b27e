// Package clientapitest holds what the client APIs' tests share: a
// scripted provider and a real answer from it, an Emitter that records what
// a codec emits, and chat chunks.
package clientapitest

import (
	"context"
	"io"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

const (
	UsageChunk = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"up-model","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}`
)

// ScriptedAnswer starts a real router.Answer for the Chat Completions
// request body (model "m") from a ScriptedProvider that sends raws then end,
// at prices 1 and 2 USD per million tokens; it returns the decoded request
// too.
func ScriptedAnswer(t *testing.T, body string, end error, raws ...string) (*router.Answer, *llm.ChatRequest) {
	t.Helper()
	cfg, err := catalog.Parse([]byte(`providers:
  - {name: p, api: openai, base_url: "http://127.0.0.1:1/v1"}
models:
  - id: m
    routes: [{provider: p, model: u, input_price: 1, output_price: 2}]
projects:
  - id: proj
    keys: [{key: sk-test}]
`))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(cfg, map[string]llm.Provider{"p": &ScriptedProvider{Raws: raws, End: end}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	chat, err := llm.DecodeChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := rt.Plan(router.TargetOf(chat), router.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ans, _, err := rt.Start(context.Background(), plan, chat)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ans.Close)
	return ans, chat
}

// ScriptedProvider answers with the given chunk payloads, then end (io.EOF
// when nil).
type ScriptedProvider struct {
	Raws []string
	End  error
}

func (p *ScriptedProvider) Name() string   { return "p" }
func (p *ScriptedProvider) Caps() llm.Caps { return llm.Caps{} }

func (p *ScriptedProvider) ChatStream(context.Context, *llm.UpstreamRequest) (llm.ChunkStream, error) {
	s := &scriptedStream{end: p.End}
	for _, raw := range p.Raws {
		ch, err := llm.ParseChunk([]byte(raw))
		if err != nil {
			return nil, err
		}
		s.chunks = append(s.chunks, ch)
	}
	return s, nil
}

type scriptedStream struct {
	llm.NoReports
	chunks []llm.Chunk
	end    error
}

func (s *scriptedStream) Next() (llm.Chunk, error) {
	if len(s.chunks) == 0 {
		if s.end == nil {
			return llm.Chunk{}, io.EOF
		}
		return llm.Chunk{}, s.end
	}
	ch := s.chunks[0]
	s.chunks = s.chunks[1:]
	return ch, nil
}

func (s *scriptedStream) Close() error { return nil }

// RecordingEmitter keeps what a codec emits; "price" marks where Price was
// called among the events (or before the body).
type RecordingEmitter struct {
	Status   int
	Head     map[string]string
	Streamed bool
	Whole    []byte
	Events   []string
	Priced   int // Price calls
	Usage    llm.Usage
}

func (e *RecordingEmitter) Start(status int, header map[string]string, stream bool) {
	e.Status, e.Head, e.Streamed = status, header, stream
}

func (e *RecordingEmitter) Body(b []byte) {
	if e.Priced != 1 {
		panic("body before Price")
	}
	e.Whole = append([]byte(nil), b...)
}

func (e *RecordingEmitter) Event(ev idempotency.Event, send bool) error {
	if ev.Usage || !send {
		panic("a Messages event is always sent and never a usage chunk")
	}
	e.Events = append(e.Events, ev.Name+" "+string(ev.Data))
	return nil
}

func (e *RecordingEmitter) Price(u llm.Usage) {
	e.Priced++
	e.Usage = u
	e.Events = append(e.Events, "PRICE")
}

func Chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"c","object":"chat.completion.chunk","created":1,"model":"up-model","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

var ToolChunks = []string{
	Chunk(`{"role":"assistant","content":"Let me look."}`, ""),
	Chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]}`, ""),
	Chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, ""),
	Chunk(`{"tool_calls":[{"index":0,"function":{"arguments":" \"Paris\"}"}}]}`, ""),
	Chunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"time","arguments":"{}"}}]}`, ""),
	Chunk(`{}`, "tool_calls"),
	UsageChunk,
}
