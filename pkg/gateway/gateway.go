// Package gateway owns one generation request's life, once, for every client
// API: admission, the Idempotency-Key lookup, the balance check and the
// hold, routing, recording the answer, pricing it, and finishing (the record
// completed or tombstoned, the bill settled) durably. It speaks no wire
// format: a client API's codec (pkg/clientapi/chat, messages, responses)
// turns a router.Answer into bodies or events, and a Writer puts them on the wire. So a rule here (fallback,
// exactly-once, billing) holds on every endpoint.
//
// # Money
//
// No provider is called before a hold is written to the ledger: a request
// whose hold cannot be written is refused with 503 billing_unavailable and
// costs nothing. Once the answer's usage is known, and before its last bytes
// go out (the body, or the stream's usage chunk and end), the cost is made
// durable with one write (Ledger.Price). The rest of the bill (applying the
// cost to the balances) and the idempotency record's completion run through
// the Finisher, which retries them with backoff for much longer than a store
// outage is expected to last. What a crash leaves behind is a hold: the
// reconciler (in-process for the server, the scheduled SweepFunction under
// Lambda, or `admin reconcile`) finishes a priced one and writes off, at
// zero, one whose price never became durable (the instance died while the
// store was unreachable, or the store stayed unreachable past the
// Finisher's horizon: the cases in which an answer may go unbilled; they
// are reported, and a late bill still lands).
package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/internal/storecall"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/ratelimit"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// priceTimeout bounds the write that makes a cost durable before the
// answer's last bytes: past it the answer goes out anyway and the Finisher
// bills.
const priceTimeout = 2 * time.Second

// Caller is an authenticated caller: a project and one of its keys.
type Caller struct {
	Project *catalog.Project
	// KeyHash is the SHA-256 of the API key (the idempotency identity);
	// BillingKeyID the key's id in the ledger.
	KeyHash      [32]byte
	BillingKeyID string
	// FromConfig: the project and key come from the config file, whose
	// balance and limits seed the ledger on first use.
	FromConfig bool
	// KeyRates are the key's rpm, tpm and budget: a config key's from the
	// config, an issued key's from the key store.
	KeyRates billing.Rates
	Policy   llm.DataDemand
}

// Residency is the caller's residency as the idempotency identity names it.
func (c *Caller) Residency() string {
	if c.Project.Residency == "" {
		return "anywhere"
	}
	return c.Project.Residency
}

// Request is one accepted generation request, decoded and planned.
type Request struct {
	// ID is the request's x-request-id: the ledger's key.
	ID     string
	Caller *Caller
	Model  string // the model the client asked for, for the ledger
	Plan   *router.Plan
	Chat   *llm.ChatRequest
	Demand llm.DataDemand
	// IdempotencyKey is the raw header value ("" without one); Fingerprint
	// the request's (Method, path, canonical body) hash. Scope keeps the
	// records of one endpoint apart from another's ("" for Chat
	// Completions, whose records predate the others).
	IdempotencyKey string
	Fingerprint    string
	Scope          string
	// IncludeUsage: the client asked for the stream's usage chunk.
	IncludeUsage bool
	// Resolve, when set, completes the request from state outside its
	// body (Resolver).
	Resolve Resolver
	// Log collects what the request's log line and metrics need.
	Log *Log

	// MaxOutputTokens is the most output the request asks for of each
	// choice (0: it does not say; then the plan's routes say what their
	// upstreams allow), Choices the number of choices it asks for (Chat's
	// n; 0 or 1: one): with its prompt's estimate they are reserved
	// against a tpm. RateHeaders, when set, adds the client API's own
	// headers reporting its rate limits to the gateway's x-ratelimit-*.
	MaxOutputTokens int
	Choices         int
	RateHeaders     RateHeaders

	// group is the Group of the context the request is served under (nil:
	// none): its finishing steps count in it.
	group *Group
	// rate is what the rate limiter counted for the request (nil: it has
	// no limits), rateHeaders the headers that report it; usedTokens and
	// outputTokens are the tokens its answer used, all and output.
	rate                     *rateHold
	rateHeaders              map[string]string
	usedTokens, outputTokens int64
	// projectRates are the project's rpm, tpm and budget: the config's, or
	// the admin tool's (set by the balance check).
	projectRates billing.Rates
	// out is the answer's Emitter (execute), kept here rather than
	// allocated apart.
	out tee
	// free is a request admitted to produce nothing (AdmitFree): it
	// reserves no output tokens.
	free bool
	// settleAtPrice is set by the balance check when the account is bounded
	// (a balance, a key limit): its bill is applied when the answer is
	// priced, before the last bytes (tee.Price).
	settleAtPrice bool
}

