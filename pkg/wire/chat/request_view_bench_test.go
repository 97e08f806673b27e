package chat

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/buzzgate/buzzgate/internal/benchbody"
	"github.com/buzzgate/buzzgate/internal/jsonobj"
)

// libraryRequest is the typed half of RequestView as encoding/json reads
// it with struct tags: what a library decoding gives before the members
// as written, which the exact-name translations also need.
type libraryRequest struct {
	Model     string          `json:"model"`
	Messages  []libraryMsg    `json:"messages"`
	MaxTokens *float64        `json:"max_tokens"`
	Tools     json.RawMessage `json:"tools"`
	Stop      json.RawMessage `json:"stop"`
	User      string          `json:"user"`
}

type libraryMsg struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	ToolCalls  []json.RawMessage `json:"tool_calls"`
	ToolCallID string            `json:"tool_call_id"`
}

// BenchmarkDecodeRequestView keeps the view's own decoding (one jsontext
// pass giving the typed members and the members as written) against what
// the libraries give: encoding/json's struct decoding alone (typed half
// only), and with the members as written read again by jsonobj (top level
// and each message), which is what the translations did before the view.
func BenchmarkDecodeRequestView(b *testing.B) {
	for _, size := range []int{10 << 10, 1 << 20} {
		body := benchbody.Chat("m", size, `"max_tokens":1024,"stream":true`)
		b.Run(fmt.Sprintf("view-%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeRequestView(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("encoding-json-typed-%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var r libraryRequest
				if err := json.Unmarshal(body, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("encoding-json-typed-and-members-%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var r libraryRequest
				if err := json.Unmarshal(body, &r); err != nil {
					b.Fatal(err)
				}
				top, err := jsonobj.Parse(body)
				if err != nil {
					b.Fatal(err)
				}
				msgs, _ := jsonobj.Elements(top["messages"])
				for _, m := range msgs {
					if _, err := jsonobj.Parse(m); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
