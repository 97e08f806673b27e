package messages

import (
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// bigAnswer is a Messages stream whose one block (text, or a tool_use's
// input) is 480 KB in 60,000 deltas.
func bigAnswer(tool bool) [][]byte {
	const deltas, size = 60_000, 8
	ev := []string{`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`}
	if tool {
		ev = append(ev, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"write","input":{}}}`)
		input := `{"data":"` + strings.Repeat("x", deltas*size-len(`{"data":""}`)) + `"}`
		for i := 0; i < len(input); i += size {
			ev = append(ev, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"`+strings.ReplaceAll(input[i:min(i+size, len(input))], `"`, `\"`)+`"}}`)
		}
	} else {
		ev = append(ev, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for range deltas {
			ev = append(ev, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcdefg "}}`)
		}
	}
	ev = append(ev, `{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":60000}}`,
		`{"type":"message_stop"}`)
	out := make([][]byte, len(ev))
	for i, e := range ev {
		out[i] = []byte(e)
	}
	return out
}

// BenchmarkAssembler: a 480 KB answer of 60,000 deltas assembled into one
// Message, its deltas taken from their members as split (Add, "split"), or
// every event decoded in full ("decoded"), which is what the split path
// spares.
func BenchmarkAssembler(b *testing.B) {
	for _, kind := range []string{"text", "tool"} {
		events := bigAnswer(kind == "tool")
		for _, path := range []string{"split", "decoded"} {
			b.Run(kind+"/"+path, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var m Assembler
					for _, ev := range events {
						if path == "split" {
							m.Add(ev)
						} else {
							m.addEvent(ev)
						}
					}
					if len(m.Message(llm.Usage{})) < 480_000 {
						b.Fatal("short message")
					}
				}
			})
		}
	}
}
