package clientapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
	chatwire "github.com/buzzgate/buzzgate/pkg/wire/chat"
	messageswire "github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// errorKind is how one error code is shown over HTTP: the one table that maps
// the domain's codes to statuses and OpenAI error types.
type errorKind struct {
	status int
	typ    string
}

var errorKinds = map[llm.Code]errorKind{
	llm.CodeInvalidRequest:      {http.StatusBadRequest, "invalid_request_error"},
	llm.CodeProviderRejected:    {http.StatusBadRequest, "invalid_request_error"},
	llm.CodeInvalidAPIKey:       {http.StatusUnauthorized, "authentication_error"},
	llm.CodeInsufficientBalance: {http.StatusPaymentRequired, "insufficient_quota"},
	llm.CodeKeyLimitReached:     {http.StatusPaymentRequired, "insufficient_quota"},
	llm.CodeBudgetExceeded:      {http.StatusPaymentRequired, "insufficient_quota"},
	llm.CodeModelNotFound:       {http.StatusNotFound, "not_found_error"},
	llm.CodeNotFound:            {http.StatusNotFound, "not_found_error"},
	llm.CodeMethodNotAllowed:    {http.StatusMethodNotAllowed, "invalid_request_error"},
	llm.CodeIdempotencyConflict: {http.StatusConflict, "idempotency_error"},
	llm.CodeReplayUnavailable:   {http.StatusConflict, "idempotency_error"},
	llm.CodeInProgress:          {http.StatusConflict, "idempotency_error"},
	llm.CodeRequestTooLarge:     {http.StatusRequestEntityTooLarge, "invalid_request_error"},
	llm.CodeBodyTimeout:         {http.StatusRequestTimeout, "invalid_request_error"},
	llm.CodeCapacity:            {http.StatusTooManyRequests, "rate_limit_error"},
	llm.CodeRateLimited:         {http.StatusTooManyRequests, "rate_limit_error"},
	llm.CodeUnavailableRoute:    {http.StatusTooManyRequests, "rate_limit_error"},
	llm.CodeAllProvidersFailed:  {http.StatusBadGateway, "upstream_error"},
	llm.CodeNoLiveProvider:      {http.StatusServiceUnavailable, "service_unavailable"},
	llm.CodeStoreUnavailable:    {http.StatusServiceUnavailable, "idempotency_error"},
	llm.CodeBillingUnavailable:  {http.StatusServiceUnavailable, "service_unavailable"},
	llm.CodeRequestTimeout:      {http.StatusGatewayTimeout, "timeout_error"},
	llm.CodeInternal:            {http.StatusInternalServerError, "server_error"},
}

func kindOf(code llm.Code) errorKind {
	if k, ok := errorKinds[code]; ok {
		return k
	}
	return errorKinds[llm.CodeInternal]
}

// Envelope is e as the error of the OpenAI error envelope: the gateway's
// code always, param null when e names none.
func Envelope(e *llm.Error) chatwire.ErrorBody {
	code := string(e.Code)
	o := chatwire.ErrorBody{Message: e.Message, Type: kindOf(e.Code).typ, Code: &code}
	if e.Param != "" {
		p := e.Param
		o.Param = &p
	}
	return o
}

// WriteError sends err as the OpenAI error envelope with its status. An error
// that is not an *llm.Error is internal: its text stays in the logs.
func WriteError(w http.ResponseWriter, err error) int {
	e := llm.AsError(err)
	status := errorHead(w, err, e)
	body, _ := json.Marshal(chatwire.Error{Error: Envelope(e)})
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
	return status
}

// errorHead sets the headers of error e (found in err's chain) on w, with
// those a gateway.HeaderError in err's chain adds, (and the recorder's
// code) and returns its status, writing nothing: every API's envelope goes
// out with them.
func errorHead(w http.ResponseWriter, err error, e *llm.Error) int {
	if rec, ok := w.(*Recorder); ok {
		rec.Code = e.Code
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	if he := (*gateway.HeaderError)(nil); errors.As(err, &he) {
		for k, v := range he.Header {
			h.Set(k, v)
		}
	}
	switch e.Code {
	case llm.CodeCapacity, llm.CodeRateLimited:
		h.Set("X-Gateway-Admission-Refused", "true")
	case llm.CodeIdempotencyConflict, llm.CodeReplayUnavailable:
		// The OpenAI and Anthropic SDKs retry a 409 by default; these can
		// never succeed with the same key.
		h.Set("X-Should-Retry", "false")
	}
	return kindOf(e.Code).status
}

// anthropicErrorType is Anthropic's error type for an HTTP status; 503,
// which Anthropic does not use, is its 529 overloaded_error.
func anthropicErrorType(status int) string {
	if status == http.StatusServiceUnavailable {
		return messageswire.ErrorType(529)
	}
	return messageswire.ErrorType(status)
}

// WriteAnthropicError sends err as Anthropic's error envelope, with
// WriteError's status and headers and the gateway's code in error.code;
// request_id is the response's X-Request-Id.
func WriteAnthropicError(w http.ResponseWriter, err error) int {
	e := llm.AsError(err)
	status := errorHead(w, err, e)
	typ := anthropicErrorType(status)
	if k := kindOf(e.Code); k.typ == "idempotency_error" {
		// docs/api.md#errors gives this type to the idempotency errors on
		// every API; the Anthropic SDKs choose their exception by the status
		// (409: ConflictError), not by the type.
		typ = k.typ
	}
	body := messageswire.NewError(e, typ)
	if id := w.Header().Get("X-Request-Id"); id != "" {
		body.RequestID = &id
	}
	b, _ := json.Marshal(body)
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
	return status
}