// Resolver completes a request from state outside its body (the Responses
// API's previous_response_id: the kept turn it continues). Run calls it
// after the idempotency lookup and before the balance check, so that a
// retry is answered from its key's record whatever became of that state;
// its error refuses the request as an invalid one would (a keyed request's
// record is released).
type Resolver interface {
	// Resolve returns the whole request, in the request's Chat's place.
	Resolve(ctx context.Context) (*llm.ChatRequest, error)
}

// Writer is the client's side of one request: one implementation per wire
// (JSON or SSE over HTTP), used for live answers, joins and replays alike.
type Writer interface {
	// Error answers with an error envelope; nothing was written before.
	Error(err error)
	// Start writes the status line and headers.
	Start(status int, header map[string]string, stream bool)
	// Body writes a whole JSON body.
	Body(b []byte) error
	// Event writes one SSE event (name "" for a data-only one) and flushes
	// it.
	Event(name string, data []byte) error
}

// Client is the client's connection as the HTTP layer gives it to Run
// (clientapi.Wire): a Writer, and what the pipeline tunes of its writes.
type Client interface {
	Writer
	// KeepAlive keeps the connection busy while a JSON answer is
	// produced, until its first frame or stop, where a proxy would time
	// an idle response out (under Lambda); elsewhere it does nothing.
	KeepAlive() (stop func())
	// SetMore holds an event's flush back while more reports that another
	// event is at hand, so that a burst goes out in one write.
	SetMore(more Backlog)
	// WritesBounded reports whether every write has a deadline.
	WritesBounded() bool
	// Abort drops the client (the pump gave up on it with frames still
	// queued): the answer is cut off.
	Abort()
}

// Backlog reports whether another event is at hand: the answer's
// (router.Answer), or a keyed request's pump's. (An interface, not a
// func: a method value given to SetMore would be an allocation a
// request.)
type Backlog interface {
	More() bool
}

// answerWriter is what an answer is written to: the client, or the pump
// in front of it; either keeps the connection alive on request.
type answerWriter interface {
	Writer
	KeepAlive() (stop func())
}

// Codec is one client API's encoding of an answer.
type Codec interface {
	// Answer reads ans to its end and emits the answer through out: a body
	// for a non-streaming request, events for a stream. It calls out.Price
	// once the usage is known and before the answer's last bytes.
	Answer(ans *router.Answer, out Emitter) Result
	// JoinBroken is the event that ends a joined or replayed stream that
	// cannot go on.
	JoinBroken(reason string) idempotency.Event
}

// Result is how an answer ended.
type Result struct {
	Usage llm.Usage
	// Answered: a 200 answer was written (and is billed). A request
	// whose unkeyed client left after the answer started is billed too.
	Answered bool
	// Err is why it ended early (nil: it finished).
	Err error
}

// Emitter takes a codec's output: it goes to the client and, for a keyed
// request, to the idempotency record.
type Emitter interface {
	// Start fixes the answer's status and headers.
	Start(status int, header map[string]string, stream bool)
	// Body sends (and records) a whole body.
	Body(b []byte)
	// Event sends one event to the client unless send is false (a usage
	// chunk the client did not ask for) and records it; ev.Usage marks the
	// usage chunk. An error means the client is gone and the request has no
	// key: stop.
	Event(ev idempotency.Event, send bool) error
	// Price makes the answer's cost durable before its last bytes.
	Price(u llm.Usage)
}

// Accounts is the billing side.
type Accounts struct {
	Ledger billing.Ledger
	// Keys, when set, gets each config key imported the first time its
	// project is seeded (seed), so that the admin tool can revoke it.
	Keys billing.KeyStore
	// Pepper is mixed into config keys' ids and hashes.
	Pepper []byte
	// Limiter counts rpm and tpm; nil: no rate limits are enforced.
	Limiter ratelimit.Limiter
}

