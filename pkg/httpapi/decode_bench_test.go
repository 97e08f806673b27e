package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/clientapi/chat"
	"github.com/buzzgate/buzzgate/pkg/clientapi/messages"
	"github.com/buzzgate/buzzgate/pkg/clientapi/responses"
)

// agentBody is a body of about size bytes shaped like a coding agent's
// turn on each API: many turns of long text with escapes and non-ASCII.
func agentBody(api string, size int) []byte {
	text := strings.Repeat(`Résumé of \"main.go\":\n\tfunc main() {}\n`, 20)
	var turns []string
	n := 0
	for i := 0; n < size; i++ {
		var t string
		role := [2]string{"user", "assistant"}[i%2]
		switch api {
		case "responses":
			kind := [2]string{"input_text", "output_text"}[i%2]
			t = fmt.Sprintf(`{"type":"message","role":%q,"content":[{"type":%q,"text":"%s"}]}`, role, kind, text)
		default:
			t = fmt.Sprintf(`{"role":%q,"content":"%s"}`, role, text)
		}
		turns = append(turns, t)
		n += len(t) + 1
	}
	list := strings.Join(turns, ",")
	switch api {
	case "messages":
		return []byte(`{"model":"m","max_tokens":1024,"system":"be brief","messages":[` + list + `]}`)
	case "responses":
		return []byte(`{"model":"m","instructions":"be brief","input":[` + list + `]}`)
	}
	return []byte(`{"model":"m","messages":[` + list + `]}`)
}

// BenchmarkDecode is what decoding a request costs on each API (translate:
// its translation to Chat Completions, then the Chat Completions request
// read from it): the work an admitted request does before routing, per body
// byte in B/op over the body's size.
func BenchmarkDecode(b *testing.B) {
	apis := map[string]clientapi.API{"chat": chat.API, "messages": messages.API, "responses": responses.New(responses.Deps{})}
	for _, api := range []string{"chat", "messages", "responses"} {
		for _, size := range []int{10 << 10, 1 << 20} {
			body := agentBody(api, size)
			b.Run(fmt.Sprintf("%s/%dKB", api, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					// Unkeyed, as validateBody reads a body llm.RequestMembers split.
					if _, _, err := translate(apis[api], clientapi.Caller{}, "req_0123", body, false, true); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
