package converse

import (
	"fmt"
	"testing"

	"github.com/buzzgate/buzzgate/internal/benchbody"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// BenchmarkFromHub is the translation of a coding agent's request of 10 KB
// and of 1 MB (internal/benchbody) into a ConverseStream call.
func BenchmarkFromHub(b *testing.B) {
	for _, size := range []int{10 << 10, 1 << 20} {
		body := benchbody.Chat("m", size, `"max_tokens":1024,"stream":true`)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := FromHub(&llm.UpstreamRequest{Model: "amazon.nova-pro-v1:0", Body: body}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
