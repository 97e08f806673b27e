package responses

import (
	"fmt"
	"strings"
	"testing"
)

// codexTurn is a coding agent's Responses request of about size bytes:
// instructions, tools, and many items of long text with escapes,
// non-ASCII, function calls and their outputs.
func codexTurn(size int) []byte {
	text := strings.Repeat(`Résumé of \"main.go\":\n\tfunc main() {}\n`, 20)
	var items []string
	for n, i := 0, 0; n < size; i++ {
		it := fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":"%s"}]}`, text)
		if i%2 == 1 {
			it = fmt.Sprintf(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"%s","annotations":[]}]},`+
				`{"type":"function_call","call_id":"c%d","name":"read","arguments":"{\"path\":\"main.go\"}"},`+
				`{"type":"function_call_output","call_id":"c%d","output":"%s"}`, text, i, i, text)
		}
		items = append(items, it)
		n += len(it) + 1
	}
	return []byte(`{"model":"m","instructions":"be brief","stream":true,"store":false,"reasoning":{"effort":"medium","summary":"auto"},` +
		`"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","tool_choice":"auto","parallel_tool_calls":false,` +
		`"tools":[{"type":"function","name":"read","description":"Reads a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}},"strict":false}],` +
		`"input":[` + strings.Join(items, ",") + `]}`)
}

// BenchmarkToHub is the translation of a coding agent's request of 10 KB
// and of 1 MB into the hub's Chat Completions body.
func BenchmarkToHub(b *testing.B) {
	for _, size := range []int{10 << 10, 1 << 20} {
		body := codexTurn(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ToHub(body, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