// Config is the service's policy.
type Config struct {
	MaxInFlight    int
	RequestTimeout time.Duration
	// HoldGrace is how long after a request's ceiling its hold is left to
	// the Finisher before a sweep may settle it.
	HoldGrace time.Duration
}

// Service runs requests.
type Service struct {
	cfg      Config
	router   *router.Router
	idem     *idempotency.Service
	accounts Accounts
	fin      *Finisher
	log      *slog.Logger
	now      func() time.Time

	sem         chan struct{}
	projectSems sync.Map // project id -> chan struct{} of its max_in_flight
	seeded      sync.Map // project id -> struct{}

	// A store whose calls never wait on I/O (the memory stores) gets no
	// deadline per call (storecall).
	ledgerLocal, idemLocal bool
}

// New returns a Service. idem may be nil (keyed requests answer 503).
func New(cfg Config, rt *router.Router, idem *idempotency.Service, accounts Accounts, fin *Finisher, log *slog.Logger, now func() time.Time) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = catalog.DefaultMaxInFlight
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = catalog.MaxRequestTimeout
	}
	if cfg.HoldGrace <= 0 {
		cfg.HoldGrace = DefaultFinishHorizon + 5*time.Minute
	}
	if fin == nil {
		fin = NewFinisher(FinisherOptions{Log: log})
	}
	return &Service{cfg: cfg, router: rt, idem: idem, accounts: accounts, fin: fin, log: log, now: now,
		sem:         make(chan struct{}, cfg.MaxInFlight),
		ledgerLocal: storecall.InProcess(accounts.Ledger), idemLocal: idem != nil && idem.InProcess()}
}

// Admission is a request's slot among server.max_in_flight, and among its
// project's max_in_flight when it has one (Admit), held until Release.
type Admission struct {
	sem, project chan struct{}
	held         bool
}

// Release gives the slots back; only the first call does.
func (a *Admission) Release() {
	if a.held {
		a.held = false
		<-a.sem
		if a.project != nil {
			<-a.project
		}
	}
}

// Admit admits a generation request of c before anything of its body is
// decoded, so that what decoding costs is bounded by max_in_flight: it
// takes a slot without waiting, or returns the 429 capacity error. The
// caller releases the slot when the request ends; Run gives it back
// earlier to a request that waits for, replays or joins another's answer.
func (s *Service) Admit(c *Caller) (Admission, error) { return s.admit(c.Project) }

// admit takes a slot without waiting, or returns the 429 capacity error:
// the instance's, or the project's when its own bound is reached (p may
// be nil: no project bound).
func (s *Service) admit(p *catalog.Project) (Admission, error) {
	var project chan struct{}
	if p != nil && p.MaxInFlight > 0 {
		project = s.projectSem(p)
		select {
		case project <- struct{}{}:
		default:
			return Admission{}, &llm.Error{Code: llm.CodeCapacity, Message: "this project has as many requests running on this instance as it may (projects[].max_in_flight); retry shortly", RetryAfter: time.Second}
		}
	}
	select {
	case s.sem <- struct{}{}:
		return Admission{sem: s.sem, project: project, held: true}, nil
	default:
		if project != nil {
			<-project
		}
		return Admission{}, capacity()
	}
}

// projectSem is the semaphore of a project with a max_in_flight.
func (s *Service) projectSem(p *catalog.Project) chan struct{} {
	if sem, ok := s.projectSems.Load(p.ID); ok {
		return sem.(chan struct{})
	}
	sem, _ := s.projectSems.LoadOrStore(p.ID, make(chan struct{}, p.MaxInFlight))
	return sem.(chan struct{})
}

func capacity() error {
	return &llm.Error{Code: llm.CodeCapacity, Message: "the gateway is at capacity; retry shortly", RetryAfter: time.Second}
}

func storeUnavailable(err error) error {
	return &llm.Error{Code: llm.CodeStoreUnavailable, Message: "the idempotency store cannot be reached; retry shortly", RetryAfter: time.Second, Cause: err}
}

