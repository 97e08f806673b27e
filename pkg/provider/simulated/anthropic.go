package simulated

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/anthropic"
	"github.com/buzzgate/buzzgate/pkg/sse"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// simulatedURL is the base URL of an Anthropic-protocol simulated provider:
// requests never leave the process (the transport below answers them), so
// no host is ever resolved.
const simulatedURL = "http://simulated.invalid"

// newAnthropic returns the api: anthropic adapter wired to an in-process
// transport that answers as Anthropic's Messages API would: the request is
// translated to a Messages body by the adapter, answered with a Messages
// event stream, and that stream is decoded back into chunks by the adapter,
// so `make run` exercises the whole translation with no network. This is the
// one place an adapter package uses another: the simulated provider stands
// in for a real Anthropic upstream, and the point is to run the real
// adapter against it.
func newAnthropic(name string, cfg catalog.Simulated) llm.Provider {
	hc := &http.Client{Transport: &messagesTransport{name: name, cfg: cfg}}
	return anthropic.New(name, simulatedURL, "", hc,
		anthropic.WithClock(func() time.Time { return time.Unix(created, 0) }))
}

// messagesTransport serves POST /v1/messages (and
// /v1/messages/count_tokens: countTokensResponse) in process.
type messagesTransport struct {
	name string
	cfg  catalog.Simulated
}

func (t *messagesTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	switch t.cfg.Fail {
	case "":
	case "error":
		if err := sleep(ctx, nil, t.cfg.FirstTokenLatency.D()); err != nil {
			return nil, err
		}
		return errorResponse(req, 529, "simulated upstream overloaded"), nil
	case "throttle":
		r := errorResponse(req, http.StatusTooManyRequests, "simulated rate limit")
		r.Header.Set("Retry-After", "1")
		return r, nil
	case "reject":
		return errorResponse(req, http.StatusBadRequest, "simulated rejection"), nil
	case "hang":
		<-ctx.Done()
		return nil, ctx.Err()
	default:
		return errorResponse(req, http.StatusInternalServerError,
			fmt.Sprintf("simulated provider %s: unknown fail mode %q", t.name, t.cfg.Fail)), nil
	}
	if req.URL.Path == messages.PathCountTokens && req.Method == http.MethodPost {
		return countTokensResponse(req, body), nil
	}
	if req.URL.Path != messages.PathMessages || req.Method != http.MethodPost {
		return errorResponse(req, http.StatusNotFound, "not found"), nil
	}
	m, err := parseMessages(body)
	if err != nil {
		return errorResponse(req, http.StatusBadRequest, "request body is not a valid messages request"), nil
	}
	a, seed := newAnswer(ctx, t.name, t.cfg, m.lastUser, m.contentBytes)
	eb := &eventBody{answer: a, id: fmt.Sprintf("msg_sim_%016x", seed), model: m.model}
	r := newResponse(req, http.StatusOK, "text/event-stream", eb)
	r.ContentLength = -1
	return r, nil
}

// errorResponse is Anthropic's error envelope, of the error type Anthropic
// gives status.
func errorResponse(req *http.Request, status int, msg string) *http.Response {
	b, _ := json.Marshal(messages.Error{Type: messages.TypeError, Error: messages.ErrorBody{Type: messages.ErrorType(status), Message: msg}})
	return jsonResponse(req, status, b)
}

// jsonResponse is an answer of status whose body is b, JSON.
func jsonResponse(req *http.Request, status int, b []byte) *http.Response {
	r := newResponse(req, status, "application/json", io.NopCloser(bytes.NewReader(b)))
	r.ContentLength = int64(len(b))
	return r
}

// newResponse is an HTTP/1.1 answer to req of status, whose body of
// contentType is body.
func newResponse(req *http.Request, status int, contentType string, body io.ReadCloser) *http.Response {
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {contentType}},
		Body:    body,
		Request: req,
	}
}

// messagesRequest is what is read of a Messages request.
type messagesRequest struct {
	model        string
	lastUser     string
	contentBytes int
}

// parseMessages reads the text of a Messages request: the system prompt and
// the text blocks of each turn. The last user turn's text blocks seed the
// answer, as the last user message does for the OpenAI protocol, so a
// conversation gets the same words on either protocol.
func parseMessages(body []byte) (messagesRequest, error) {
	var w messages.Request
	if err := messages.Unmarshal(body, &w); err != nil {
		return messagesRequest{}, err
	}
	r := messagesRequest{model: w.Model, contentBytes: len(w.System.Text)}
	for _, m := range w.Messages {
		var text []byte
		hasText := false
		for _, b := range m.Content.Blocks {
			if b.Type == messages.BlockText {
				text = append(text, b.Text...)
				hasText = true
			}
		}
		r.contentBytes += len(text)
		if m.Role == messages.RoleUser && hasText {
			r.lastUser = string(text)
		}
	}
	return r, nil
}

// eventBody is the Messages event stream of one answer, made event by event
// as it is read: each wait happens in the Read that needs the next event.
type eventBody struct {
	*answer
	id, model string

	// step is the next event: 0 message_start, 1 content_block_start,
	// 2..words+1 the deltas, then content_block_stop, message_delta,
	// message_stop.
	step int
	buf  bytes.Buffer
}

func (b *eventBody) Read(p []byte) (int, error) {
	for b.buf.Len() == 0 {
		if b.closed() {
			return 0, ErrClosed
		}
		if err := b.ctx.Err(); err != nil {
			return 0, err
		}
		if err := b.next(); err != nil {
			return 0, err
		}
	}
	return b.buf.Read(p)
}

// next makes the next event, after its wait, into buf.
func (b *eventBody) next() error {
	words := b.cfg.Words // New has applied the default and the cap
	var name string
	var data any
	switch s := b.step; {
	case s == 0:
		name = messages.EventMessageStart
		input, output := int64(b.promptTokens), int64(1)
		data = messages.MessageStart{Type: name, Message: messages.Message{
			ID: b.id, Type: messages.TypeMessage, Role: messages.RoleAssistant, Model: b.model, Content: []messages.ContentBlock{},
			Usage: &messages.Usage{InputTokens: &input, OutputTokens: &output}}}
	case s == 1:
		name = messages.EventContentBlockStart
		empty := ""
		data = messages.ContentBlockStart{Type: name, ContentBlock: messages.ContentBlock{Type: messages.BlockText, Text: &empty}}
	case s <= words+1:
		text, err := b.word()
		if err != nil {
			return err
		}
		name = messages.EventContentBlockDelta
		data = messages.ContentBlockDelta{Type: name, Delta: messages.Delta{Type: messages.DeltaText, Text: &text}}
	case s == words+2:
		name = messages.EventContentBlockStop
		data = messages.ContentBlockStop{Type: name}
	case s == words+3:
		name = messages.EventMessageDelta
		stop, output := messages.StopEndTurn, int64(words)
		data = messages.MessageDelta{Type: name, Delta: messages.StopDelta{StopReason: &stop},
			Usage: &messages.Usage{OutputTokens: &output}}
	case s == words+4:
		name = messages.EventMessageStop
		data = messages.MessageStop{Type: name}
	default:
		return io.EOF
	}
	b.step++
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return sse.WriteEvent(&b.buf, name, raw)
}
