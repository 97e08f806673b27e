//go:build integration

package systemtest_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/tokenize"
)

// tokenizer is a Counter on the vocabularies `make tools` installs
// (.tools/tokenizer, or BUZZGATE_TOKENIZER_DIR).
func tokenizer(t *testing.T) *tokenize.Counter {
	t.Helper()
	const missing = "the tokenizer's vocabularies are not installed: run `make tools` (make test installs them)"
	dir, err := proc.Tool(tokenize.DirEnv, filepath.Join(".tools", "tokenizer"), missing)
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, tokenize.O200K+".json"))
	}
	if err != nil {
		t.Fatalf("%s (%v)", missing, err)
	}
	return tokenize.New(dir, nil)
}

// droppedText is what the upstream produced before the client left: 93
// bytes that o200k_base (the tiktoken npm package) counts as 7 tokens, where
// one token per four bytes would bill 24.
const droppedText = "Internationalization responsibilities notwithstanding accommodate extraordinary circumstances"

// TestDroppedStreamIsBilledFromTokens: an unkeyed stream whose client
// leaves before the provider reported its usage (the gateway stops reading
// it then) is billed from the tokenizer's count of the text produced and of
// the prompt, on each client API against its own upstream. The Anthropic
// upstream reported the prompt in message_start: that count stands.
func TestDroppedStreamIsBilledFromTokens(t *testing.T) {
	for _, c := range []struct {
		api, path, body string
		// prompt is the prompt's count: PerMessage a message, Priming,
		// "user" 1 token, "Say hello" 2; or the upstream's own.
		prompt int
	}{
		{"openai", "/api/v1/chat/completions", chatBody(`"stream":true`), tokenize.PerMessage + tokenize.Priming + 1 + 2},
		{"openai-responses", "/api/v1/responses", `{"model":"m","input":"Say hello","stream":true}`, tokenize.PerMessage + tokenize.Priming + 2},
		{"anthropic", "/api/v1/messages", `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`, providertest.PromptTokens},
	} {
		t.Run(c.api, func(t *testing.T) {
			up := upstreamFor(t, c.api)
			up.Script(providertest.Response{Text: []string{droppedText, " and more"}, ChunkDelay: time.Minute})
			ledger := memledger.New(memledger.Options{})
			url, gw := oneRoute{api: c.api, baseURL: up.URL(), prices: "input_price: 1000, output_price: 2000",
				accounts: httpapi.Accounts{Ledger: ledger, Keys: ledger}, tokens: tokenizer(t)}.start(t)

			reqID := leaveAfter(t, url+c.path, c.body, droppedText)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := gw.Finisher.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			var e struct {
				PromptTokens, CompletionTokens int
				CostNanos                      int64
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				got, err := ledger.Entry(ctx, reqID)
				if err == nil {
					e.PromptTokens, e.CompletionTokens, e.CostNanos = got.PromptTokens, got.CompletionTokens, got.CostNanos
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no ledger entry for %s: %v", reqID, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// USD 1000 and 2000 a million tokens: 1,000,000 and 2,000,000
			// nano-USD a token.
			want := int64(c.prompt)*1_000_000 + 7*2_000_000
			if e.PromptTokens != c.prompt || e.CompletionTokens != 7 || e.CostNanos != want {
				t.Errorf("billed %d prompt and %d completion tokens, %d nano-USD; want %d, 7 (not %d, one a four bytes), %d",
					e.PromptTokens, e.CompletionTokens, e.CostNanos, c.prompt, tokenize.Fallback(len(droppedText)), want)
			}
		})
	}
}

// leaveAfter sends an unkeyed streaming request, reads its answer until
// text has arrived, and leaves (the connection closed); it returns the
// request's ID.
func leaveAfter(t *testing.T, url, body, text string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), text) {
			return resp.Header.Get("X-Request-Id")
		}
	}
	t.Fatalf("the stream ended without %q: %v", text, sc.Err())
	return ""
}
