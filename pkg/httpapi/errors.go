package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
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
	llm.CodeModelNotFound:       {http.StatusNotFound, "not_found_error"},
	llm.CodeNotFound:            {http.StatusNotFound, "not_found_error"},
	llm.CodeMethodNotAllowed:    {http.StatusMethodNotAllowed, "invalid_request_error"},
	llm.CodeIdempotencyConflict: {http.StatusConflict, "idempotency_error"},
	llm.CodeReplayUnavailable:   {http.StatusConflict, "idempotency_error"},
	llm.CodeInProgress:          {http.StatusConflict, "idempotency_error"},
	llm.CodeRequestTooLarge:     {http.StatusRequestEntityTooLarge, "invalid_request_error"},
	llm.CodeBodyTimeout:         {http.StatusRequestTimeout, "invalid_request_error"},
	llm.CodeCapacity:            {http.StatusTooManyRequests, "rate_limit_error"},
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

// errorBody is the OpenAI error envelope; param is always present.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}

func envelope(e *llm.Error) errorObject {
	o := errorObject{Message: e.Message, Type: kindOf(e.Code).typ, Code: string(e.Code)}
	if e.Param != "" {
		p := e.Param
		o.Param = &p
	}
	return o
}

// writeError sends err as the OpenAI error envelope with its status. An error
// that is not an *llm.Error is internal: its text stays in the logs.
func writeError(w http.ResponseWriter, err error) int {
	e := llm.AsError(err)
	k := kindOf(e.Code)
	if rec, ok := w.(*recorder); ok {
		rec.code = e.Code
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	switch e.Code {
	case llm.CodeCapacity:
		h.Set("X-Gateway-Admission-Refused", "true")
	case llm.CodeIdempotencyConflict, llm.CodeReplayUnavailable:
		// The OpenAI and Anthropic SDKs retry a 409 by default; these can
		// never succeed with the same key.
		h.Set("X-Should-Retry", "false")
	}
	body, _ := json.Marshal(errorBody{Error: envelope(e)})
	w.WriteHeader(k.status)
	w.Write(append(body, '\n'))
	return k.status
}
