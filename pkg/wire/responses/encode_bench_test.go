package responses

import (
	"fmt"
	"testing"

	"github.com/buzzgate/buzzgate/internal/benchbody"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// BenchmarkEncodeRequest is the translation of a coding agent's request of
// 10 KB and of 1 MB (internal/benchbody) into a Responses request, and its dropped fields.
func BenchmarkEncodeRequest(b *testing.B) {
	for _, size := range []int{10 << 10, 1 << 20} {
		body := benchbody.Chat("m", size, `"max_tokens":1024,"stream":true`)
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
