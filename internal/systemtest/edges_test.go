package systemtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
)

// anthropicShape reports whether body is Anthropic's error envelope:
// {"type":"error","error":{"type":"...","message":"..."}}.
func anthropicShape(body []byte) bool {
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && e.Type == "error" && e.Error.Type != "" && e.Error.Message != ""
}

func sendMessages(t *testing.T, url, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	req.Header.Set("x-api-key", testKey)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestMessagesSubpathsAnswerAnthropicErrors: the Anthropic SDKs call
// /v1/messages/batches under the same base URL; the gateway does not serve
// it, and its 404 must still be in Anthropic's shape, as every other error
// of the Messages API is.
func TestMessagesSubpathsAnswerAnthropicErrors(t *testing.T) {
	g := newGateway(t, setup{})
	for _, path := range []string{"/api/v1/messages/batches", "/api/v1/messages/count_tokens/x", "/api/v1/messages/"} {
		resp, body := sendMessages(t, g.url, path, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != http.StatusNotFound || !anthropicShape(body) {
			t.Errorf("POST %s: %d %s, want 404 in Anthropic's error shape", path, resp.StatusCode, body)
		}
	}
}

// panickingKeys is a key store with a bug: its Lookup panics.
type panickingKeys struct{ billing.KeyStore }

func (panickingKeys) Lookup(context.Context, string) (billing.KeyRecord, error) {
	panic("key store bug")
}

// TestMessagesPanicAnswersAnthropicError: a bug that panics while a
// Messages request is served is answered 500, in the Messages API's own
// error shape (the Anthropic SDKs read error.type), not OpenAI's.
func TestMessagesPanicAnswersAnthropicError(t *testing.T) {
	l := memledger.New(memledger.Options{})
	g := newGateway(t, setup{accounts: httpapi.Accounts{Ledger: l, Keys: panickingKeys{l}}})
	resp, body := sendMessages(t, g.url, "/api/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusInternalServerError || !anthropicShape(body) {
		t.Errorf("POST /api/v1/messages with a panicking handler: %d %s, want 500 in Anthropic's error shape", resp.StatusCode, body)
	}
}

// TestUsageTimeOutOfJSONRange: GET /api/v1/usage with a valid RFC
// 3339 `to` whose UTC form (or the default from, 24 h before it) falls
// outside the years 0000-9999 must be a 400 naming the parameter, never a
// 500.
func TestUsageTimeOutOfJSONRange(t *testing.T) {
	g := newGateway(t, setup{})
	for _, q := range []string{
		"?to=0000-01-01T00:00:00Z",                                  // default from is in year -1
		"?from=0000-01-01T00:00:00%2B01:00&to=2026-01-01T00:00:00Z", // from in UTC is year -1
		"?from=2026-01-01T00:00:00Z&to=9999-12-31T23:00:00-05:00",   // to in UTC is year 10000
	} {
		status, body := getUsage(t, g.url, q, testKey)
		if status != http.StatusBadRequest {
			t.Errorf("GET /api/v1/usage%s: %d %v, want 400 invalid_request", q, status, body)
		}
	}
}

// panickingPrice is a ledger with a bug: Price, which runs while the answer
// is being written (before its last bytes), panics.
type panickingPrice struct{ billing.Ledger }

func (panickingPrice) Price(context.Context, billing.Entry) error { panic("ledger bug") }

// TestPanicMidStreamBreaksTheResponse: a bug that panics after the
// answer started can no longer change its status; the response must then
// break off (as net/http does for a panicking handler, and as wire.Abort
// does), never end as if it were whole, which a client takes for a
// complete answer.
func TestPanicMidStreamBreaksTheResponse(t *testing.T) {
	l := memledger.New(memledger.Options{})
	g := newGateway(t, setup{accounts: httpapi.Accounts{Ledger: panickingPrice{l}, Keys: l}})
	resp := g.post(t, chatBody(`"stream":true`))
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	if err == nil {
		t.Errorf("the stream of a request that panicked mid-answer ended cleanly (read error nil); its body:\n%s", body)
	}
}
