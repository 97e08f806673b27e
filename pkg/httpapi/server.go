// Package httpapi is buzzgate's HTTP front: the http.Handler that
// authenticates, admits, decodes and routes chat completions, writes answers
// and streams (SSE), and maps every error to the OpenAI envelope. It is plain
// net/http, so the same handler serves a local port and, wrapped at the edge,
// Lambda.
package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// Server is the gateway's http.Handler.
type Server struct {
	cfg    *catalog.Config
	router *router.Router
	log    *slog.Logger
	now    func() time.Time

	keys   map[[sha256.Size]byte]*principal
	sem    chan struct{}
	models []byte
}

// principal is an authenticated caller: a project and one of its keys.
type principal struct {
	project *catalog.Project
	// keyHash is the SHA-256 of the key; keyID a short prefix of it that is
	// safe to log.
	keyHash [sha256.Size]byte
	keyID   string
	policy  llm.DataDemand
}

// Options are the Server's optional dependencies.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time
}

// New returns the handler for cfg's projects and models.
func New(cfg *catalog.Config, rt *router.Router, opts Options) *Server {
	s := &Server{cfg: cfg, router: rt, log: opts.Logger, now: opts.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.sem = make(chan struct{}, cfg.Server.MaxInFlight)
	s.keys = make(map[[sha256.Size]byte]*principal)
	for i := range cfg.Projects {
		p := &cfg.Projects[i]
		for _, k := range p.Keys {
			h := sha256.Sum256([]byte(k.Key))
			s.keys[h] = &principal{project: p, keyHash: h, keyID: hex.EncodeToString(h[:6]), policy: llm.ParseDataPolicy(p.DataPolicy)}
		}
	}
	s.models = modelList(cfg)
	return s
}

// ServeHTTP gives every response an x-request-id, recovers from a panic with
// a 500 envelope (a bug, logged with the request id), and dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := newRequestID()
	w.Header().Set("X-Request-Id", id)
	start := s.now()
	rec := &recorder{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic serving request", "request_id", id, "panic", v)
			if !rec.wrote {
				rec.status = writeError(rec, errors.New("panic"))
			}
		}
	}()
	info := &logInfo{attrs: make([]slog.Attr, 0, 16)}
	switch r.URL.Path {
	case "/api/v1/chat/completions":
		if r.Method != http.MethodPost {
			s.methodNotAllowed(rec, http.MethodPost)
			break
		}
		s.chat(rec, r, id, info)
	case "/api/v1/models":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			s.methodNotAllowed(rec, "GET, HEAD")
			break
		}
		s.listModels(rec, r)
	case "/healthz":
		rec.Header().Set("Content-Type", "text/plain")
		rec.Write([]byte("ok\n"))
	default:
		writeError(rec, llm.Errorf(llm.CodeNotFound, "", "no such endpoint: %s %s", r.Method, sanitize(r.URL.Path)))
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	if info.clientGone {
		status = 499 // nginx's "client closed request", for the logs only
	}
	attrs := []slog.Attr{
		slog.String("request_id", id),
		slog.String("method", r.Method),
		slog.String("path", sanitize(r.URL.Path)),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(s.now().Sub(start).Microseconds())/1000),
	}
	attrs = append(attrs, info.attrs...)
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

// logInfo collects what a handler wants in the request's log line. Never a
// prompt, an answer or a key: only ids, names and numbers.
type logInfo struct {
	attrs      []slog.Attr
	clientGone bool
}

func (li *logInfo) add(a ...slog.Attr) { li.attrs = append(li.attrs, a...) }

func (s *Server) methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, llm.Errorf(llm.CodeMethodNotAllowed, "", "method not allowed; use %s", allow))
}

// sanitize keeps a client-supplied string printable and short for messages
// and logs.
func sanitize(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// authenticate finds the caller by the SHA-256 of its bearer token. Only
// hashes are kept and compared: the map lookup never touches the raw key,
// and the final comparison is constant-time.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	auth := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(auth) <= len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return nil, llm.Errorf(llm.CodeInvalidAPIKey, "", "missing API key: send Authorization: Bearer <key>")
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(auth[len(prefix):])))
	p, ok := s.keys[h]
	if !ok || subtle.ConstantTimeCompare(p.keyHash[:], h[:]) != 1 {
		return nil, llm.Errorf(llm.CodeInvalidAPIKey, "", "invalid API key")
	}
	return p, nil
}

