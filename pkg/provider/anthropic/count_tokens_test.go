package anthropic

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

const countBody = `{"system":"Be brief.","model":"client-model","messages":[{"role":"user","content":"Hi"}],"tools":[]}`

// TestCountTokensOnTheWire: the call goes to /v1/messages/count_tokens with
// the route's model first and the other fields as they were, the client's
// version and betas, and the provider's key; the answer is kept as sent.
func TestCountTokensOnTheWire(t *testing.T) {
	up := providertest.NewAnthropic(t)
	up.ScriptCountTokens(providertest.Response{Usage: &providertest.Usage{PromptTokens: 12}})
	got, err := New("claude", up.URL(), "claude-secret", nil).CountTokens(context.Background(), &llm.TokenCountRequest{
		Model: "claude-x", Body: []byte(countBody), Version: "2023-01-01", Beta: []string{"b1,b2", "b3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.InputTokens != 12 || string(got.Body) != `{"input_tokens":12}` {
		t.Errorf("answer: %d %s", got.InputTokens, got.Body)
	}
	reqs := up.CountTokensRequests()
	if len(reqs) != 1 || up.Calls() != 0 {
		t.Fatalf("%d count_tokens calls and %d messages calls, want 1 and 0", len(reqs), up.Calls())
	}
	r := reqs[0]
	if want := `{"model":"claude-x","system":"Be brief.","messages":[{"role":"user","content":"Hi"}],"tools":[]}`; string(r.Body) != want {
		t.Errorf("body %s, want %s", r.Body, want)
	}
	h := r.Header
	if h.Get("X-Api-Key") != "claude-secret" || h.Get("Anthropic-Version") != "2023-01-01" || h.Get("Content-Type") != "application/json" ||
		!cmp.Equal(h.Values("Anthropic-Beta"), []string{"b1,b2", "b3"}) || h.Get("Authorization") != "" {
		t.Errorf("headers: %v", h)
	}

	// No version from the client: the adapter's own; no key: no x-api-key.
	if _, err := New("claude", up.URL(), "", nil).CountTokens(context.Background(), &llm.TokenCountRequest{Model: "m", Body: []byte(`{"messages":[]}`)}); err != nil {
		t.Fatal(err)
	}
	r = up.CountTokensRequests()[1]
	if r.Header.Get("Anthropic-Version") != Version || r.Header.Values("X-Api-Key") != nil || r.Header.Values("Anthropic-Beta") != nil ||
		string(r.Body) != `{"model":"m","messages":[]}` {
		t.Errorf("defaults: %v %s", r.Header, r.Body)
	}
}

func TestCountTokensFailures(t *testing.T) {
	for _, tt := range []struct {
		name string
		resp providertest.Response
		want llm.ProviderError
	}{
		{"400", providertest.Response{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages: Field required"}}`},
			llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "messages: Field required"}},
		{"404 model", providertest.Response{Status: 404, Body: `{"type":"error","error":{"type":"not_found_error","message":"model: m"}}`},
			llm.ProviderError{Class: llm.FailConfig, Status: 404, Message: "upstream status 404"}},
		{"404 file", providertest.Response{Status: 404, Body: `{"type":"error","error":{"type":"not_found_error","message":"File not found: file_011CNha8iCJcU1wXNR6q4V8w"}}`},
			llm.ProviderError{Class: llm.FailRejected, Status: 404, Message: "File not found: file_011CNha8iCJcU1wXNR6q4V8w"}},
		{"529", providertest.Response{Status: 529}, llm.ProviderError{Class: llm.FailTransient, Status: 529, Message: "upstream status 529"}},
		{"429", providertest.Response{Status: 429, Header: map[string]string{"retry-after": "3"}},
			llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "upstream status 429", RetryAfter: 3 * time.Second}},
		{"200 without input_tokens", providertest.Response{Body: `{"tokens":3}`}, llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream answer"}},
		{"200 negative", providertest.Response{Body: `{"input_tokens":-1}`}, llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream answer"}},
		{"200 not JSON", providertest.Response{Body: `input_tokens: 3`}, llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream answer"}},
		{"reset", providertest.Response{Reset: true}, llm.ProviderError{Class: llm.FailTransient, Message: "connection failed"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := providertest.NewAnthropic(t)
			up.ScriptCountTokens(tt.resp)
			got, err := New("claude", up.URL(), "k", nil).CountTokens(context.Background(), &llm.TokenCountRequest{Model: "m", Body: []byte(countBody)})
			if got != nil {
				t.Fatalf("an answer for a failure: %+v", got)
			}
			pe := asProviderError(t, err)
			pe.Err = nil
			if diff := cmp.Diff(tt.want, *pe); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if n := len(up.CountTokensRequests()); n != 1 {
				t.Errorf("%d calls, want exactly 1", n)
			}
		})
	}
}

func TestCountTokensWithoutCall(t *testing.T) {
	up := providertest.NewAnthropic(t)
	c := New("claude", up.URL(), "k", nil)
	for _, body := range []string{`[1]`, `{"model":"x"`, `{"a":1} {}`, ``} {
		_, err := c.CountTokens(context.Background(), &llm.TokenCountRequest{Model: "m", Body: []byte(body)})
		if pe := asProviderError(t, err); pe.Class != llm.FailRejected {
			t.Errorf("body %q: %v, want rejected", body, pe)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.CountTokens(ctx, &llm.TokenCountRequest{Model: "m", Body: []byte(countBody)}); !errors.Is(err, context.Canceled) {
		t.Errorf("a done context: %v", err)
	}
	if _, err := New("claude", "ftp://x", "", nil).CountTokens(context.Background(), &llm.TokenCountRequest{Model: "m", Body: []byte(countBody)}); asProviderError(t, err).Message != "invalid upstream URL" {
		t.Errorf("bad URL: %v", err)
	}
	if n := len(up.CountTokensRequests()); n != 0 {
		t.Errorf("%d calls, want none", n)
	}

	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := New("claude", url, "", nil).CountTokens(context.Background(), &llm.TokenCountRequest{Model: "m", Body: []byte(countBody)})
	if pe := asProviderError(t, err); pe.Class != llm.FailTransient || pe.Message != "connection failed" {
		t.Errorf("refused: %v", pe)
	}
}

// TestCountTokensContext: a call whose context ends while the upstream
// holds it returns the context's error, not a provider failure.
func TestCountTokensContext(t *testing.T) {
	up := providertest.NewAnthropic(t)
	up.ScriptCountTokens(providertest.Response{Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for len(up.CountTokensRequests()) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err := New("claude", up.URL(), "", nil).CountTokens(ctx, &llm.TokenCountRequest{Model: "m", Body: []byte(countBody)})
	var pe *llm.ProviderError
	if !errors.Is(err, context.Canceled) || errors.As(err, &pe) {
		t.Errorf("cancelled while the upstream held the call: %v", err)
	}
}
