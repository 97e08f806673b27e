package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/sse"
)

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                    true,
		"application/json; charset=utf-8":     true,
		"Application/JSON":                    true,
		"application/problem+json":            true,
		"text/event-stream":                   false,
		"text/event-stream; charset=utf-8":    false,
		"":                                    false,
		"application/json; charset=":          false, // unparseable: read as a stream
		"application/jsonl":                   false,
		"text/plain":                          false,
		"application/vnd.api+json; version=1": true,
	} {
		if got := IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestStatusError(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	h := http.Header{"Retry-After-Ms": {"1500"}}
	tests := []struct {
		status int
		body   string
		class  llm.FailureClass
		msg    string
		retry  time.Duration
	}{
		{429, "", llm.FailThrottled, "upstream status 429", 1500 * time.Millisecond},
		{400, `{"error":{"message":"max_tokens is too large"}}`, llm.FailRejected, "max_tokens is too large", 0},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"bad role"}}`, llm.FailRejected, "bad role", 0},
		{500, "boom", llm.FailTransient, "upstream status 500", 0},
		{529, `{"type":"error","error":{"type":"overloaded_error"}}`, llm.FailTransient, "upstream status 529", 0},
		{401, "", llm.FailConfig, "upstream status 401", 0},
		{403, "", llm.FailConfig, "upstream status 403", 0},
		{404, "", llm.FailConfig, "upstream status 404", 0},
	}
	for _, tt := range tests {
		pe := StatusError(tt.status, h, []byte(tt.body), now)
		if pe.Class != tt.class || pe.Status != tt.status || pe.Message != tt.msg || pe.RetryAfter != tt.retry {
			t.Errorf("StatusError(%d, %q) = %+v, want class %v, message %q, retry %v", tt.status, tt.body, pe, tt.class, tt.msg, tt.retry)
		}
	}
}

func TestContextError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := ContextError("openai", ctx)
	if !errors.Is(err, context.Canceled) || err.Error() != "openai: context canceled" {
		t.Errorf("canceled: %v", err)
	}

	cause := errors.New("client went away")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(cause)
	err = ContextError("anthropic", ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) || err.Error() != "anthropic: context canceled: client went away" {
		t.Errorf("with a cause: %v", err)
	}

	ctx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if err := ContextError("openai", ctx); !errors.Is(err, context.DeadlineExceeded) || err.Error() != "openai: context deadline exceeded" {
		t.Errorf("deadline (the cause is the error itself, not repeated): %v", err)
	}
}

func TestReadError(t *testing.T) {
	closedErr := fmt.Errorf("openai: stream closed: %w", net.ErrClosed)
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	broken := errors.New("read tcp: connection reset by peer")

	if err := ReadError("openai", ended, true, closedErr, broken); err != closedErr {
		t.Errorf("closed: %v, want the closed error before the context's", err)
	}
	if err := ReadError("openai", ended, false, closedErr, broken); !errors.Is(err, context.Canceled) {
		t.Errorf("context ended: %v", err)
	}
	for _, cut := range []error{io.EOF, io.ErrUnexpectedEOF, fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF)} {
		if err := ReadError("openai", live, false, closedErr, cut); err != llm.ErrStreamCut {
			t.Errorf("%v: %v, want llm.ErrStreamCut", cut, err)
		}
	}
	var pe *llm.ProviderError
	if err := ReadError("openai", live, false, closedErr, sse.ErrEventTooLarge); !errors.As(err, &pe) || pe.Class != llm.FailTransient || pe.Message != "upstream event too large" || !errors.Is(err, sse.ErrEventTooLarge) {
		t.Errorf("too large: %v", err)
	}
	if err := ReadError("openai", live, false, closedErr, broken); !errors.As(err, &pe) || pe.Class != llm.FailTransient || pe.Message != "upstream connection broken" || !errors.Is(err, broken) {
		t.Errorf("broken: %v", err)
	}
}
