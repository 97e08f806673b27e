package systemtest_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/buzzgate/buzzgate/internal/benchbody"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
)

// BenchmarkBodySize is what a large request body costs: a coding agent's
// Chat Completions body (internal/benchbody) of 10 KB, 200 KB and 1 MB sent
// to the canned upstream directly, and through the gateway's handler in
// process, unkeyed and keyed (a new Idempotency-Key each time: the body is
// fingerprinted and the answer recorded). The handler's time less the
// direct call's is the gateway's own work on the body. For profiles:
//
//	go test -run='^$' -bench='BodySize/gateway-unkeyed/1MB' -cpuprofile cpu.out ./internal/systemtest
func BenchmarkBodySize(b *testing.B) {
	handler, upURL := benchGateway(b, memstore.New(1<<30))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.Cleanup(client.CloseIdleConnections)
	for _, size := range []struct {
		name  string
		bytes int
	}{{"10KB", 10 << 10}, {"200KB", 200 << 10}, {"1MB", 1 << 20}} {
		direct := benchbody.Chat("up-model", size.bytes, `"max_tokens":128`)
		gw := benchbody.Chat("m", size.bytes, `"max_tokens":128`)
		b.Run("direct/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(len(direct)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				resp, err := client.Post(upURL+"/chat/completions", "application/json", bytes.NewReader(direct))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
		for _, keyed := range []bool{false, true} {
			name := "gateway-unkeyed/" + size.name
			if keyed {
				name = "gateway-keyed/" + size.name
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(gw)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					req := httptest.NewRequest(http.MethodPost, "/api/v1/chat/completions", bytes.NewReader(gw))
					req.Header.Set("Authorization", "Bearer "+testKey)
					if keyed {
						req.Header.Set("Idempotency-Key", fmt.Sprintf("size-%s-%d-%d", size.name, b.N, i))
					}
					w := httptest.NewRecorder()
					handler.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		}
	}
}
