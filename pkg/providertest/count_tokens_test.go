package providertest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func callCount(t *testing.T, base, method, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(`{"model":"x","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestCountTokens: the Anthropic server answers count_tokens from its own
// queue, records the calls apart from the messages calls, and an OpenAI
// server does not serve the path.
func TestCountTokens(t *testing.T) {
	s := NewAnthropic(t)
	s.ScriptCountTokens(Response{Usage: &Usage{PromptTokens: 5}, Header: map[string]string{"request-id": "req_1"}},
		Response{Status: 529}, Response{Body: `{"input_tokens":"many"}`})
	s.Script(Response{Status: 500}) // the messages queue is another
	for _, want := range []struct {
		status int
		body   string
	}{
		{200, `{"input_tokens":5}`},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"scripted 529"}}`},
		{200, `{"input_tokens":"many"}`},
		{200, `{"input_tokens":37}`}, // the queue is empty: CountedTokens
	} {
		status, h, body := callCount(t, s.URL(), http.MethodPost, CountTokensPath)
		if status != want.status || strings.TrimSpace(body) != want.body || h.Get("Content-Type") != "application/json" {
			t.Errorf("%d %s (%v), want %d %s", status, body, h, want.status, want.body)
		}
	}
	if status, h, _ := callCount(t, s.URL(), http.MethodGet, CountTokensPath); status != 405 || h.Get("Allow") != "POST" {
		t.Errorf("GET: %d %v", status, h)
	}
	if n, m := len(s.CountTokensRequests()), s.Calls(); n != 4 || m != 0 {
		t.Errorf("%d count_tokens calls and %d messages calls, want 4 and 0", n, m)
	}
	if r := s.CountTokensRequests()[0]; r.JSON["model"] != "x" {
		t.Errorf("recorded request: %s", r.Body)
	}

	o := New(t)
	if status, _, _ := callCount(t, strings.TrimSuffix(o.URL(), "/v1"), http.MethodPost, CountTokensPath); status != 404 || len(o.CountTokensRequests()) != 0 {
		t.Errorf("an OpenAI server: %d", status)
	}
}
