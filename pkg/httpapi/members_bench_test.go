package httpapi

import (
	"fmt"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// BenchmarkMembers is the first scan of a Messages or Responses body (its
// split into top-level members), as llm.Members makes it and as
// llm.RequestMembers makes it for an unkeyed request, refusing a member
// name given twice at any depth: the difference is what that check costs.
func BenchmarkMembers(b *testing.B) {
	for _, api := range []string{"messages", "responses"} {
		for _, size := range []int{10 << 10, 1 << 20} {
			body := agentBody(api, size)
			for _, split := range []struct {
				name string
				f    func([]byte) ([]llm.Member, error)
			}{{"members", llm.Members}, {"unique", llm.RequestMembers}} {
				b.Run(fmt.Sprintf("%s/%dKB/%s", api, size>>10, split.name), func(b *testing.B) {
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := split.f(body); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
