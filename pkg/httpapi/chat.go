package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// HeaderIdempotencyKey is the header that makes a request exactly-once.
const HeaderIdempotencyKey = "Idempotency-Key"

// chat serves POST /api/v1/chat/completions. The order of checks is the
// contract: authentication, admission, request validation (body, model,
// provider names), then the idempotency lookup, then (issue 5) balance and
// limits, then routing. Whatever is refused before the lookup stores
// nothing, so a retry with the same key runs normally.
func (s *Server) chat(w *recorder, r *http.Request, id string, info *logInfo) {
	p, err := s.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	info.add(slog.String("project", p.project.ID), slog.String("key_id", p.keyID))
	admitted, ok := s.admit()
	if !ok {
		writeError(w, &llm.Error{Code: llm.CodeCapacity, Message: "the gateway is at capacity; retry shortly", RetryAfter: time.Second})
		return
	}
	release := sync.OnceFunc(admitted)
	defer func() { release() }()

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
	demand := req.Demand(p.policy)
	plan, err := s.router.Plan(req, router.Policy{Demand: demand, Residency: p.project.Residency})
	if err != nil {
		writeError(w, err)
		return
	}

	call := &chatCall{id: id, p: p, req: req, plan: plan, info: info}
	keys := r.Header.Values(HeaderIdempotencyKey)
	if len(keys) == 0 {
		if err := s.checkBalance(r.Context(), p); err != nil {
			writeError(w, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Server.RequestTimeout.D())
		defer cancel()
		s.run(ctx, w, r, call)
		return
	}
	if len(keys) > 1 || keys[0] == "" || len(keys[0]) > idempotency.MaxKeyLength {
		writeError(w, llm.Errorf(llm.CodeInvalidRequest, HeaderIdempotencyKey, "send one Idempotency-Key header, a non-empty string of at most %d bytes", idempotency.MaxKeyLength))
		return
	}
	if s.idem == nil {
		writeError(w, &llm.Error{Code: llm.CodeStoreUnavailable, Message: "this gateway has no idempotency store"})
		return
	}
	fp, err := idempotency.Fingerprint(r.Method, r.URL.Path, body)
	if err != nil {
		writeError(w, llm.Errorf(llm.CodeInvalidRequest, "", "a request with an Idempotency-Key needs an unambiguous JSON body: %v", err))
		return
	}
	ident := idempotency.Identity(p.project.ID, p.keyHash, keys[0], demand.String(), residencyOf(p))
	info.add(slog.Bool("keyed", true))

	waitCtx, cancel := context.WithTimeout(r.Context(), s.cfg.Server.RequestTimeout.D())
	defer cancel()
	for range 3 {
		exec, rec, err := s.idem.Begin(waitCtx, ident, fp, id)
		if err != nil && r.Context().Err() != nil {
			info.clientGone = true // the client left: not the store's fault
			return
		}
		if err != nil {
			s.log.Warn("idempotency store unavailable", "request_id", id, "error", err)
			writeError(w, &llm.Error{Code: llm.CodeStoreUnavailable, Message: "the idempotency store cannot be reached; retry shortly", RetryAfter: time.Second, Cause: err})
			return
		}
		if exec != nil {
			// The first call of this key: it runs to the end and stores its
			// answer even if its client goes away, so that a retry gets it.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.Server.RequestTimeout.D())
			defer cancel()
			defer func() {
				// A panic (a bug) must not leave the record in progress with
				// a live lease: end it as failed, so retries answer 409.
				if !exec.Finished() {
					s.finish(exec.Fail, info)
				}
			}()
			// Balance and limits come after the lookup, so that a replay is
			// served even once they are spent; a refusal here releases the
			// record, and a retry with the key runs normally.
			if err := s.checkBalance(ctx, p); err != nil {
				s.finish(exec.Release, info)
				writeError(w, err)
				return
			}
			call.exec = exec
			s.run(ctx, w, r, call)
			return
		}
		// A retry that waits for, or replays, another request's answer does
		// no provider work: it gives its admission slot back, so that
		// retry storms on one slow key cannot fill the gateway.
		release()
		err = s.idem.Serve(waitCtx, w, rec, idempotency.Retry{Fingerprint: fp, IncludeUsage: req.IncludeUsage})
		switch {
		case err != nil && w.wrote:
			// Serve's contract is that an error means nothing was written;
			// should that ever break, never write a second status line.
			s.log.Error("idempotency serve failed after writing", "request_id", id, "error", err)
			return
		case err == nil:
			info.add(slog.Bool("replayed", true), slog.String("replay_of", rec.RequestID))
			info.m.Replayed = true
			return
		case errors.Is(err, idempotency.ErrRunAgain):
			// It may run the request itself now: admitted again, like any
			// new request.
			admitted, ok := s.admit()
			if !ok {
				writeError(w, &llm.Error{Code: llm.CodeCapacity, Message: "the gateway is at capacity; retry shortly", RetryAfter: time.Second})
				return
			}
			release = sync.OnceFunc(admitted)
			continue
		case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
			info.clientGone = true
			return
		case errors.Is(err, context.DeadlineExceeded):
			writeError(w, &llm.Error{Code: llm.CodeInProgress, Message: "the first request with this Idempotency-Key is still running; retry with the same key", RetryAfter: time.Second})
			return
		case errors.Is(err, idempotency.ErrUnavailable):
			s.log.Warn("idempotency store unavailable", "request_id", id, "error", err)
			writeError(w, &llm.Error{Code: llm.CodeStoreUnavailable, Message: "the idempotency store cannot be reached; retry shortly", RetryAfter: time.Second, Cause: err})
			return
		}
		info.add(slog.String("idempotency", string(llm.AsError(err).Code)))
		writeError(w, err)
		return
	}
	writeError(w, &llm.Error{Code: llm.CodeInProgress, Message: "this Idempotency-Key's record keeps changing; retry with the same key", RetryAfter: time.Second})
}

func residencyOf(p *principal) string {
	if p.project.Residency == "" {
		return "anywhere"
	}
	return p.project.Residency
}

// chatCall is one accepted chat completion.
type chatCall struct {
	id   string
	p    *principal
	req  *llm.ChatRequest
	plan *router.Plan
	// exec is the keyed request's first call; nil without a key.
	exec *idempotency.Execution
	info *logInfo
}

// run routes the request, writes its answer and bills it. With exec (a keyed
// request's first call) the answer is also recorded, and the record is
// completed, or tombstoned when the request fails after it was accepted.
// The ledger entry is written before the record is completed: a crash in
// between leaves an answer billed once whose retry answers 409
// idempotency_replay_unavailable, never one served twice or unbilled.
func (s *Server) run(ctx context.Context, w http.ResponseWriter, r *http.Request, call *chatCall) {
	req, plan, exec, info := call.req, call.plan, call.exec, call.info
	ans, attempts, err := s.router.Start(ctx, plan, req)
	for _, a := range attempts {
		info.add(slog.Group("failed_attempt", "provider", a.Provider, "depth", a.Depth, "class", a.Class.String(), "status", a.Status))
		info.m.FailedProviders = append(info.m.FailedProviders, a.Provider)
	}
	if err != nil {
		if exec != nil {
			s.finish(exec.Fail, info)
		}
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
	info.m.Provider, info.m.RouteDepth, info.m.TimeToFirstToken = ans.Provider, ans.Depth, ans.FirstOutput

	h := w.Header()
	h.Set("X-Gateway-Provider", ans.Provider)
	h.Set("X-Gateway-Route-Depth", strconv.Itoa(ans.Depth))
	out := &output{w: w, rc: http.NewResponseController(w), exec: exec, ctx: ctx}
	var (
		usage    llm.Usage
		answered bool
	)
	if req.Stream {
		usage, answered, err = s.writeStream(out, req, ans)
	} else {
		usage, answered, err = s.writeCompletion(out, ans)
	}
	info.add(slog.Int("prompt_tokens", usage.PromptTokens), slog.Int("completion_tokens", usage.CompletionTokens), slog.Float64("cost", usage.Cost))
	if answered {
		info.m.Cost = usage.Cost
		err := s.bill(call.p, billing.Entry{
			RequestID: call.id, Model: req.Model, Provider: ans.Provider,
			PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens,
			CostNanos: billing.USDToNanos(usage.Cost), At: s.now(),
		})
		if err != nil {
			info.add(slog.String("billing_error", err.Error()))
		}
	}
	if err != nil {
		if r.Context().Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			info.clientGone = true
		}
		info.add(slog.String("end", endReason(err)))
	}
	if exec != nil {
		if answered {
			s.finish(exec.Complete, info)
		} else {
			s.finish(exec.Fail, info)
		}
	}
}

// finish ends an execution's record. It gets a context of its own: the
// request's may have reached its ceiling, and the record must still end.
func (s *Server) finish(end func(context.Context) error, info *logInfo) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := end(ctx); err != nil {
		s.log.Warn("idempotency record not finished", "error", err)
		info.add(slog.String("idempotency_finish_error", err.Error()))
		info.m.StoreError = true
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

// replayHeaders are the headers a stored answer keeps.
var replayHeaders = []string{"Content-Type", "X-Request-Id", "X-Gateway-Provider", "X-Gateway-Route-Depth"}

// output is where an answer goes: the client, and for a keyed request also
// the execution's record. A keyed request outlives its client: when a write
// to the client fails the answer is still read to the end and recorded.
type output struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	exec      *idempotency.Execution
	ctx       context.Context
	clientErr error
}

func (o *output) start(status int, stream bool) {
	o.w.WriteHeader(status)
	if o.exec != nil {
		hdr := make(map[string]string, len(replayHeaders))
		for _, k := range replayHeaders {
			if v := o.w.Header().Get(k); v != "" {
				hdr[k] = v
			}
		}
		o.exec.Start(status, hdr, stream)
	}
}

func (o *output) body(b []byte) {
	o.w.Write(b)
	if o.exec != nil {
		o.exec.Body(b)
	}
}

// event sends one SSE event (unless send is false: a usage chunk the client
// did not ask for) and records it. It returns the client's write error for
// an unkeyed request, which then stops; a keyed one goes on.
func (o *output) event(data []byte, usage, send bool) error {
	if send && o.clientErr == nil {
		if err := writeEvent(o.w, data); err != nil {
			o.clientErr = err
		} else if err := o.rc.Flush(); err != nil {
			o.clientErr = err
		}
	}
	if o.exec != nil {
		o.exec.Event(o.ctx, idempotency.Event{Data: data, Usage: usage})
		return nil
	}
	return o.clientErr
}

// writeCompletion assembles the provider's stream into one chat.completion.
// answered is true when a 200 answer was written.
func (s *Server) writeCompletion(out *output, ans *router.Answer) (usage llm.Usage, answered bool, err error) {
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
	usage = ans.Usage()
	finish := ""
	switch {
	case end == io.EOF:
	case errors.Is(end, router.ErrIncomplete):
		// The provider stopped without finishing: the client gets what was
		// produced, marked incomplete, rather than losing it.
		finish = "incomplete"
	case errors.Is(end, context.DeadlineExceeded):
		writeError(out.w, &llm.Error{Code: llm.CodeRequestTimeout, Message: "the request reached its time limit", Cause: end})
		return usage, false, end
	case errors.Is(end, context.Canceled):
		return usage, false, end
	default:
		writeError(out.w, &llm.Error{Code: llm.CodeAllProvidersFailed, Message: "provider " + ans.Provider + " failed after its answer had started", Cause: end})
		return usage, false, end
	}
	body, err := asm.Completion(usage, finish)
	if err != nil {
		writeError(out.w, err)
		return usage, false, err
	}
	body = append(body, '\n')
	out.w.Header().Set("Content-Type", "application/json")
	out.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	out.start(http.StatusOK, false)
	out.body(body)
	if end != io.EOF {
		return usage, true, end
	}
	return usage, true, nil
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
// APIError, openai-go as an ssestream.StreamError); a provider stream that
// just stopped ends with finish_reason "incomplete" and no error. A keyed
// stream always records its usage chunk, so that a retry that asks for
// usage gets it even when the first call did not.
func (s *Server) writeStream(out *output, req *llm.ChatRequest, ans *router.Answer) (llm.Usage, bool, error) {
	h := out.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	out.start(http.StatusOK, true)

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
		if err := out.event(ch.Raw, false, true); err != nil {
			return ans.Usage(), true, err
		}
	}
	usage := ans.Usage()
	if errors.Is(end, context.Canceled) {
		return usage, true, end // an unkeyed client is gone: nobody to write to
	}
	emit := func(usageChunk, send bool) {
		b, _ := json.Marshal(tail)
		out.event(b, usageChunk, send)
	}
	if errors.Is(end, router.ErrIncomplete) {
		tail.Choices = json.RawMessage(`[{"index":0,"delta":{},"finish_reason":"incomplete"}]`)
		emit(false, true)
	}
	if req.IncludeUsage || out.exec != nil {
		tail.Choices = json.RawMessage(`[]`)
		tail.Usage = &usage
		emit(true, req.IncludeUsage)
		tail.Usage = nil
	}
	switch {
	case end == io.EOF:
		out.event([]byte("[DONE]"), false, true)
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
		emit(false, true)
	}
	if end == io.EOF {
		return usage, true, nil
	}
	return usage, true, end
}

func writeEvent(w io.Writer, data []byte) error {
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, '\n', '\n')
	_, err := w.Write(buf)
	return err
}
