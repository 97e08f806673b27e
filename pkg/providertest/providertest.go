// Package providertest is a scripted fake upstream for tests: a real HTTP
// server on 127.0.0.1 whose every answer is scripted, with call counters. New
// makes one that speaks OpenAI Chat Completions (described below);
// NewAnthropic one that speaks the Anthropic Messages API and NewResponses
// one that speaks the OpenAI Responses API, with the same scripting knobs.
//
// It serves POST /v1/chat/completions only. Each call is answered by, in order
// of precedence, the handler set with SetHandler, the next Response queued
// with Script, or the default Response (SetDefault). The zero Response is a
// 200 answer whose text is "Hello world", streamed as "Hello" and " world"
// when the request asks for "stream": true.
//
// Answers follow the OpenAI Chat Completions wire format and are
// deterministic: the id of call n is "chatcmpl-<n>", created is always
// Created, and the model is the request's "model".
package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/internal/wait"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
	"github.com/buzzgate/buzzgate/pkg/wire/converse"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// Created is the "created" timestamp of every answer, fixed so that outputs
// are deterministic.
const Created int64 = 1700000000

// PromptTokens is the prompt_tokens reported when a Response has no Usage.
const PromptTokens = 10

// Path is the only path served.
const Path = chat.PathCompletions

// midStreamError is the event sent by CutError: the shape OpenAI uses when a
// stream fails after it started. It is written out because it has no
// "param", which chat.Error always writes.
const midStreamError = `{"error":{"message":"scripted mid-stream error","type":"server_error","code":"server_error"}}`

// Request is one call as the server received it.
type Request struct {
	Header http.Header
	// Path is the request's path, decoded (a Bedrock call's names its
	// model: /model/<id>/invoke-with-response-stream).
	Path string
	Body []byte
	// JSON is Body decoded, or nil if Body is not a JSON object.
	JSON map[string]any
}

// Response scripts one answer. The zero value is a 200 "Hello world" answer.
//
// What is sent, in order of precedence: Hang, Reset, then Body or a non-200
// Status, then a generated chat completion (streamed when the request has
// "stream": true). The content of a generated answer is ToolCall if set, else
// Refusal if set, else Text (plus PadBytes).
type Response struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Body, if non-empty, is sent verbatim (as application/json unless Header
	// says otherwise) whatever the Status, which also scripts malformed 200
	// answers. For a non-200 Status, an empty Body means an OpenAI error
	// envelope: {"error":{"message":"scripted <status>","type":...,"code":null,"param":null}}.
	Body string
	// Header holds extra response headers, e.g. "retry-after": "2". They are
	// set last, so they may override Content-Type.
	Header map[string]string
	// HeaderDelay is waited before anything else happens (also before a
	// Reset), so before the status line is written.
	HeaderDelay time.Duration
	// Hang reads the request and never answers; the handler returns only when
	// the client goes away or the server closes.
	Hang bool
	// Reset resets the TCP connection without any answer (RST, not FIN).
	Reset bool

	// Text holds the content pieces, one chunk each. nil means
	// []string{"Hello", " world"}; a non-nil empty slice is an empty answer.
	Text []string
	// Refusal, if set, is sent as a refusal (one delta.refusal chunk; the
	// message's refusal field when not streaming) instead of Text.
	Refusal string
	// ToolCall, if set, is sent as a tool call instead of text.
	ToolCall *ToolCall
	// Model, if set, is reported instead of the request's model (providers
	// often answer with a dated model name).
	Model string

	// FirstChunkDelay is waited after the headers (and the role chunk, sent
	// with them) before the first content chunk.
	FirstChunkDelay time.Duration
	// ChunkDelay is waited between content chunks. When not streaming,
	// FirstChunkDelay and every ChunkDelay add up before the answer.
	ChunkDelay time.Duration
	// Sent, if set, is called with i once streamed content chunk i was
	// written and flushed.
	Sent func(i int)
	// FinishReason defaults to "stop" ("tool_calls" when ToolCall is set).
	FinishReason string
	// Usage nil means computed: PromptTokens, and one completion token per
	// content chunk.
	Usage *Usage
	// NoUsage omits the usage chunk even when the request asked for it with
	// stream_options.include_usage. A non-streaming answer always has usage.
	NoUsage bool
	// NoRoleChunk omits the initial {"role":"assistant","content":""} chunk.
	NoRoleChunk bool
	// Cut fails the answer part way; see Cut.
	Cut *Cut
	// NoDone ends the stream normally (finish_reason, usage) but without
	// "data: [DONE]".
	NoDone bool
	// PadBytes, if > 0, adds a content chunk of that many 'x' bytes after
	// Text, for large answers. Text answers only.
	PadBytes int
	// NonStreaming answers a "stream": true request with a plain
	// application/json chat.completion anyway.
	NonStreaming bool
	// Responses scripts what only a Responses answer has (NewResponses).
	Responses *ResponsesAnswer
}