// readBody reads at most the configured body size: more is a 413.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.cfg.Server.MaxBodyBytes
	tooLarge := llm.Errorf(llm.CodeRequestTooLarge, "", "request body is larger than %d bytes", limit)
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		return nil, llm.Errorf(llm.CodeInvalidRequest, "", "could not read the request body")
	}
	return body, nil
}

func (s *Server) admit() (release func(), ok bool) {
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem }, true
	default:
		return nil, false
	}
}

func (s *Server) chat(w *recorder, r *http.Request, id string, info *logInfo) {
	p, err := s.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	info.add(slog.String("project", p.project.ID), slog.String("key_id", p.keyID))
	release, ok := s.admit()
	if !ok {
		writeError(w, &llm.Error{Code: llm.CodeCapacity, Message: "the gateway is at capacity; retry shortly", RetryAfter: time.Second})
		return
	}
	defer release()

	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := llm.DecodeChatRequest(body)
	if err != nil {
		writeError(w, err)
		return
	}
	info.add(slog.String("model", req.Model+req.Suffix), slog.Bool("stream", req.Stream))
	plan, err := s.router.Plan(req, router.Policy{Demand: req.Demand(p.policy), Residency: p.project.Residency})
	if err != nil {
		writeError(w, err)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Server.RequestTimeout.D())
	defer cancel()
	ans, attempts, err := s.router.Start(ctx, plan, req)
	for _, a := range attempts {
		info.add(slog.Group("failed_attempt", "provider", a.Provider, "depth", a.Depth, "class", a.Class.String(), "status", a.Status))
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			info.clientGone = true
			return
		}
		writeError(w, err)
		return
	}
	defer ans.Close()
	info.add(slog.String("provider", ans.Provider), slog.Int("route_depth", ans.Depth), slog.Int("calls", ans.Calls),
		slog.Float64("first_output_ms", float64(ans.FirstOutput.Microseconds())/1000))

	h := w.Header()
	h.Set("X-Gateway-Provider", ans.Provider)
	h.Set("X-Gateway-Route-Depth", strconv.Itoa(ans.Depth))
	var usage llm.Usage
	if req.Stream {
		usage, err = s.writeStream(w, req, ans)
	} else {
		usage, err = s.writeCompletion(w, ans)
	}
	info.add(slog.Int("prompt_tokens", usage.PromptTokens), slog.Int("completion_tokens", usage.CompletionTokens), slog.Float64("cost", usage.Cost))
	if err != nil {
		if r.Context().Err() != nil && ctx.Err() != context.DeadlineExceeded {
			info.clientGone = true
		}
		info.add(slog.String("end", endReason(err)))
	}
}

func endReason(err error) string {
	switch {
	case errors.Is(err, router.ErrIncomplete):
		return "incomplete"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "client_gone"
	}
	return "provider_error"
}

// writeCompletion assembles the provider's stream into one chat.completion.
func (s *Server) writeCompletion(w http.ResponseWriter, ans *router.Answer) (llm.Usage, error) {
	var asm llm.Assembler
	var end error
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
	usage := ans.Usage()
	finish := ""
	switch {
	case end == io.EOF:
	case errors.Is(end, router.ErrIncomplete):
		// The provider stopped without finishing: the client gets what was
		// produced, marked incomplete, rather than losing it.
		finish = "incomplete"
	case errors.Is(end, context.DeadlineExceeded):
		writeError(w, &llm.Error{Code: llm.CodeRequestTimeout, Message: "the request reached its time limit", Cause: end})
		return usage, end
	case errors.Is(end, context.Canceled):
		return usage, end
	default:
		writeError(w, &llm.Error{Code: llm.CodeAllProvidersFailed, Message: "provider " + ans.Provider + " failed after its answer had started", Cause: end})
		return usage, end
	}
	body, err := asm.Completion(usage, finish)
	if err != nil {
		writeError(w, err)
		return usage, err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n'))
	if end != io.EOF {
		return usage, end
	}
	return usage, nil
}

// streamTail is what the gateway itself writes into a stream: the usage
// chunk, and the last chunk of a stream that did not finish.
type streamTail struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices json.RawMessage `json:"choices"`
	Usage   *llm.Usage      `json:"usage,omitempty"`
	Error   *errorObject    `json:"error,omitempty"`
}

