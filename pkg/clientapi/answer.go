package clientapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// The steps every client API's codec shares: the answer's headers, reading
// a non-streaming answer to its end and writing it whole, and reading a
// streamed one's deltas for the codecs that reshape them.

// AnswerHead is the headers of an answer served by a provider.
func AnswerHead(requestID string, req *llm.ChatRequest, ans *router.Answer, contentType string) map[string]string {
	head := map[string]string{
		"Content-Type":          contentType,
		"X-Request-Id":          requestID,
		"X-Gateway-Model":       ans.ModelID,
		"X-Gateway-Provider":    ans.Provider,
		"X-Gateway-Route-Depth": strconv.Itoa(ans.Depth),
	}
	if names := ans.DroppedFrom(req); len(names) > 0 {
		head["X-Gateway-Dropped"] = strings.Join(names, ", ")
	}
	return head
}

// Assemble reads a non-streaming answer to its end, with the ending rules
// every client API shares. When ok is false, res is the request's result (a
// failure after output started, the time limit, an unkeyed client gone)
// and nothing is to be written; otherwise end is io.EOF, or
// router.ErrIncomplete when the provider just stopped, and asm holds what
// it produced.
func Assemble(ans *router.Answer) (asm *llm.Assembler, usage llm.Usage, res gateway.Result, ok bool, end error) {
	asm = &llm.Assembler{}
	usage, res, ok, end = ReadWhole(ans, func(ch llm.Chunk) error { return asm.AddChunk(&ch) })
	return asm, usage, res, ok, end
}

// ReadWhole reads a non-streaming answer to its end, giving each chunk to
// add (an error of add ends it), with Assemble's ending rules. (add takes
// the chunk by value: a pointer given to an unknown function would move
// every chunk to the heap.)
func ReadWhole(ans *router.Answer, add func(ch llm.Chunk) error) (usage llm.Usage, res gateway.Result, ok bool, end error) {
	for {
		ch, err := ans.Next()
		if err != nil {
			end = err
			break
		}
		if err := add(ch); err != nil {
			end = err
			break
		}
	}
	usage = ans.Usage()
	res, ok = endOf(ans, usage, end)
	return usage, res, ok, end
}

// endOf is the ending rule of a non-streaming answer read to its end: ok
// when it is to be written (end is io.EOF, or router.ErrIncomplete when the
// provider just stopped), else res is the request's result (a failure after
// output started, the time limit, an unkeyed client gone).
func endOf(ans *router.Answer, usage llm.Usage, end error) (res gateway.Result, ok bool) {
	switch {
	case end == io.EOF, errors.Is(end, router.ErrIncomplete):
		return gateway.Result{}, true
	case errors.Is(end, context.DeadlineExceeded):
		res.Err = &llm.Error{Code: llm.CodeRequestTimeout, Message: "the request reached its time limit", Cause: end}
	case errors.Is(end, context.Canceled):
		res.Err = end
	default:
		res.Err = &llm.Error{Code: llm.CodeAllProvidersFailed, Message: "provider " + ans.Provider + " failed after its answer had started", Cause: end}
	}
	res.Usage = usage
	return res, false
}

// WriteWhole writes an assembled answer's body (a JSON document, to which
// it adds the newline) after pricing it; kept, when not nil, runs between
// the price and the body. end is assemble's: an answer that just stopped is
// written and its result carries the end.
func WriteWhole(out gateway.Emitter, head map[string]string, usage llm.Usage, body []byte, end error, kept func()) gateway.Result {
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

// CutShort is the error a stream ends with when its provider failed, or the
// request reached its time limit, after the answer had started.
func CutShort(provider string, end error) *llm.Error {
	if errors.Is(end, context.DeadlineExceeded) {
		return &llm.Error{Code: llm.CodeRequestTimeout, Message: "the request reached its time limit; the answer is cut short"}
	}
	return &llm.Error{Code: llm.CodeStreamInterrupted, Message: "provider " + provider + " failed after its answer had started; the answer is cut short"}
}

// DeltaWriter takes the deltas of a streamed answer's first choice, as a
// codec that reshapes them into its own events writes them.
type DeltaWriter interface {
	// Text and Refusal take the content and refusal text.
	Text(s string)
	Refusal(s string)
	// Reasoning takes a reasoning model's thinking.
	Reasoning(s string)
	// StopSequence takes the stop sequence that ended the answer, when
	// the upstream says.
	StopSequence(s string)
	// ToolCall takes a piece of the tool call at index.
	ToolCall(index int, id, name, args string)
	// Err is the Emitter's error: the client is gone.
	Err() error
}

// RelayDeltas reads a streamed answer's chunks into w until the answer ends
// or w fails. finish is the first finish_reason of the first choice and end
// how the answer ended. When gone is true, the client is gone (w failed, or
// an unkeyed client cancelled) and res is the request's result, with
// nothing more to write.
func RelayDeltas(ans *router.Answer, w DeltaWriter) (finish string, usage llm.Usage, res gateway.Result, gone bool, end error) {
	funcs := llm.DeltaFuncs{Text: w.Text, Refusal: w.Refusal, Reasoning: w.Reasoning, StopSequence: w.StopSequence, ToolCall: w.ToolCall}
	for w.Err() == nil {
		ch, err := ans.Next()
		if err != nil {
			end = err
			break
		}
		if f := ch.FirstChoice(&funcs); f != "" && finish == "" {
			finish = f
		}
	}
	usage = ans.Usage()
	if err := w.Err(); err != nil {
		return finish, usage, gateway.Result{Usage: usage, Answered: true, Err: err}, true, end
	}
	if errors.Is(end, context.Canceled) {
		return finish, usage, gateway.Result{Usage: usage, Answered: true, Err: end}, true, end // an unkeyed client is gone
	}
	return finish, usage, gateway.Result{}, false, end
}

// AssembleChoice is Assemble for the APIs that reshape the answer: the
// first choice of the assembled chat.completion. When ok is false, res is
// the request's result, with nothing written.
func AssembleChoice(ans *router.Answer) (ch *chat.Choice, usage llm.Usage, res gateway.Result, ok bool, end error) {
	asm, usage, res, ok, end := Assemble(ans)
	if !ok {
		return nil, usage, res, false, end
	}
	a, err := asm.Answer(usage)
	if err == nil && len(a.Choices) == 0 {
		err = llm.AsError(errors.New("assembled answer unreadable"))
	}
	if err != nil {
		return nil, usage, gateway.Result{Usage: usage, Err: err}, false, end
	}
	return &a.Choices[0], usage, res, true, end
}

// EventSender sends the events a codec makes of an answer to its Emitter,
// each value encoded as an event's data. The first failure (the client is
// gone) is kept, and the events after it are dropped.
type EventSender struct {
	Out gateway.Emitter
	err error
}

// Send emits the event name with v, encoded, as its data.
func (s *EventSender) Send(name string, v any) {
	if s.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.err = err
		return
	}
	s.err = s.Out.Event(idempotency.Event{Name: name, Data: b}, true)
}

// Err is the first failure of Send: nil while the client reads on.
func (s *EventSender) Err() error { return s.err }