// ToolCall is a function call the assistant makes. When streamed, it takes
// three chunks, like OpenAI's: the call's index 0, id, type and name with
// empty arguments, then the arguments in two halves. An empty ID becomes
// "call_<call number>".
type ToolCall struct{ ID, Name, Arguments string }

// Usage overrides the token counts reported; total_tokens is their sum.
type Usage struct{ PromptTokens, CompletionTokens int }

// Cut fails an answer part way.
//
// Streaming, After content chunks are sent (0: right after the role chunk),
// then the delay that precedes the next content chunk is waited, then the
// answer fails as How says. After at or beyond the number of content chunks
// cuts just before the finish_reason chunk.
//
// Not streaming, the headers and the first half of the JSON body are sent
// without a Content-Length (so chunked) and then the body fails as How says;
// After is ignored and CutError behaves like CutClose.
type Cut struct {
	After int
	How   CutMode
}

// CutMode is how a Cut fails.
type CutMode int

const (
	// CutClose ends the response body cleanly: no finish_reason, no [DONE].
	// The HTTP framing is complete (the terminating zero-length chunk is
	// sent and the connection stays usable), so a Go client reads the body
	// to a clean io.EOF: only the missing [DONE] tells it apart.
	CutClose CutMode = iota
	// CutReset resets the connection mid-body (RST): a Go client reading the
	// body gets a "connection reset by peer" error (syscall.ECONNRESET),
	// neither io.EOF nor io.ErrUnexpectedEOF, after the chunks sent before.
	CutReset
	// CutError sends the event
	// {"error":{"message":"scripted mid-stream error","type":"server_error","code":"server_error"}}
	// and ends the body cleanly (no [DONE]).
	CutError
	// CutStall stops sending and keeps the connection open until the client
	// goes away or the server closes: a client read blocks.
	CutStall
	// CutAbort closes the connection (FIN, not RST) in the middle of the
	// chunked body, without its terminating chunk, as a crashing proxy
	// would: a Go client reading the body gets io.ErrUnexpectedEOF.
	CutAbort
)

// Server is a running fake upstream. Its methods are safe for concurrent use.
type Server struct {
	// anthropic is true for a server made by NewAnthropic.
	anthropic bool
	// responses is true for a server made by NewResponses.
	responses bool
	// bedrock is true for a server made by NewBedrock (anthropic is too).
	bedrock bool
	path    string
	url     string
	srv     *http.Server
	served  chan struct{} // closed when Serve has returned
	// done is closed by Close, to wake handlers that wait (delays, Hang,
	// CutStall) so that Close never waits on a hung request.
	done      chan struct{}
	closeOnce sync.Once
	// handlers counts running calls, so that Close returns only after they
	// did: no goroutine of ours outlives the test.
	handlers sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	queue   []Response
	def     Response
	handler func(call int, req Request) Response
	calls   int
	reqs    []recorded
	counts  countTokens
}

// recorded is what is kept of a request; Request values are built from it on
// demand so that every caller gets its own copy.
type recorded struct {
	header http.Header
	path   string
	body   []byte
}

// New starts a server on 127.0.0.1 with a free port. It is closed when the
// test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, chatProtocol)
}

// protocol is the API a server speaks.
type protocol int

const (
	chatProtocol protocol = iota
	messagesProtocol
	responsesProtocol
	bedrockProtocol
)

func start(tb testing.TB, p protocol) *Server {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("providertest: listen: %v", err)
	}
	s := &Server{
		anthropic: p == messagesProtocol || p == bedrockProtocol,
		responses: p == responsesProtocol,
		bedrock:   p == bedrockProtocol,
		path:      Path,
		url:       "http://" + ln.Addr().String() + "/v1",
		served:    make(chan struct{}),
		done:      make(chan struct{}),
	}
	switch p {
	case messagesProtocol:
		s.path, s.url = AnthropicPath, "http://"+ln.Addr().String()
	case responsesProtocol:
		s.path = ResponsesPath
	case bedrockProtocol:
		s.path, s.url = "", "http://"+ln.Addr().String()
	}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(s.serveHTTP),
		// The scripted failures make net/http log about broken connections;
		// that is the point, not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns ErrServerClosed on Close
	}()
	tb.Cleanup(s.Close)
	return s
}

