package upstream

import (
	"context"
	"encoding/json"
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
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// IsJSON reports whether contentType names JSON (application/json or a
// +json type). An adapter reads such a 200 as a whole answer, from an
// upstream that ignored "stream": true, and anything else as an event
// stream.
func IsJSON(contentType string) bool {
	// The two types upstreams send, exactly as they send them, without
	// parsing (mime.ParseMediaType allocates a map for the parameters).
	switch contentType {
	case "text/event-stream":
		return false
	case "application/json":
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// StatusError classifies an answer whose status is not 200, from an
// upstream that speaks api (llm.ProtoMessages: Anthropic's error envelope;
// llm.ProtoChat and llm.ProtoResponses: OpenAI's):
//
//   - 429: FailThrottled, with the retry hint;
//   - 400: FailRejected, with the provider's message; but a 400 that says
//     the route's model does not exist (OpenAI's code model_not_found) is
//     FailConfig;
//   - 401, 403: FailConfig, the provider's key refused; the body is not
//     kept, as a refused key's message may quote the key;
//   - 404: FailConfig when it is about the route's model or the endpoint
//     (see notFoundIsRequests); FailRejected, with the provider's message,
//     when it is about an object the request named (a file, a conversation,
//     an item): the client's reference, which no other provider holds
//     either;
//   - anything else (a 5xx, Anthropic's 529 overloaded_error): FailTransient.
//
// A FailRejected is the client's answer: the router tries no other
// provider and leaves the provider's health as it was. Only a FailConfig
// takes the route out at once, so nothing a request can make a provider
// say is classed so.
func StatusError(api llm.Proto, status int, h http.Header, body []byte, now time.Time) *llm.ProviderError {
	switch status {
	case http.StatusTooManyRequests:
		return &llm.ProviderError{Class: llm.FailThrottled, Status: status, Message: "upstream status 429", RetryAfter: RetryAfter(h, now)}
	case http.StatusBadRequest:
		if e, ok := parseEnvelope(body); ok && api != llm.ProtoMessages && e.modelNotFound() {
			return &llm.ProviderError{Class: llm.FailConfig, Status: status, Message: "upstream status 400"}
		}
		return &llm.ProviderError{Class: llm.FailRejected, Status: status, Message: RejectedMessage(body)}
	case http.StatusUnauthorized, http.StatusForbidden:
		return &llm.ProviderError{Class: llm.FailConfig, Status: status, Message: "upstream status " + strconv.Itoa(status)}
	case http.StatusNotFound:
		if notFoundIsRequests(api, body) {
			return &llm.ProviderError{Class: llm.FailRejected, Status: status, Message: RejectedMessage(body)}
		}
		return &llm.ProviderError{Class: llm.FailConfig, Status: status, Message: "upstream status 404"}
	}
	return &llm.ProviderError{Class: llm.FailTransient, Status: status, Message: "upstream status " + strconv.Itoa(status)}
}

// RejectedMessage is what a FailRejected status (a 400, a 404 about the
// request's own reference) passes on to the client: the message of the
// error envelope (OpenAI's {"error":{"message"}}, Anthropic's
// {"type":"error","error":{"message"}}), else the start of the body as
// plain text.
func RejectedMessage(body []byte) string {
	var env chat.UpstreamError
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		// Only the message is read: a member of an unexpected type beside
		// it does not lose it.
		var e chat.UpstreamErrorBody
		_ = json.Unmarshal(env.Error, &e)
		if strings.TrimSpace(e.Message) != "" {
			return e.Message
		}
		// Some compatible servers send {"error": "message"}.
		var s string
		if json.Unmarshal(env.Error, &s) == nil && strings.TrimSpace(s) != "" {
			return s
		}
	}
	if msg := PlainText(body, maxRejectedMessage); msg != "" {
		return msg
	}
	return "status 400"
}

// envelope is the error object of a provider's error body: Anthropic's
// {"type":"error","error":{"type":"not_found_error","message":"..."}} or
// OpenAI's {"error":{"message":"...","type":"invalid_request_error",
// "param":"input","code":null}}.
type envelope chat.UpstreamErrorBody

// parseEnvelope reads body's error object; false when body has none.
func parseEnvelope(body []byte) (envelope, bool) {
	var outer chat.UpstreamError
	var e envelope
	if json.Unmarshal(body, &outer) != nil || len(outer.Error) == 0 || json.Unmarshal(outer.Error, &e) != nil {
		return envelope{}, false
	}
	return e, true
}

// str is a JSON string's value, "" for null, a number or anything else.
func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// modelNotFound reports whether an OpenAI error says the request's own
// model, which the gateway sets from the route, does not exist: code
// model_not_found with no param or param "model" (one with another param,
// such as tools[0].model, is about a model the client named inside its
// request).
func (e envelope) modelNotFound() bool {
	param := str(e.Param)
	return str(e.Code) == "model_not_found" && (param == "" || param == "model")
}

// namesModel reports whether an OpenAI error is about the request's own
// model: modelNotFound, or any error whose param is "model" ("This is not
// a chat model ...").
func (e envelope) namesModel() bool {
	return e.modelNotFound() || str(e.Param) == "model"
}

// notFoundIsRequests reports whether a 404's body says that something the
// request named is missing, rather than the route's model or the URL the
// gateway called. It goes by the fields and opening words each API uses:
//
//   - Anthropic names a missing model "model: <name>", and a missing path
//     "Not Found"; any other not_found_error names an object of the
//     request ("File not found: file_011...").
//   - OpenAI names a missing model with code model_not_found or param
//     "model", and a missing path "Invalid URL (POST /v1/...)"; an error
//     that names another param ("input" for an item_reference), or an
//     invalid_request_error that names none ("Conversation with id
//     'conv_...' not found."), is about an object of the request. Other
//     errors without a param (compatible servers' not_found_error or
//     api_error for their models) say nothing of the request and stay the
//     operator's.
//
// A body that is not the API's error envelope (an HTML page, nothing)
// comes from a wrong base_url: the operator's.
func notFoundIsRequests(api llm.Proto, body []byte) bool {
	e, ok := parseEnvelope(body)
	if !ok {
		return false
	}
	msg := strings.TrimSpace(e.Message)
	lower := strings.ToLower(msg)
	if msg == "" || strings.TrimRight(lower, ".") == "not found" {
		return false
	}
	if api == llm.ProtoMessages {
		return e.Type == "not_found_error" && !strings.HasPrefix(lower, "model:")
	}
	switch {
	case e.namesModel():
		return false
	case str(e.Param) != "":
		return true
	case e.Type != "invalid_request_error":
		return false
	}
	return !strings.HasPrefix(lower, "invalid url") && !strings.HasPrefix(lower, "the model ")
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
