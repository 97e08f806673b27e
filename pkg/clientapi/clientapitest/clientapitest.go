// Package clientapitest holds what the client APIs' tests share: a
// scripted provider and a real answer from it, an Emitter that records what
// a codec emits, chat chunks, and the recorded agent requests used as fuzz
// seeds.
package clientapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// DecodeJSON decodes JSON keeping numbers as their text, so a comparison
// also checks number fidelity.
func DecodeJSON(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// CheckNamesParam fails unless err is an invalid_request *llm.Error that
// names its param, or one about the body as a whole.
func CheckNamesParam(t *testing.T, err error) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) || e.Code != llm.CodeInvalidRequest {
		t.Fatalf("error %v, want an invalid_request *llm.Error", err)
	}
	if e.Param == "" && !strings.HasPrefix(e.Message, "request body ") {
		t.Fatalf("error %v names no param", err)
	}
}

// CheckInvalid fails unless err is an invalid_request *llm.Error naming
// param, whose message contains msg.
func CheckInvalid(t *testing.T, err error, param, msg string) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v, want *llm.Error", err, err)
	}
	if e.Code != llm.CodeInvalidRequest || e.Param != param || !strings.Contains(e.Message, msg) {
		t.Errorf("got code %q param %q message %q; want invalid_request param %q message containing %q", e.Code, e.Param, e.Message, param, msg)
	}
}

// AgentBodies are the bodies of the recorded agent requests whose file
// name starts with prefix (internal/systemtest/testdata/agents), as fuzz
// seeds.
func AgentBodies(f *testing.F, prefix string) [][]byte {
	f.Helper()
	root, err := filepath.Abs(".")
	if err != nil {
		f.Fatal(err)
	}
	for _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil; _, err = os.Stat(filepath.Join(root, "go.mod")) {
		if filepath.Dir(root) == root {
			f.Fatal("no go.mod above the test's directory")
		}
		root = filepath.Dir(root)
	}
	paths, err := filepath.Glob(filepath.Join(root, "internal/systemtest/testdata/agents", prefix+"*.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no recorded %s requests: %v", prefix, err)
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var rec struct {
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			f.Fatal(err)
		}
		out = append(out, rec.Body)
	}
	return out
}