// BillingUnavailable is the 503 of an account store that cannot be reached.
func BillingUnavailable(err error) error {
	return &llm.Error{Code: llm.CodeBillingUnavailable, Message: "the account store cannot be reached; retry shortly", RetryAfter: time.Second, Cause: err}
}

// Run serves one admitted request (slot, Admit), decoded and planned,
// through w, encoding its answer with codec. ctx is the client's: a keyed
// request outlives it. Run may give slot back early, and take another in
// its place (a retry that runs the request once the first call ended):
// the caller releases whichever it holds when Run returns.
func (s *Service) Run(ctx context.Context, req *Request, slot *Admission, w Client, codec Codec) {
	req.group = groupOf(ctx)
	if req.IdempotencyKey == "" {
		err := s.resolve(ctx, req)
		if err == nil {
			err = s.checkBalance(ctx, req)
		}
		if err == nil {
			err = s.takeRate(ctx, req)
			defer s.settleRate(req)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			// A store call cut short by the client leaving is the client
			// gone (499 in the log), not the store's failure (a 503
			// counted as one).
			req.Log.ClientGone = true
			return
		case err != nil:
			w.Error(err)
			return
		}
		ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
		s.execute(ctx, ctx, req, w, w, codec, nil)
		return
	}
	if s.idem == nil {
		w.Error(&llm.Error{Code: llm.CodeStoreUnavailable, Message: "this gateway has no idempotency store"})
		return
	}
	c := req.Caller
	ident := idempotency.Identity(c.Project.ID, c.KeyHash, req.Scope+req.IdempotencyKey, req.Demand.String(), c.Residency())
	req.Log.Add(slog.Bool("keyed", true))
	// The lookup and the wait for another request's answer are bounded by
	// the request's timeout. A store in the process never waits
	// (storecall): its lookup goes without, and the bound (a context and a
	// timer) is made only for a wait.
	waitCtx, cancel := ctx, context.CancelFunc(nil)
	bound := func() {
		if cancel == nil {
			waitCtx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		}
	}
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	for range 4 {
		if !s.idemLocal {
			bound()
		}
		exec, rec, err := s.idem.Begin(waitCtx, idempotency.Request{Key: ident, Fingerprint: req.Fingerprint, RequestID: req.ID, Tenant: c.Project.ID})
		switch {
		case err != nil && ctx.Err() != nil:
			req.Log.ClientGone = true
			return
		case errors.Is(err, idempotency.ErrFull):
			s.log.Warn("idempotency store full for this project", "request_id", req.ID, "project", c.Project.ID)
			w.Error(&llm.Error{Code: llm.CodeStoreUnavailable, Message: "this project's share of the idempotency store is full; retry shortly", RetryAfter: 5 * time.Second, Cause: err})
			return
		case err != nil:
			s.log.Warn("idempotency store unavailable", "request_id", req.ID, "error", err)
			w.Error(storeUnavailable(err))
			return
		}
		if exec != nil {
			s.runOwner(ctx, req, w, codec, exec)
			return
		}
		// A retry that waits for, or replays, another request's answer does
		// no provider work: it gives its admission slot back, so that retry
		// storms on one slow key cannot fill the gateway.
		slot.Release()
		bound()
		reply, err := s.idem.Serve(waitCtx, rec, idempotency.Retry{Fingerprint: req.Fingerprint, IncludeUsage: req.IncludeUsage})
		switch {
		case err == nil:
			req.Log.Add(slog.Bool("replayed", true), slog.String("replay_of", rec.RequestID))
			req.Log.Metrics.Replayed = true
			if !writeReply(waitCtx, w, codec, reply) {
				req.Log.ClientGone = true
				req.Log.Add(slog.String("end", "client_gone"))
			}
			return
		case errors.Is(err, idempotency.ErrRunAgain):
			// It may run the request itself now: admitted again, like any
			// new request.
			again, err := s.admit(req.Caller.Project)
			if err != nil {
				w.Error(err)
				return
			}
			*slot = again
			continue
		case errors.Is(err, context.Canceled) && ctx.Err() != nil:
			req.Log.ClientGone = true
			return
		case errors.Is(err, context.DeadlineExceeded) && waitCtx.Err() != nil:
			// The wait itself ran out (one store read that timed out is
			// the store's failure, below).
			w.Error(&llm.Error{Code: llm.CodeInProgress, Message: "the first request with this Idempotency-Key is still running; retry with the same key", RetryAfter: time.Second})
			return
		case errors.Is(err, idempotency.ErrUnavailable):
			s.log.Warn("idempotency store unavailable", "request_id", req.ID, "error", err)
			w.Error(storeUnavailable(err))
			return
		}
		req.Log.Add(slog.String("idempotency", string(llm.AsError(err).Code)))
		w.Error(err)
		return
	}
	w.Error(&llm.Error{Code: llm.CodeInProgress, Message: "this Idempotency-Key's record keeps changing; retry with the same key", RetryAfter: time.Second})
}

