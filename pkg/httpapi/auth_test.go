package httpapi

import (
	"net/http"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// A request's key may come more than once only as the same key: two
// different keys, in two headers or twice in one, are a 401 whichever is
// first.
func TestRequestKey(t *testing.T) {
	for _, c := range []struct {
		name    string
		header  [][2]string
		want    string
		wantErr string
	}{
		{"bearer", [][2]string{{"Authorization", "Bearer k1"}}, "k1", ""},
		{"x-api-key", [][2]string{{"X-Api-Key", "k1"}}, "k1", ""},
		{"both, the same", [][2]string{{"Authorization", "Bearer k1"}, {"X-Api-Key", "k1"}}, "k1", ""},
		{"two bearers, the same", [][2]string{{"Authorization", "Bearer k1"}, {"Authorization", "bearer k1"}}, "k1", ""},
		{"two x-api-keys, the same", [][2]string{{"X-Api-Key", "k1"}, {"X-Api-Key", " k1 "}}, "k1", ""},
		{"a non-bearer Authorization beside x-api-key", [][2]string{{"Authorization", "Basic Zm9v"}, {"X-Api-Key", "k1"}}, "k1", ""},
		{"two bearers", [][2]string{{"Authorization", "Bearer k1"}, {"Authorization", "Bearer k2"}}, "", "two Authorization headers carry two different keys; send one key"},
		{"two x-api-keys", [][2]string{{"X-Api-Key", "k2"}, {"X-Api-Key", "k1"}}, "", "two x-api-key headers carry two different keys; send one key"},
		{"bearer and x-api-key", [][2]string{{"Authorization", "Bearer k1"}, {"X-Api-Key", "k2"}}, "", "Authorization: Bearer and x-api-key carry two different keys; send one key"},
		{"the same bearers, another x-api-key", [][2]string{{"Authorization", "Bearer k1"}, {"Authorization", "Bearer k1"}, {"X-Api-Key", "k2"}}, "", "Authorization: Bearer and x-api-key carry two different keys; send one key"},
		{"none", nil, "", "missing API key: send Authorization: Bearer <key> or x-api-key: <key>"},
	} {
		h := http.Header{}
		for _, kv := range c.header {
			h.Add(kv[0], kv[1])
		}
		got, err := requestKey(h)
		if c.wantErr != "" {
			e := llm.AsError(err)
			if err == nil || e.Code != llm.CodeInvalidAPIKey || e.Message != c.wantErr {
				t.Errorf("%s: key %q, error %v; want invalid_api_key %q", c.name, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: key %q, error %v; want %q", c.name, got, err, c.want)
		}
	}
}
