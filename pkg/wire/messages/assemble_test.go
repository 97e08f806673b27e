package messages

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

func assemble(events ...string) []byte {
	var m Assembler
	for _, e := range events {
		m.Add([]byte(e))
	}
	return m.Message(llm.Usage{Cost: 0.5})
}

func TestAssembler(t *testing.T) {
	got := assemble(
		`{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1},"container":null}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a\"b"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"","citations":[{"n":0}]}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hé"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"n":1}}}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t","name":"Bash","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"c\":"}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1}"}}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"future_block","data":"x","n":1}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"future_delta","data":"y","n":2}}`,
		`{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"output_tokens":9}}`,
		`{"type":"message_stop"}`,
	)
	want := `{"id":"m1","type":"message","role":"assistant","model":"c","content":[` +
		`{"type":"thinking","thinking":"a\"b","signature":"sig"},` +
		`{"type":"text","text":"hé","citations":[{"n":0},{"n":1}]},` +
		`{"type":"tool_use","id":"t","name":"Bash","input":{"c":1}},` +
		`{"type":"future_block","data":"xy","n":2}],` +
		`"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":5,"output_tokens":9,"cost":0.5},"container":null}`
	if string(got) != want {
		t.Errorf("message:\n%s\nwant\n%s", got, want)
	}
}

// FuzzAssembler: whatever events arrive, the message is valid JSON
// and assembling never panics.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte(`{"type":"message_start","message":{"id":"m","content":[]}}` + "\n" + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n" + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`))
	f.Add([]byte(`{"type":"content_block_start","index":70000,"content_block":{}}` + "\n" + `{"type":"message_delta","delta":{"stop_reason":1},"usage":7}`))
	f.Add([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`))
	f.Fuzz(func(t *testing.T, stream []byte) {
		var m Assembler
		for _, line := range bytes.Split(stream, []byte("\n")) {
			m.Add(line)
		}
		if out := m.Message(llm.Usage{}); !json.Valid(out) {
			t.Fatalf("invalid message %q from %q", out, stream)
		}
	})
}

// FuzzAssemblerDeltas: a content_block_delta taken from its members
// as split assembles to what the same event decoded in full does, whatever
// its keys (twice, in other case, escaped) and index.
func FuzzAssemblerDeltas(f *testing.F) {
	start := `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"a"}}` + "\n" +
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}` + "\n"
	for _, d := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b\u00e9\"c"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}`,
		`{"type":"content_block_delta","index":0,"Index":1,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"index":1,"delta":{"type":"text_delta","text":"x"}}`,
		`{"TYPE":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"delta":{"type":"text_delta","text":"y"}}`,
		`{"type":"\u0063ontent_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":1.0,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":null,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x","type":"future","text":"\ud83d\ude80"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","te\u0078t":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + "\xff" + `"}}`,
		`{"type":"content_block_delta","index":0,"delta":null}`,
		`{"type":"content_block_delta","index":0}`,
	} {
		f.Add([]byte(start + d + "\n" + d))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		var fast, full Assembler
		for _, line := range bytes.Split(stream, []byte("\n")) {
			fast.Add(line)
			full.addEvent(line)
		}
		if a, b := fast.Message(llm.Usage{}), full.Message(llm.Usage{}); !bytes.Equal(a, b) {
			t.Fatalf("from %q:\n%s\ndecoded in full:\n%s", stream, a, b)
		}
	})
}