// idemDo runs an idempotency step through the Finisher. A first attempt
// that fails is the request's store error in its metrics (the
// IdempotencyStoreErrors the template's alarm watches), as a 503
// store_unavailable is: the client may have its answer, but the store was
// not reached, and a retry may find no record of it.
func (s *Service) idemDo(req *Request, what string, step func(context.Context) error, giveUp func()) {
	if !s.fin.do(req.group, what, step, giveUp, s.idemLocal) && req.Log != nil {
		req.Log.Metrics.StoreError = true
	}
}

// resolve completes req.Chat (Request.Resolve).
func (s *Service) resolve(ctx context.Context, req *Request) error {
	if req.Resolve == nil {
		return nil
	}
	chat, err := req.Resolve.Resolve(ctx)
	if err != nil {
		return err
	}
	req.Chat = chat
	return nil
}

// runOwner runs a keyed request's first call. It outlives its client: it
// runs to the end, records its answer and is billed even when the client
// goes away, so that a retry gets the answer.
func (s *Service) runOwner(clientCtx context.Context, req *Request, client Client, codec Codec, exec *idempotency.Execution) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(clientCtx), s.cfg.RequestTimeout)
	defer cancel()
	// The client is written to through a pump: recording does not wait on
	// the client reading (a small JSON answer on a connection with write
	// deadlines is written here, bounded by them: see pump). Close (last)
	// waits for the client's copy.
	w := newPump(client)
	defer w.Close(ctx)
	defer func() {
		// A panic (a bug) must not leave the record in progress with a
		// live lease: end it as failed, so that retries answer 409.
		if !exec.Finished() {
			s.idemDo(req, "idempotency tombstone", exec.Fail, exec.Abandon)
		}
	}()
	// The rest of the request, balance and limits come after the lookup,
	// so that a replay is served even once they are gone or spent; a
	// refusal here releases the record, and a retry with the key runs
	// normally.
	if err := s.resolve(ctx, req); err != nil {
		s.idemDo(req, "idempotency release", exec.Release, exec.Abandon)
		w.Error(err)
		return
	}
	if err := s.checkBalance(ctx, req); err != nil {
		s.idemDo(req, "idempotency release", exec.Release, exec.Abandon)
		w.Error(err)
		return
	}
	defer s.settleRate(req)
	if err := s.takeRate(ctx, req); err != nil {
		s.idemDo(req, "idempotency release", exec.Release, exec.Abandon)
		w.Error(err)
		return
	}
	s.execute(clientCtx, ctx, req, w, nil, codec, exec)
}

