package messages

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/clientapi/clientapitest"
	"github.com/buzzgate/buzzgate/pkg/llm"

	"github.com/buzzgate/buzzgate/pkg/router"
	messageswire "github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// nativeProvider answers a Messages request passed through with the given
// chunks, as the anthropic provider's Observer made them.
type nativeProvider struct{ chunks []llm.Chunk }

func (p *nativeProvider) Name() string   { return "p" }
func (p *nativeProvider) Caps() llm.Caps { return llm.Caps{Native: llm.ProtoMessages} }
func (p *nativeProvider) ChatStream(context.Context, *llm.UpstreamRequest) (llm.ChunkStream, error) {
	return &chunkStream{chunks: p.chunks}, nil
}

type chunkStream struct {
	llm.NoReports
	chunks []llm.Chunk
}

func (s *chunkStream) Next() (llm.Chunk, error) {
	if len(s.chunks) == 0 {
		return llm.Chunk{}, io.EOF
	}
	ch := s.chunks[0]
	s.chunks = s.chunks[1:]
	return ch, nil
}

func (s *chunkStream) Close() error { return nil }

// bigAnswerEvents is a Messages stream whose one block (text, or a
// tool_use's input) is 480 KB in 60,000 deltas.
func bigAnswerEvents(tool bool) [][2]string {
	const deltas, size = 60_000, 8
	ev := [][2]string{{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`}}
	var pieces []string
	if tool {
		ev = append(ev, [2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"write","input":{}}}`})
		input := `{"data":"` + strings.Repeat("x", deltas*size-len(`{"data":""}`)) + `"}`
		for i := 0; i < len(input); i += size {
			pieces = append(pieces, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"`+strings.ReplaceAll(input[i:min(i+size, len(input))], `"`, `\"`)+`"}}`)
		}
	} else {
		ev = append(ev, [2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`})
		for range deltas {
			pieces = append(pieces, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcdefg "}}`)
		}
	}
	for _, p := range pieces {
		ev = append(ev, [2]string{"content_block_delta", p})
	}
	return append(ev,
		[2]string{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		[2]string{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":60000}}`},
		[2]string{"message_stop", `{"type":"message_stop"}`})
}

// BenchmarkPassThroughBigAnswer: a Messages answer passed through, 480 KB
// of text or of a tool call's input in 60,000 deltas, streamed to the
// client event by event and assembled into one Message.
func BenchmarkPassThroughBigAnswer(b *testing.B) {
	for _, kind := range []string{"text", "tool"} {
		var o messageswire.Observer
		var chunks []llm.Chunk
		for _, ev := range bigAnswerEvents(kind == "tool") {
			ch, err := o.Observe(ev[0], []byte(ev[1]))
			if err != nil {
				b.Fatal(err)
			}
			chunks = append(chunks, ch)
		}
		cfg, err := catalog.Parse([]byte(`providers:
  - {name: p, api: anthropic, base_url: "http://127.0.0.1:1"}
models:
  - id: m
    routes: [{provider: p, model: u, input_price: 1, output_price: 2}]
projects:
  - id: proj
    keys: [{key: sk-test}]
`))
		if err != nil {
			b.Fatal(err)
		}
		rt, err := router.New(cfg, map[string]llm.Provider{"p": &nativeProvider{chunks: chunks}}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, stream := range []bool{true, false} {
			name := kind + "/whole"
			if stream {
				name = kind + "/stream"
			}
			b.Run(name, func(b *testing.B) {
				body := `{"model":"m","max_tokens":100000,"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,"messages":[{"role":"user","content":"x"}]}`
				for b.Loop() {
					req, err := decodeForBench([]byte(body))
					if err != nil {
						b.Fatal(err)
					}
					plan, err := rt.Plan(router.TargetOf(req), router.Policy{})
					if err != nil {
						b.Fatal(err)
					}
					ans, _, err := rt.Start(context.Background(), plan, req)
					if err != nil {
						b.Fatal(err)
					}
					var out clientapitest.RecordingEmitter
					c := &messagesCodec{requestID: "req_0123abcd", req: req}
					if res := c.Answer(ans, &out); res.Err != nil || ans.Proto != llm.ProtoMessages {
						b.Fatalf("%+v, proto %v", res, ans.Proto)
					}
					if !stream && len(out.Whole) < 480_000 || stream && len(out.Events) < 60_000 {
						b.Fatalf("%d bytes, %d events", len(out.Whole), len(out.Events))
					}
					ans.Close()
				}
			})
		}
	}
}

// decodeForBench is a Messages request as the gateway hands it to the
// router: translated, with the client's own body kept for a route that
// speaks Messages.
func decodeForBench(body []byte) (*llm.ChatRequest, error) {
	hub, _, err := messageswire.ToHub(body)
	if err != nil {
		return nil, err
	}
	req, err := llm.DecodeChatRequest(hub.Bytes())
	if err != nil {
		return nil, err
	}
	members, err := llm.Members(body)
	if err != nil {
		return nil, err
	}
	req.Native = llm.NewNative(llm.ProtoMessages, members, len(body), nil)
	return req, nil
}
