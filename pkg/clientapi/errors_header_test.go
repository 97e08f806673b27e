package clientapi

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// TestErrorHeaders: the headers a gateway.HeaderError carries go out with
// the error's envelope, in every API's, however deep in the chain.
func TestErrorHeaders(t *testing.T) {
	err := fmt.Errorf("admission: %w", &gateway.HeaderError{
		Err:    &llm.Error{Code: llm.CodeRateLimited, Message: "used up"},
		Header: map[string]string{"x-ratelimit-remaining-requests": "0"},
	})
	for name, write := range map[string]func(*httptest.ResponseRecorder, error) int{
		"openai":    func(w *httptest.ResponseRecorder, err error) int { return WriteError(w, err) },
		"anthropic": func(w *httptest.ResponseRecorder, err error) int { return WriteAnthropicError(w, err) },
	} {
		w := httptest.NewRecorder()
		if status := write(w, err); status != 429 || w.Header().Get("X-Ratelimit-Remaining-Requests") != "0" || w.Header().Get("X-Gateway-Admission-Refused") != "true" {
			t.Errorf("%s: status %d, header %v", name, status, w.Header())
		}
	}
}
