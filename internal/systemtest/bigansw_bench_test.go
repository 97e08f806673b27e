package systemtest_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// BenchmarkBigAnswer: a 480 KB answer in 60,000 deltas through the gateway
// on a loopback server, streamed to the client and as one body: a Chat
// Completions client of an OpenAI upstream, and a Messages client of an
// Anthropic one (passed through).
func BenchmarkBigAnswer(b *testing.B) {
	pieces := make([]string, 60_000)
	for i := range pieces {
		pieces[i] = "abcdefg "
	}
	openai, claude := providertest.New(b), providertest.NewAnthropic(b)
	for _, up := range []*providertest.Server{openai, claude} {
		up.SetDefault(providertest.Response{Text: pieces})
	}
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: openai, api: openai, base_url: %q}
  - {name: claude, api: anthropic, base_url: %q}
models:
  - id: gpt
    routes: [{provider: openai, model: up-1, input_price: 1, output_price: 2}]
  - id: claude
    routes: [{provider: claude, model: claude-x, input_price: 1, output_price: 2}]
projects:
  - id: proj
    keys: [{key: %s}]
`, openai.URL(), claude.URL(), testKey))
	if err != nil {
		b.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	b.Cleanup(srv.Close)
	for _, api := range []struct{ name, path, model string }{
		{"chat", "/api/v1/chat/completions", "gpt"},
		{"messages", "/api/v1/messages", "claude"},
	} {
		for _, stream := range []bool{true, false} {
			name := api.name + "/whole"
			if stream {
				name = api.name + "/stream"
			}
			body := fmt.Sprintf(`{"model":%q,"max_tokens":100000,"stream":%v,"messages":[{"role":"user","content":"write"}]}`, api.model, stream)
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					req, err := http.NewRequest(http.MethodPost, srv.URL+api.path, strings.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					req.Header.Set("Authorization", "Bearer "+testKey)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Anthropic-Version", "2023-06-01")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 || len(got) < 480_000 {
						b.Fatalf("%d, %d bytes, %v: %.300s", resp.StatusCode, len(got), err, got)
					}
				}
			})
		}
	}
}