// URL is the base URL, ending in /v1 as an OpenAI base URL does:
// http://127.0.0.1:PORT/v1. For a server made by NewAnthropic it is the API
// root, http://127.0.0.1:PORT, as an Anthropic base URL is.
func (s *Server) URL() string { return s.url }

// Script queues answers: the next calls get rs in order. When the queue is
// empty, the default answer is used. A handler set with SetHandler takes
// precedence over the queue.
func (s *Server) Script(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// SetDefault sets the answer given when the queue is empty. Initially it is
// the zero Response.
func (s *Server) SetDefault(r Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = r
}

// SetHandler makes f decide every answer, overriding the queue; nil removes
// it. call counts from 1. f may be called concurrently, and must return for
// Close to return.
func (s *Server) SetHandler(f func(call int, req Request) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = f
}

// Calls is the number of POST /v1/chat/completions (or /v1/messages, or
// /v1/responses) received so far, counted on arrival (before any delay).
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Requests returns copies of the calls received, in arrival order: call n is
// Requests()[n-1].
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = newRequest(r.header, r.body)
		out[i].Path = r.path
	}
	return out
}

// Close stops the server: it wakes every waiting handler, closes the
// listener and all connections, and waits for the handlers to return. It is
// safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true // no handler starts after this
		s.mu.Unlock()
		// Connections first: a handler woken by done returns, and were its
		// connection still open, net/http would complete the answer (an
		// empty 200 for a Hang) instead of failing it.
		_ = s.srv.Close()
		close(s.done)
		<-s.served
		s.handlers.Wait()
	})
}

func newRequest(h http.Header, body []byte) Request {
	r := Request{Header: h.Clone(), Body: bytes.Clone(body)}
	if json.Unmarshal(body, &r.JSON) != nil {
		r.JSON = nil
	}
	return r
}

// arrive counts and records a call and picks its answer. ok is false once
// the server is closing.
func (s *Server) arrive(h http.Header, path string, body []byte) (call int, resp Response, handler func(int, Request) Response, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, Response{}, nil, false
	}
	// Add under the lock that Close takes before Wait, so that no Add can
	// race with Wait.
	s.handlers.Add(1)
	s.calls++
	s.reqs = append(s.reqs, recorded{header: h.Clone(), path: path, body: body})
	if s.handler != nil {
		return s.calls, Response{}, s.handler, true
	}
	resp = s.def
	if len(s.queue) > 0 {
		resp = s.queue[0]
		s.queue = s.queue[1:]
	}
	return s.calls, resp, nil, true
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.bedrock {
		s.serveBedrock(w, r)
		return
	}
	if s.anthropic && r.URL.Path == CountTokensPath {
		s.serveCountTokens(w, r)
		return
	}
	if r.URL.Path != s.path {
		writeJSON(w, http.StatusNotFound, s.requestError(
			fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), http.StatusNotFound))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, s.requestError(
			fmt.Sprintf("Method %s not allowed", r.Method), http.StatusMethodNotAllowed))
		return
	}
	// The whole body is read before answering, as a real upstream does; this
	// also lets net/http notice a client that goes away (r.Context()).
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away mid-request: nobody to answer
	}
	call, resp, handler, ok := s.arrive(r.Header, r.URL.Path, body)
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, s.errorBody("server closing", http.StatusServiceUnavailable))
		return
	}
	defer s.handlers.Done()
	req := newRequest(r.Header, body)
	req.Path = r.URL.Path
	if handler != nil {
		resp = handler(call, req)
	}
	s.respond(r.Context(), w, call, req, resp)
}

