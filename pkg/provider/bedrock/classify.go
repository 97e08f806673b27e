package bedrock

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/wire/converse"
)

// classify is the error of a failed call: the context's when it ended, else
// a *llm.ProviderError of Bedrock's exception's class and message
// (exceptionFailure), with the status that stands for it (Status); no answer
// at all is a connection failure.
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return upstream.ContextError("bedrock", ctx)
	}
	code, _ := Status(err)
	var apiErr smithy.APIError
	if code == 0 || !errors.As(err, &apiErr) {
		return &llm.ProviderError{Class: llm.FailTransient, Message: "connection failed", Err: err}
	}
	pe := exceptionFailure(apiErr.ErrorCode(), apiErr.ErrorMessage())
	pe.Status, pe.Err = code, err
	return pe
}

// exceptionFailure is the classified failure of a Bedrock exception named code
// (as an event stream member names it, "throttlingException", or as the
// API does, "ThrottlingException"), with Bedrock's message, of the class
// failureClass gives it (a validation error is the provider's own refusal,
// FailRejected, with Bedrock's message).
func exceptionFailure(code, msg string) *llm.ProviderError {
	class := failureClass(code, msg)
	text := code
	switch {
	case class == llm.FailRejected && msg != "":
		text = msg
	case msg != "":
		text = code + ": " + msg
	}
	return &llm.ProviderError{Class: class, Message: text, Err: &llm.ChunkError{Message: text}}
}

// exception is how the gateway reads one of Bedrock's exceptions: the
// class of its failure, and the HTTP status that stands for it.
type exception struct {
	class  llm.FailureClass
	status int
}

// exceptions are Bedrock's exceptions by their lower-case name (the API
// names one "ValidationException", an event stream member
// "validationException"); any other is FailTransient, 500:
//
//   - throttling and a service quota: FailThrottled, 429;
//   - a validation error: the request's, FailRejected, 400 (but see
//     failureClass);
//   - no access to the model (AccessDeniedException), an unknown model or
//     one past its end of life (ResourceNotFoundException, 404), and the
//     credentials (UnrecognizedClientException, InvalidSignatureException,
//     ExpiredTokenException): FailConfig, 403, the operator's to fix. The
//     request names nothing Bedrock looks up (no S3 location, guardrail
//     or prompt is sent), so a missing resource is the route's model;
//   - a model not ready, the service unavailable: 503; a model timeout:
//     504; these and the rest (InternalServerException,
//     ModelStreamErrorException, ...) FailTransient.
var exceptions = func() map[string]exception {
	m := map[string]exception{}
	for _, e := range []struct {
		names []string
		exception
	}{
		{[]string{converse.ErrThrottling, converse.ErrServiceQuotaExceeded}, exception{llm.FailThrottled, http.StatusTooManyRequests}},
		{[]string{converse.ErrValidation}, exception{llm.FailRejected, http.StatusBadRequest}},
		{[]string{converse.ErrAccessDenied, converse.ErrUnrecognizedClient, converse.ErrInvalidSignature, converse.ErrExpiredToken},
			exception{llm.FailConfig, http.StatusForbidden}},
		{[]string{converse.ErrResourceNotFound}, exception{llm.FailConfig, http.StatusNotFound}},
		{[]string{converse.ErrModelNotReady, converse.ErrServiceUnavailable}, exception{llm.FailTransient, http.StatusServiceUnavailable}},
		{[]string{converse.ErrModelTimeout}, exception{llm.FailTransient, http.StatusGatewayTimeout}},
	} {
		for _, n := range e.names {
			m[strings.ToLower(n)] = e.exception
		}
	}
	return m
}()

// exceptionOf is the exception named code, in either case.
func exceptionOf(code string) exception {
	if e, ok := exceptions[strings.ToLower(code)]; ok {
		return e
	}
	return exception{llm.FailTransient, http.StatusInternalServerError}
}

// failureClass is the class of a Bedrock exception named code, with
// Bedrock's message msg (exceptions): a validation error whose message says
// the route's model id is wrong ("The provided model identifier is
// invalid.", "Invocation of model ID ... with on-demand throughput isn't
// supported ...") is FailConfig.
func failureClass(code, msg string) llm.FailureClass {
	class := exceptionOf(code).class
	if class == llm.FailRejected && modelIDRefused(msg) {
		return llm.FailConfig
	}
	return class
}

// modelIDRefused reports whether a ValidationException's message is about
// the model id the route names, in Bedrock's words (at the message's
// start, where nothing of the request is quoted).
func modelIDRefused(msg string) bool {
	msg = strings.ToLower(strings.TrimSpace(msg))
	return strings.HasPrefix(msg, "the provided model identifier is invalid") ||
		(strings.HasPrefix(msg, "invocation of model id ") && strings.Contains(msg, "on-demand throughput isn"))
}

// Status is the HTTP status that stands for a Bedrock failure
// (exceptions), with its message: the exception's name and Bedrock's
// words, a validation error's words alone; 0 when err is no answer from
// Bedrock (a connection failure).
func Status(err error) (code int, msg string) {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return 0, ""
	}
	name, words := apiErr.ErrorCode(), apiErr.ErrorMessage()
	e := exceptionOf(name)
	switch {
	case e.class == llm.FailRejected:
		msg = words
	case words != "":
		msg = name + ": " + words
	default:
		msg = name
	}
	return e.status, msg
}
