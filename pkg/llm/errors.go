// Package llm is buzzgate's domain: chat requests and their chunks, usage and
// cost, provider failures and the gateway's error codes. Of ours it imports
// only the Chat Completions wire shapes (pkg/wire/chat) and the JSON helpers
// beneath it (internal/jsonscan, internal/jsonstr, internal/jsonobj); every
// other package speaks its language.
package llm

import (
	"errors"
	"fmt"
	"time"
)

// Code is one of the gateway's documented error codes (docs/api.md#errors).
// The HTTP layer maps each code to a status in exactly one table.
type Code string

// The documented error codes.
const (
	CodeInvalidRequest      Code = "invalid_request"
	CodeProviderRejected    Code = "provider_rejected"
	CodeInvalidAPIKey       Code = "invalid_api_key"
	CodeInsufficientBalance Code = "insufficient_balance"
	CodeKeyLimitReached     Code = "key_limit_reached"
	CodeBudgetExceeded      Code = "budget_exceeded"
	CodeRateLimited         Code = "rate_limited"
	CodeModelNotFound       Code = "model_not_found"
	CodeIdempotencyConflict Code = "idempotency_conflict"
	CodeReplayUnavailable   Code = "idempotency_replay_unavailable"
	CodeInProgress          Code = "idempotency_in_progress"
	CodeRequestTooLarge     Code = "request_too_large"
	CodeBodyTimeout         Code = "body_timeout"
	CodeCapacity            Code = "capacity"
	CodeUnavailableRoute    Code = "unavailable_route"
	CodeAllProvidersFailed  Code = "all_providers_failed"
	CodeNoLiveProvider      Code = "no_live_provider"
	CodeStoreUnavailable    Code = "idempotency_store_unavailable"
	CodeBillingUnavailable  Code = "billing_unavailable"
	CodeRequestTimeout      Code = "request_timeout"
	CodeNotFound            Code = "not_found"
	CodeMethodNotAllowed    Code = "method_not_allowed"
	CodeInternal            Code = "internal_error"
	CodeStreamInterrupted   Code = "stream_interrupted"
)

// Error is a failure the gateway reports to its client. Message and Param are
// shown to the client; Cause is for the logs only and never leaves the process.
type Error struct {
	Code    Code
	Message string
	// Param is the path of the offending request field ("gateway.retry.backoff"),
	// or empty when no single field is at fault (sent as JSON null).
	Param string
	// RetryAfter, when positive, is how long the client should wait
	// before it tries again.
	RetryAfter time.Duration
	Cause      error
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%s: %s (param %s)", e.Code, e.Message, e.Param)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds an Error with a formatted message.
func Errorf(code Code, param, format string, args ...any) *Error {
	return &Error{Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// AsError finds the *Error in err's chain. Anything else is an internal error,
// whose text is not shown to the client.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: "internal error", Cause: err}
}

// FailureClass says what a provider failure means for routing. A provider
// adapter classifies each failure once; the router decides from the class
// alone (the idea of Bifrost's failureclass.go).
type FailureClass int

const (
	// FailTransient: a connection error, a 5xx, a malformed answer, or any
	// other failure worth trying the next provider for. Counts against health.
	FailTransient FailureClass = iota
	// FailThrottled: the provider answered 429. It may be called again after
	// the backoff, within max_attempts_per_route.
	FailThrottled
	// FailRejected: the provider's own 400, or its 404 about an object the
	// request named (a file, a conversation, an item). The request is at
	// fault: it is passed through as provider_rejected, not tried
	// elsewhere, and the provider's health is left as it was.
	FailRejected
	// FailTimeout: no output before the provider's first_token_timeout.
	FailTimeout
	// FailConfig: the provider's configuration is wrong, not the request:
	// its key was refused (401, 403), or the route's model is unknown to
	// it or not enabled for the account (a 404 that names the model, or
	// whose body is not the API's error, as from a wrong base_url;
	// Bedrock's AccessDeniedException and ResourceNotFoundException). Only
	// the provider's own words can say so: a failure the request could
	// cause is never this class. The router takes the route out for the
	// health cooldown and tries the next; the gateway logs it as an error
	// and counts it (ProviderConfigErrors).
	FailConfig
)

func (c FailureClass) String() string {
	switch c {
	case FailTransient:
		return "transient"
	case FailThrottled:
		return "throttled"
	case FailRejected:
		return "rejected"
	case FailTimeout:
		return "timeout"
	case FailConfig:
		return "config"
	}
	return "unknown"
}

// ProviderError is a classified failure of one provider call.
type ProviderError struct {
	Class FailureClass
	// Status is the upstream HTTP status, or 0 when none was received.
	Status int
	// Message is safe to show to the client: for FailRejected it is the
	// provider's own error message.
	Message string
	// RetryAfter is the provider's retry-after hint, if any.
	RetryAfter time.Duration
	Err        error
}

func (e *ProviderError) Error() string {
	s := e.Class.String()
	if e.Status != 0 {
		s += fmt.Sprintf(" (status %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ProviderError) Unwrap() error { return e.Err }

// ErrStreamCut is returned by ChunkStream.Next when the upstream stream ended
// (the connection closed cleanly or mid-chunk) without its terminating
// "data: [DONE]". Whether that is an incomplete answer or a complete one whose
// provider just omits [DONE] is the router's call: it knows whether a
// finish_reason was seen.
var ErrStreamCut = errors.New("upstream stream ended without [DONE]")