func (s *Server) respond(ctx context.Context, w http.ResponseWriter, call int, req Request, resp Response) {
	if !s.sleep(ctx, resp.HeaderDelay) {
		return
	}
	switch {
	case resp.Hang:
		s.block(ctx)
		return
	case resp.Reset:
		reset(w)
		return
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	if s.bedrock && status == http.StatusOK && resp.Body != "" {
		s.bedrockEvents(w, resp)
		return
	}
	if resp.Body != "" || status != http.StatusOK {
		body := []byte(resp.Body)
		if len(body) == 0 {
			body = s.errorBody("scripted "+strconv.Itoa(status), status)
		}
		if s.bedrock {
			w.Header().Set("X-Amzn-Errortype", bedrockErrorType(status))
		}
		w.Header().Set("Content-Type", "application/json")
		setHeaders(w, resp.Header)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	a := newAnswer(call, req, resp)
	if s.bedrock && strings.HasSuffix(req.Path, ConverseStreamSuffix) {
		s.streamConverse(ctx, w, newAnthropicAnswer(a, resp), resp)
		return
	}
	if s.anthropic {
		s.respondAnthropic(ctx, w, a, resp)
		return
	}
	if s.responses {
		s.respondResponses(ctx, w, a, resp)
		return
	}
	if stream, _ := req.JSON["stream"].(bool); stream && !resp.NonStreaming {
		s.stream(ctx, w, a, resp)
	} else {
		s.complete(ctx, w, a, resp)
	}
}

// sleep waits d, and reports false if the client went away or the server
// closed first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	return wait.Sleep(ctx, s.done, net.ErrClosed, d) == nil
}

// block waits until the client goes away or the server closes.
func (s *Server) block(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.done:
	}
}

// sseHeader is the head of a server-sent event stream.
var sseHeader = map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}

// writeStreamHead sends the head of a streamed answer: 200, header, and
// resp's headers, which may override header's.
func writeStreamHead(w http.ResponseWriter, header map[string]string, resp Response) *http.ResponseController {
	setHeaders(w, header)
	setHeaders(w, resp.Header)
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w)
}

// startStream sends a stream's head: 200, text/event-stream and resp's
// headers. event writes one event (its name, when not empty, and its data)
// and flushes it, so that the client sees every event when it is sent
// (timing is what these tests are about).
func startStream(w http.ResponseWriter, resp Response) (event func(name string, data []byte) bool, rc *http.ResponseController) {
	rc = writeStreamHead(w, sseHeader, resp)
	return func(name string, data []byte) bool {
		var b bytes.Buffer
		b.Grow(len(data) + len(name) + 16)
		if name != "" {
			b.WriteString("event: ")
			b.WriteString(name)
			b.WriteString("\n")
		}
		b.WriteString("data: ")
		b.Write(data)
		b.WriteString("\n\n")
		if _, err := w.Write(b.Bytes()); err != nil {
			return false
		}
		return rc.Flush() == nil
	}, rc
}

// stream sends a chat.completion.chunk stream.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, a answer, resp Response) {
	event, rc := startStream(w, resp)
	send := func(data []byte) bool { return event("", data) }
	sendChunk := func(choices []chat.ChunkChoice, usage json.RawMessage) bool {
		return send(marshal(chat.Chunk{
			ID: a.id, Object: chat.ObjectChunk, Created: Created, Model: a.model,
			Choices: choices, Usage: usage,
		}))
	}
	// OpenAI sends "usage": null in every chunk but the usage one when the
	// request asked for usage.
	var nullUsage json.RawMessage
	wantUsage := includeUsage(a.req) && !resp.NoUsage
	if wantUsage {
		nullUsage = json.RawMessage("null")
	}
	choice := func(d chat.Delta, finish *string) []chat.ChunkChoice {
		return []chat.ChunkChoice{{Index: 0, Delta: d, FinishReason: finish}}
	}

	if resp.NoRoleChunk {
		if rc.Flush() != nil { // headers now, as a real upstream sends them
			return
		}
	} else if !sendChunk(choice(roleDelta(), nil), nullUsage) {
		return
	}
	if !s.pace(ctx, w, resp, len(a.deltas), func(i int) bool {
		return sendChunk(choice(a.deltas[i], nil), nullUsage)
	}, func() { send([]byte(midStreamError)) }) {
		return
	}
	if !sendChunk(choice(chat.Delta{}, &a.finish), nullUsage) {
		return
	}
	if wantUsage && !sendChunk([]chat.ChunkChoice{}, marshal(a.usage)) {
		return
	}
	if !resp.NoDone {
		send([]byte("[DONE]"))
	}
}

// pace sends a stream's n content pieces with send, waiting before each
// (resp.FirstChunkDelay before the first, resp.ChunkDelay before the
// others), and cuts the stream where resp.Cut says: on CutError after
// sendError sent the protocol's error event. It reports whether the stream
// goes on: false once it was cut, the client went away or the server
// closed.
func (s *Server) pace(ctx context.Context, w http.ResponseWriter, resp Response, n int, send func(i int) bool, sendError func()) bool {
	cutStream := func(how CutMode) {
		if how == CutError {
			sendError()
		}
		s.cut(ctx, w, how)
	}
	cut := resp.Cut
	for i := 0; i < n; i++ {
		wait := resp.ChunkDelay
		if i == 0 {
			wait = resp.FirstChunkDelay
		}
		if !s.sleep(ctx, wait) {
			return false
		}
		if cut != nil && i >= cut.After {
			cutStream(cut.How)
			return false
		}
		if !send(i) {
			return false
		}
		if resp.Sent != nil {
			resp.Sent(i)
		}
	}
	if cut != nil {
		cutStream(cut.How)
		return false
	}
	return true
}

