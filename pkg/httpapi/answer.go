package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// The steps every client API's codec shares: the answer's headers, reading
// a non-streaming answer to its end, and writing it whole.

// answerHead is the headers of an answer served by a provider.
func answerHead(requestID string, ans *router.Answer, contentType string) map[string]string {
	return map[string]string{
		"Content-Type":          contentType,
		"X-Request-Id":          requestID,
		"X-Gateway-Provider":    ans.Provider,
		"X-Gateway-Route-Depth": strconv.Itoa(ans.Depth),
	}
}

// assemble reads a non-streaming answer to its end, with the ending rules
// every client API shares. When ok is false, res is the request's result (a
// failure after output started, the time limit, an unkeyed client gone)
// and nothing is to be written; otherwise end is io.EOF, or
// router.ErrIncomplete when the provider just stopped, and asm holds what
// it produced.
func assemble(ans *router.Answer) (asm *llm.Assembler, usage llm.Usage, res gateway.Result, ok bool, end error) {
	asm = &llm.Assembler{}
	for {
		ch, err := ans.Next()
		if err != nil {
			end = err
			break
		}
		if err := asm.AddChunk(&ch); err != nil {
			end = err
			break
		}
	}
	usage = ans.Usage()
	switch {
	case end == io.EOF, errors.Is(end, router.ErrIncomplete):
		return asm, usage, gateway.Result{}, true, end
	case errors.Is(end, context.DeadlineExceeded):
		res.Err = &llm.Error{Code: llm.CodeRequestTimeout, Message: "the request reached its time limit", Cause: end}
	case errors.Is(end, context.Canceled):
		res.Err = end
	default:
		res.Err = &llm.Error{Code: llm.CodeAllProvidersFailed, Message: "provider " + ans.Provider + " failed after its answer had started", Cause: end}
	}
	res.Usage = usage
	return asm, usage, res, false, end
}

// writeWhole writes an assembled answer's body (a JSON document, to which
// it adds the newline) after pricing it; kept, when not nil, runs between
// the price and the body. end is assemble's: an answer that just stopped is
// written and its result carries the end.
func writeWhole(out gateway.Emitter, head map[string]string, usage llm.Usage, body []byte, end error, kept func()) gateway.Result {
	body = append(body, '\n')
	out.Start(http.StatusOK, head, false)
	out.Price(usage)
	if kept != nil {
		kept()
	}
	out.Body(body)
	if end != io.EOF {
		return gateway.Result{Usage: usage, Answered: true, Err: end}
	}
	return gateway.Result{Usage: usage, Answered: true}
}