// execute holds, routes, answers, prices and finishes. clientCtx is the
// client's; ctx the request's own (the same for an unkeyed request). w is
// the answer's writer: direct, the client itself, for an unkeyed request
// (nil for a keyed one, written through a pump).
func (s *Service) execute(clientCtx, ctx context.Context, req *Request, w answerWriter, direct Client, codec Codec, exec *idempotency.Execution) {
	log := req.Log
	at := s.now()
	hold := billing.Hold{
		RequestID: req.ID, Project: req.Caller.Project.ID, KeyID: req.Caller.BillingKeyID, Model: req.Model,
		At: at, Deadline: at.Add(s.cfg.RequestTimeout + s.cfg.HoldGrace),
	}
	// Made only on the paths that release the hold: a closure over hold
	// made up front would be two allocations on every request.
	unhold := func() {
		s.fin.do(req.group, "billing unhold", s.unholdStep(hold.Project, hold.RequestID), nil, s.ledgerLocal)
	}
	if err := s.hold(ctx, hold); err != nil {
		// An unkeyed request's hold runs under the client's context: one
		// cut short by the client leaving is the client gone. (A keyed
		// one's runs under its own.)
		gone := ctx.Err() != nil && clientCtx.Err() != nil
		if !gone {
			s.log.Warn("billing hold failed", "request_id", req.ID, "error", err)
		}
		if errors.Is(err, billing.ErrUnavailable) {
			// The hold may have landed with its answer lost (a timeout, the
			// client gone mid-call): release it. Left, it would wait for the
			// reconciler, whose write-off of an unpriced hold is the one
			// report of an answer that may have gone unbilled.
			unhold()
		}
		if exec != nil {
			s.idemDo(req, "idempotency release", exec.Release, exec.Abandon)
		}
		if gone {
			log.ClientGone = true
			return
		}
		w.Error(BillingUnavailable(err))
		return
	}
	if exec != nil {
		// From here on a retry may never take the record over: the
		// provider is about to be called.
		mctx, cancel := storecall.Bound(ctx, 10*time.Second, s.idemLocal)
		err := exec.MarkStarted(mctx)
		cancel()
		if err != nil {
			unhold()
			s.idemDo(req, "idempotency release", exec.Release, exec.Abandon)
			if errors.Is(err, idempotency.ErrNotOwner) {
				// Another request took the reservation over (this one's
				// lease lapsed before it started): that one runs it.
				w.Error(&llm.Error{Code: llm.CodeInProgress, Message: "another request with this Idempotency-Key is running it; retry with the same key", RetryAfter: time.Second})
				return
			}
			s.log.Warn("idempotency start not recorded", "request_id", req.ID, "error", err)
			w.Error(storeUnavailable(err))
			return
		}
	}

	if !req.Chat.Stream {
		// A JSON answer sends nothing until it is whole, which can take
		// longer than a proxy lets a response idle (API Gateway's idle
		// timeout): the writer keeps the connection busy meanwhile
		// (httpapi's wire, under Lambda).
		defer w.KeepAlive()()
	}
	ans, attempts, err := s.router.Start(ctx, req.Plan, req.Chat)
	for _, a := range attempts {
		log.Add(slog.Group("failed_attempt", "provider", a.Provider, "depth", a.Depth, "class", a.Class.String(), "status", a.Status,
			"error", a.Message, "cause", a.Cause))
		log.Metrics.FailedProviders = append(log.Metrics.FailedProviders, a.Provider)
		if a.Class == llm.FailConfig {
			// The operator's to fix (a key, a model name, access to the
			// model): the route is out until the health cooldown ends.
			s.log.Error("provider configuration error: route taken out for the health cooldown",
				"request_id", req.ID, "provider", a.Provider, "model", a.Model, "status", a.Status, "error", a.Message)
			log.Metrics.ConfigErrors = append(log.Metrics.ConfigErrors, a.Provider)
		}
	}
	if err != nil {
		unhold()
		if exec != nil {
			s.idemDo(req, "idempotency tombstone", exec.Fail, exec.Abandon)
		}
		if errors.Is(err, context.Canceled) && clientCtx.Err() != nil {
			log.ClientGone = true
			return
		}
		w.Error(err)
		return
	}
	defer ans.Close()
	log.Add(slog.String("provider", ans.Provider), slog.Int("route_depth", ans.Depth), slog.Int("calls", ans.Calls),
		slog.Float64("first_output_ms", float64(ans.FirstOutput.Microseconds())/1000))
	log.Metrics.Provider, log.Metrics.RouteDepth, log.Metrics.TimeToFirstToken = ans.Provider, ans.Depth, ans.FirstOutput
	log.Metrics.UpstreamAPI = ans.API
	log.Metrics.PassThrough = log.Metrics.ClientAPI == ans.Proto.String()
	log.Metrics.Dropped = ans.DroppedFrom(req.Chat)

	if direct != nil {
		// The client's writer sends a burst of events in one write
		// (httpapi's wire). A keyed request writes through the pump, which
		// holds a flush back while it has more events queued.
		direct.SetMore(ans)
	}
	out := &req.out
	*out = tee{ctx: ctx, w: w, exec: exec, svc: s, settle: req.settleAtPrice, extra: req.rateHeaders, rate: req.rate, entry: billing.Entry{
		RequestID: req.ID, Project: hold.Project, KeyID: hold.KeyID, Model: req.Model, Provider: ans.Provider, At: at,
	}}
	res := codec.Answer(ans, out)
	u := res.Usage
	req.usedTokens, req.outputTokens = int64(u.PromptTokens+u.CompletionTokens), int64(u.CompletionTokens)
	if !log.Off {
		// slog.Any boxes the cost: an allocation, made only for a line
		// that is written.
		log.Add(slog.Int("prompt_tokens", u.PromptTokens), slog.Int("completion_tokens", u.CompletionTokens), slog.Any("cost", llm.USD(u.Cost)))
	}
	switch {
	case out.clientErr != nil:
		// A write to the client failed (it left, or made no progress for
		// the write timeout): the provider did nothing wrong.
		log.ClientGone = true
		log.Add(slog.String("end", "client_gone"))
	case res.Err != nil:
		if clientCtx.Err() != nil && !errors.Is(res.Err, context.DeadlineExceeded) {
			log.ClientGone = true
		}
		log.Add(slog.String("end", endReason(res.Err)))
	}
	// An unkeyed client that left after the answer had started (a keyed
	// request reads its answer to the end whatever its client does) has
	// made the provider produce, and bill, what it produced: the gateway
	// bills the same, from the usage read so far.
	leftAfterOutput := !res.Answered && exec == nil && clientCtx.Err() != nil && errors.Is(res.Err, context.Canceled)
	// A JSON answer cut by the request's ceiling (504 request_timeout):
	// the router answers only once output began, so the provider produced,
	// and bills, what it produced up to the cut; the gateway bills the same,
	// from the usage read so far (the provider's counts, else the tokens
	// counted), as for a stream cut short. Priced before the 504 goes out,
	// as an answer is before its last bytes.
	timedOut := !res.Answered && errors.Is(res.Err, context.DeadlineExceeded)
	if timedOut {
		out.Price(u)
		w.Error(res.Err)
	}
	if !res.Answered && !leftAfterOutput && !timedOut {
		unhold()
		if exec != nil {
			s.idemDo(req, "idempotency tombstone", exec.Fail, exec.Abandon)
		}
		if res.Err != nil && !(errors.Is(res.Err, context.Canceled) && clientCtx.Err() != nil) {
			w.Error(res.Err)
		}
		return
	}
	log.Metrics.Cost = u.Cost
	if !out.priced {
		out.setCost(u)
	}
	// The record is completed before the bill is applied: the cost is
	// durable already (or being retried), and a retry should find the
	// answer as soon as possible.
	switch {
	case exec != nil && res.Answered:
		s.idemDo(req, "idempotency complete", exec.Complete, exec.Abandon)
	case exec != nil:
		// Cut by the ceiling: no answer to replay; a retry is told so (409
		// idempotency_replay_unavailable) and never runs it again.
		s.idemDo(req, "idempotency tombstone", exec.Fail, exec.Abandon)
	}
	if s.accounts.Ledger != nil && !out.settled {
		// out.entry is final: the codec is done with out. The Finisher
		// may retry the bill for half an hour (a ledger outage): the step
		// holds a copy of the entry, and nothing else of the request (the
		// client's writer, the upstream stream, the recorded answer).
		entry := out.entry
		s.fin.do(req.group, "billing settle", func(ctx context.Context) error { return s.accounts.Ledger.Bill(ctx, entry) }, nil, s.ledgerLocal)
	}
}