// cut ends a response, once what was written is flushed, as how says:
// CutReset, CutStall and CutAbort act on the connection; on CutClose (and
// CutError, whose event only a stream sends) returning ends the body
// cleanly.
func (s *Server) cut(ctx context.Context, w http.ResponseWriter, how CutMode) {
	switch how {
	case CutReset:
		reset(w)
	case CutStall:
		s.block(ctx)
	case CutAbort:
		abort(w)
	}
}

// writeWhole sends a non-streamed answer's body: whole, with its
// Content-Length; or, when resp has a Cut, half of it, flushed (so chunked,
// without Content-Length), and then cut.
func (s *Server) writeWhole(ctx context.Context, w http.ResponseWriter, body []byte, resp Response) {
	w.Header().Set("Content-Type", "application/json")
	setHeaders(w, resp.Header)
	if resp.Cut == nil {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		return
	}
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body[:len(body)/2]); err != nil {
		return
	}
	if http.NewResponseController(w).Flush() != nil {
		return
	}
	s.cut(ctx, w, resp.Cut.How)
}

// generate waits as long as a non-streaming upstream takes to generate an
// answer of n pieces before it sends it whole: FirstChunkDelay, and
// ChunkDelay for each piece after the first. It reports false if the
// client went away or the server closed first.
func (s *Server) generate(ctx context.Context, resp Response, n int) bool {
	wait := resp.FirstChunkDelay
	if n > 1 {
		wait += time.Duration(n-1) * resp.ChunkDelay
	}
	return s.sleep(ctx, wait)
}

// complete sends a plain chat.completion.
func (s *Server) complete(ctx context.Context, w http.ResponseWriter, a answer, resp Response) {
	if !s.generate(ctx, resp, len(a.deltas)) {
		return
	}
	msg := chat.Message{Role: chat.RoleAssistant, Refusal: json.RawMessage("null")}
	switch {
	case a.toolCall != nil:
		msg.ToolCalls = []chat.ToolCall{{ID: a.toolCall.ID, Type: chat.ToolTypeFunction,
			Function: chat.Function{Name: a.toolCall.Name, Arguments: a.toolCall.Arguments}}}
	case resp.Refusal != "":
		msg.Refusal = marshal(resp.Refusal)
	default:
		content := strings.Join(a.pieces, "")
		msg.Content = &content
	}
	body := marshal(chat.Completion{
		ID: a.id, Object: chat.ObjectCompletion, Created: Created, Model: a.model,
		Choices: []chat.Choice{{Index: 0, Message: msg, FinishReason: &a.finish}},
		Usage:   marshal(a.usage),
	})
	s.writeWhole(ctx, w, body, resp)
}

// reset takes the connection from net/http and closes it with SO_LINGER 0,
// which makes the kernel send RST instead of FIN.
func reset(w http.ResponseWriter) {
	conn := hijack(w)
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// abort takes the connection from net/http and closes it normally (FIN), so
// that a chunked body lacks its terminating chunk.
func abort(w http.ResponseWriter) {
	_ = hijack(w).Close()
}

// hijack takes the connection from net/http. Callers must have flushed
// what they wrote: Hijack drops the response's own buffer. (It must not flush
// here: before any write, that would send a 200 status line.)
func hijack(w http.ResponseWriter) net.Conn {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Cannot happen on HTTP/1.1; aborting the handler still breaks the
		// connection, if less precisely.
		panic(http.ErrAbortHandler)
	}
	_ = buf.Flush()
	return conn
}