// writeStream relays the answer as SSE. The provider's chunks go out as it
// sent them; the gateway adds the usage chunk (when include_usage) and ends
// with "data: [DONE]" only when the provider finished. A provider failure
// after the start ends with a chunk whose finish_reason is "error" and which
// carries an "error" object (the Python and Node OpenAI SDKs raise it as an
// APIError, openai-go as an ssestream.StreamError); a
// provider stream that just stopped ends with finish_reason "incomplete" and
// no error.
func (s *Server) writeStream(w http.ResponseWriter, req *llm.ChatRequest, ans *router.Answer) (llm.Usage, error) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	var tail streamTail
	tail.Object = "chat.completion.chunk"
	var end error
	for {
		ch, err := ans.Next()
		if err != nil {
			end = err
			break
		}
		if tail.ID == "" {
			tail.ID, tail.Model, tail.Created = ch.ID, ch.Model, ch.Created
		}
		if err := writeEvent(w, ch.Raw); err != nil {
			return ans.Usage(), err
		}
		if err := rc.Flush(); err != nil {
			return ans.Usage(), err
		}
	}
	usage := ans.Usage()
	if errors.Is(end, context.Canceled) {
		return usage, end // the client is gone: nobody to write to
	}
	switch {
	case end == io.EOF:
	case errors.Is(end, router.ErrIncomplete):
		tail.Choices = json.RawMessage(`[{"index":0,"delta":{},"finish_reason":"incomplete"}]`)
		writeJSONEvent(w, tail)
	}
	if req.IncludeUsage {
		tail.Choices = json.RawMessage(`[]`)
		tail.Usage = &usage
		writeJSONEvent(w, tail)
		tail.Usage = nil
	}
	switch {
	case end == io.EOF:
		io.WriteString(w, "data: [DONE]\n\n")
	case errors.Is(end, router.ErrIncomplete):
	default:
		e := &llm.Error{Code: llm.CodeStreamInterrupted, Message: "provider " + ans.Provider + " failed after its answer had started; the answer is cut short"}
		if errors.Is(end, context.DeadlineExceeded) {
			e = &llm.Error{Code: llm.CodeRequestTimeout, Message: "the request reached its time limit; the answer is cut short"}
		}
		obj := envelope(e)
		obj.Type = "server_error"
		tail.Choices = json.RawMessage(`[{"index":0,"delta":{},"finish_reason":"error"}]`)
		tail.Error = &obj
		writeJSONEvent(w, tail)
	}
	rc.Flush()
	if end == io.EOF {
		return usage, nil
	}
	return usage, end
}

func writeEvent(w io.Writer, data []byte) error {
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, '\n', '\n')
	_, err := w.Write(buf)
	return err
}

func writeJSONEvent(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeEvent(w, b)
}

// listModels serves the models in OpenAI's list format, each with its
// providers and prices; the body is built once.
func (s *Server) listModels(w *recorder, r *http.Request) {
	if _, err := s.authenticate(r); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(s.models)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(s.models)
	}
}

type modelEntry struct {
	ID        string          `json:"id"`
	Object    string          `json:"object"`
	Created   int64           `json:"created"`
	OwnedBy   string          `json:"owned_by"`
	Providers []modelProvider `json:"providers"`
}

type modelProvider struct {
	Name           string  `json:"name"`
	Model          string  `json:"model"`
	InputPrice     float64 `json:"input_price"`
	OutputPrice    float64 `json:"output_price"`
	Region         string  `json:"region,omitempty"`
	ZDR            bool    `json:"zdr"`
	DataCollection string  `json:"data_collection"`
}

func modelList(cfg *catalog.Config) []byte {
	out := struct {
		Object string       `json:"object"`
		Data   []modelEntry `json:"data"`
	}{Object: "list", Data: []modelEntry{}}
	for _, m := range cfg.Models {
		e := modelEntry{ID: m.ID, Object: "model", OwnedBy: "buzzgate", Providers: []modelProvider{}}
		for _, rt := range m.Routes {
			p, _ := cfg.Provider(rt.Provider)
			e.Providers = append(e.Providers, modelProvider{
				Name: rt.Provider, Model: rt.Model, InputPrice: rt.InputPrice, OutputPrice: rt.OutputPrice,
				Region: p.Region, ZDR: p.ZDR, DataCollection: p.DataCollection,
			})
		}
		out.Data = append(out.Data, e)
	}
	b, _ := json.Marshal(out)
	return append(b, '\n')
}

// recorder remembers the status written, for the log line; Unwrap lets
// http.ResponseController reach the connection's Flush.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
