package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/sse"
)

// IsJSON reports whether contentType names JSON (application/json or a
// +json type). An adapter reads such a 200 as a whole answer, from an
// upstream that ignored "stream": true, and anything else as an event
// stream.
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// StatusError classifies an answer whose status is not 200. A 429 is a
// throttled provider, with its retry hint; a 400 rejects the request, with
// the provider's message; a 401, 403 or 404 is this provider's
// configuration (its key, or the route's model), not the client's problem:
// a configuration failure; anything else (a 5xx, Anthropic's 529
// overloaded_error) is a transient failure. The router tries the next
// provider on both.
func StatusError(status int, h http.Header, body []byte, now time.Time) *llm.ProviderError {
	switch status {
	case http.StatusTooManyRequests:
		return &llm.ProviderError{Class: llm.FailThrottled, Status: status, Message: "upstream status 429", RetryAfter: RetryAfter(h, now)}
	case http.StatusBadRequest:
		return &llm.ProviderError{Class: llm.FailRejected, Status: status, Message: RejectedMessage(body)}
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		// The body is not kept: a refused key's message may quote the key.
		return &llm.ProviderError{Class: llm.FailConfig, Status: status, Message: "upstream status " + strconv.Itoa(status)}
	}
	return &llm.ProviderError{Class: llm.FailTransient, Status: status, Message: "upstream status " + strconv.Itoa(status)}
}

// ContextError is the error of a call whose context ended, prefixed with
// the adapter's name: it wraps ctx.Err() and, when there is one that is not
// the same, the context's cause.
func ContextError(name string, ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%s: %w: %w", name, err, cause)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// ReadError classifies err, met reading an answer's body: closedErr when the
// stream was closed (closed), the context's error when the call's context
// ended, llm.ErrStreamCut when the body ended early, and a transient
// provider failure for an event over the size bound or a broken connection.
func ReadError(name string, ctx context.Context, closed bool, closedErr, err error) error {
	switch {
	case closed:
		return closedErr
	case ctx.Err() != nil:
		return ContextError(name, ctx)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return llm.ErrStreamCut
	case errors.Is(err, sse.ErrEventTooLarge):
		return &llm.ProviderError{Class: llm.FailTransient, Message: "upstream event too large", Err: err}
	}
	return &llm.ProviderError{Class: llm.FailTransient, Message: "upstream connection broken", Err: err}
}