func setHeaders(w http.ResponseWriter, h map[string]string) {
	for k, v := range h {
		w.Header().Set(k, v)
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errorBody is the error envelope of the server's API.
func (s *Server) errorBody(msg string, status int) []byte {
	if s.bedrock {
		return marshal(converse.Error{Message: msg})
	}
	if !s.anthropic {
		return errorEnvelope(msg, errorType(status))
	}
	return marshal(messages.Error{Type: messages.TypeError, Error: messages.ErrorBody{Type: messages.ErrorType(status), Message: msg}})
}

// requestError is the envelope for a request to a wrong path or method:
// OpenAI calls those invalid_request_error.
func (s *Server) requestError(msg string, status int) []byte {
	if !s.anthropic {
		return errorEnvelope(msg, chat.ErrorInvalidRequest)
	}
	return s.errorBody(msg, status)
}

// errorType is the OpenAI error type for a status.
func errorType(status int) string {
	switch {
	case status >= 500:
		return chat.ErrorServer
	case status == http.StatusUnauthorized:
		return chat.ErrorAuthentication
	case status == http.StatusForbidden:
		return chat.ErrorPermission
	case status == http.StatusNotFound:
		return chat.ErrorNotFound
	case status == http.StatusTooManyRequests:
		return chat.ErrorRateLimit
	}
	return chat.ErrorInvalidRequest
}

func errorEnvelope(msg, typ string) []byte {
	return marshal(chat.Error{Error: chat.ErrorBody{Message: msg, Type: typ}})
}

func includeUsage(req Request) bool {
	opts, _ := req.JSON["stream_options"].(map[string]any)
	v, _ := opts["include_usage"].(bool)
	return v
}

// answer is a generated answer, common to streaming and not.
type answer struct {
	req   Request
	id    string
	model string
	// pieces are the content's pieces: the text's (and the padding), the
	// refusal, or a tool call's arguments in two halves.
	pieces   []string
	deltas   []chat.Delta // the content chunks, in Chat Completions' terms
	toolCall *ToolCall
	finish   string
	usage    chat.Usage
}

func newAnswer(call int, req Request, resp Response) answer {
	a := answer{req: req, id: "chatcmpl-" + strconv.Itoa(call), finish: resp.FinishReason}
	a.model, _ = req.JSON["model"].(string)
	if resp.Model != "" {
		a.model = resp.Model
	}
	switch {
	case resp.ToolCall != nil:
		tc := *resp.ToolCall
		if tc.ID == "" {
			tc.ID = "call_" + strconv.Itoa(call)
		}
		a.toolCall = &tc
		first, second := splitHalf(tc.Arguments)
		a.pieces = []string{first, second}
		a.deltas = []chat.Delta{
			{ToolCalls: []chat.DeltaToolCall{{Index: 0, ID: tc.ID, Type: chat.ToolTypeFunction, Function: functionPiece(tc.Name, "")}}},
			{ToolCalls: []chat.DeltaToolCall{{Index: 0, Function: functionPiece("", first)}}},
			{ToolCalls: []chat.DeltaToolCall{{Index: 0, Function: functionPiece("", second)}}},
		}
		if a.finish == "" {
			a.finish = chat.FinishToolCalls
		}
	case resp.Refusal != "":
		a.pieces = []string{resp.Refusal}
		a.deltas = []chat.Delta{{Refusal: &resp.Refusal}}
	default:
		a.pieces = slices.Clone(resp.Text)
		if resp.Text == nil {
			a.pieces = []string{"Hello", " world"}
		}
		if resp.PadBytes > 0 {
			a.pieces = append(a.pieces, strings.Repeat("x", resp.PadBytes))
		}
		for i := range a.pieces {
			a.deltas = append(a.deltas, chat.Delta{Content: &a.pieces[i]})
		}
	}
	if a.finish == "" {
		a.finish = chat.FinishStop
	}
	u := Usage{PromptTokens: PromptTokens, CompletionTokens: len(a.deltas)}
	if resp.Usage != nil {
		u = *resp.Usage
	}
	a.usage = chat.Usage{PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens),
		TotalTokens: int64(u.PromptTokens + u.CompletionTokens)}
	return a
}

// splitHalf splits s in two at a rune boundary near its middle.
func splitHalf(s string) (string, string) {
	i := len(s) / 2
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], s[i:]
}

// functionPiece is a tool call piece's function as OpenAI streams it: the name
// when there is one, the arguments always (empty in the first piece).
func functionPiece(name, args string) *chat.DeltaFunction {
	f := &chat.DeltaFunction{Arguments: &args}
	if name != "" {
		f.Name = &name
	}
	return f
}

func roleDelta() chat.Delta {
	empty := ""
	return chat.Delta{Role: chat.RoleAssistant, Content: &empty}
}

// marshal encodes compactly, without net/http-style HTML escaping: OpenAI
// sends <, > and & as they are.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("providertest: " + err.Error()) // our own types always encode
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