// unholdStep is the Finisher's step that releases a request's hold.
func (s *Service) unholdStep(project, requestID string) func(context.Context) error {
	return func(ctx context.Context) error { return s.accounts.Ledger.Unhold(ctx, project, requestID) }
}

func (s *Service) hold(ctx context.Context, h billing.Hold) error {
	if s.accounts.Ledger == nil {
		return nil
	}
	hctx, cancel := storecall.Bound(ctx, 10*time.Second, s.ledgerLocal)
	defer cancel()
	return s.accounts.Ledger.Hold(hctx, h)
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

// tee is the Emitter of a live answer: the client, and for a keyed request
// also the record. A keyed request outlives its client: once a write to the
// client fails, the answer is still read to the end and recorded.
type tee struct {
	ctx       context.Context
	w         Writer
	exec      *idempotency.Execution
	svc       *Service
	entry     billing.Entry // the request's bill, priced by setCost
	clientErr error
	priced    bool
	// settle: Price applies the bill (Ledger.Bill), not only its price;
	// settled: it did.
	settle, settled bool
	// extra are headers for the client's answer alone (rate limits), not
	// recorded for replays.
	extra map[string]string
	// rate is the request's count against its rate limits (nil: none),
	// which follows the answer into each minute it sends output in.
	rate *rateHold
}

func (t *tee) Start(status int, header map[string]string, stream bool) {
	t.rate.follow()
	if len(t.extra) > 0 {
		h := make(map[string]string, len(header)+len(t.extra))
		for k, v := range header {
			h[k] = v
		}
		for k, v := range t.extra {
			h[k] = v
		}
		t.w.Start(status, h, stream)
	} else {
		t.w.Start(status, header, stream)
	}
	if t.exec != nil {
		t.exec.Start(status, header, stream)
	}
}

func (t *tee) Body(b []byte) {
	t.rate.follow()
	if t.exec != nil {
		t.exec.Body(b)
	}
	if t.clientErr == nil {
		t.clientErr = t.w.Body(b)
	}
}

func (t *tee) Event(ev idempotency.Event, send bool) error {
	t.rate.follow()
	if t.exec != nil {
		t.exec.Event(t.ctx, ev)
	}
	if send && t.clientErr == nil {
		t.clientErr = t.w.Event(ev.Name, ev.Data)
	}
	if t.exec != nil {
		return nil
	}
	return t.clientErr
}

func (t *tee) setCost(u llm.Usage) {
	t.entry.PromptTokens, t.entry.CompletionTokens = u.PromptTokens, u.CompletionTokens
	t.entry.CostNanos = billing.USDToNanos(u.Cost)
	t.priced = true
}

// Price writes the answer's cost before its last bytes go out; for a
// bounded account (tee.settle) it applies the bill, so that the client's
// next request, sent once this answer is received, is checked against a
// balance that counts it. A failure (the store unreachable) does not hold
// the answer back: the Finisher bills.
func (t *tee) Price(u llm.Usage) {
	// What the writer held back goes out before the ledger write: only the
	// answer's last bytes wait for the price.
	if f, ok := t.w.(interface{ Flush() error }); ok {
		_ = f.Flush()
	}
	t.setCost(u)
	if t.svc.accounts.Ledger == nil {
		return
	}
	// The price is written even when the client is gone.
	ctx, cancel := storecall.Detached(t.ctx, priceTimeout, t.svc.ledgerLocal)
	defer cancel()
	if t.settle {
		err := t.svc.accounts.Ledger.Bill(ctx, t.entry)
		if err == nil {
			t.settled = true
			return
		}
		t.svc.log.Warn("billing not applied with the price; the finisher bills", "request_id", t.entry.RequestID, "error", err)
		return
	}
	if err := t.svc.accounts.Ledger.Price(ctx, t.entry); err != nil {
		t.svc.log.Warn("billing price not recorded; the finisher bills", "request_id", t.entry.RequestID, "error", err)
	}
}

// writeReply writes a replay, a waiter's answer or a joined stream, and
// reports whether the client took all of it (a client gone or dropped did
// not).
func writeReply(ctx context.Context, w Writer, codec Codec, r *idempotency.Reply) (delivered bool) {
	w.Start(r.Head.Status, r.Head.Header, r.Stream)
	if !r.Stream {
		return w.Body(r.Body) == nil
	}
	for {
		ev, err := r.Next(ctx)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				jb := codec.JoinBroken(joinReason(err))
				return w.Event(jb.Name, jb.Data) == nil
			}
			return true
		}
		if w.Event(ev.Name, ev.Data) != nil {
			return false
		}
	}
}

// joinReason is what a broken join tells its client: the reason the
// idempotency layer gives, never the text of an internal cause.
func joinReason(err error) string {
	var je *idempotency.JoinError
	if errors.As(err, &je) {
		return je.Reason
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return "the wait for the first request reached its time limit"
	}
	return "the answer can no longer be joined"
}
