package responses

import (
	"fmt"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// agentTurn is a coding agent's Chat Completions turn of about size bytes:
// many turns of long text with escapes, non-ASCII and tool calls.
func agentTurn(size int) []byte {
	text := strings.Repeat(`Résumé of \"main.go\":\n\tfunc main() {}\n`, 20)
	var turns []string
	for n, i := 0, 0; n < size; i++ {
		t := fmt.Sprintf(`{"role":"user","content":"%s"}`, text)
		if i%2 == 1 {
			t = fmt.Sprintf(`{"role":"assistant","content":"%s","tool_calls":[{"id":"c%d","type":"function","function":{"name":"read","arguments":"{\"path\":\"main.go\"}"}}]},{"role":"tool","tool_call_id":"c%d","content":"%s"}`, text, i, i, text)
		}
		turns = append(turns, t)
		n += len(t) + 1
	}
	return []byte(`{"model":"m","max_tokens":1024,"stream":true,"messages":[{"role":"system","content":"be brief"},` + strings.Join(turns, ",") +
		`],"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object"}}}]}`)
}

// BenchmarkEncodeRequest is the translation of a coding agent's turn of
// 10 KB and of 1 MB into a Responses request, and its dropped fields.
func BenchmarkEncodeRequest(b *testing.B) {
	for _, size := range []int{10 << 10, 1 << 20} {
		body := agentTurn(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req := &llm.UpstreamRequest{Model: "gpt-5", Body: body}
				if _, err := EncodeRequest(req); err != nil {
					b.Fatal(err)
				}
				Dropped(req)
			}
		})
	}
}
