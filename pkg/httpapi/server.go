// Package httpapi is buzzgate's HTTP front: the http.Handler that routes
// each path, authenticates, reads the body and runs a generation request
// through the pipeline with its client API (pkg/clientapi/chat, messages,
// responses: their decoders and codecs), and serves the account, models and
// token-count endpoints. It is plain net/http, so the same handler serves a
// local port and, wrapped at the edge, Lambda.
package httpapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/clientapi/responses"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/metrics"
	"github.com/buzzgate/buzzgate/pkg/ratelimit"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// Server is the gateway's http.Handler.
type Server struct {
	cfg      *catalog.Config
	router   *router.Router
	svc      *gateway.Service
	fin      *gateway.Finisher
	idem     *idempotency.Service
	metrics  metrics.Recorder
	accounts Accounts
	log      *slog.Logger
	now      func() time.Time
	// keepAlive is Options.JSONKeepAlive.
	keepAlive time.Duration

	keys      map[[sha256.Size]byte]*principal
	responses *responses.Service
	models    *modelCatalog
	mux       *http.ServeMux
}

// principal is an authenticated caller: a project and one of its keys.
type principal struct {
	gateway.Caller
	// keyID is a short prefix of the key's SHA-256, safe to log.
	keyID string
	// storeHash is a config key's billing.HashKey, for the key store's
	// lookup: computed once, not on each request.
	storeHash string
}

// Options are the Server's optional dependencies.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time
	// Idempotency serves Idempotency-Key requests; nil answers them 503.
	Idempotency *idempotency.Service
	// Finisher retries the writes after an answer; nil: a new one.
	Finisher *gateway.Finisher
	// Metrics records one entry per chat completion; nil records nothing.
	Metrics metrics.Recorder
	// Accounts holds balances, limits, the usage ledger and issued keys;
	// a zero Accounts bills nothing and enforces no balance.
	Accounts Accounts
	// JSONKeepAlive, when positive, is how long a JSON answer being
	// produced may leave its client's connection idle: past it the status
	// (200) goes out with whitespace, and more every JSONKeepAlive
	// (clientapi.Wire.KeepAlive). 0: never.
	JSONKeepAlive time.Duration
}

// Accounts is the billing side of the gateway.
type Accounts struct {
	Ledger billing.Ledger
	// Keys finds keys issued by the admin tool; nil: config keys only.
	Keys billing.KeyStore
	// Pepper is mixed into every stored key hash.
	Pepper []byte
	// Limiter counts the projects' and keys' rpm and tpm; nil: in the
	// process.
	Limiter ratelimit.Limiter
}

// New returns the handler for cfg's projects and models.
func New(cfg *catalog.Config, rt *router.Router, opts Options) *Server {
	s := &Server{cfg: cfg, router: rt, log: opts.Logger, now: opts.Now, accounts: opts.Accounts, keepAlive: opts.JSONKeepAlive}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.metrics = opts.Metrics
	if s.metrics == nil {
		s.metrics = metrics.Discard{}
	}
	s.idem = opts.Idempotency
	s.fin = opts.Finisher
	if s.fin == nil {
		s.fin = gateway.NewFinisher(gateway.FinisherOptions{Log: s.log})
	}
	s.svc = gateway.New(gateway.Config{MaxInFlight: cfg.Server.MaxInFlight, RequestTimeout: cfg.Server.RequestTimeout.D()},
		rt, opts.Idempotency, gateway.Accounts{Ledger: opts.Accounts.Ledger, Keys: opts.Accounts.Keys, Pepper: opts.Accounts.Pepper, Limiter: opts.Accounts.Limiter}, s.fin, s.log, s.now)
	s.keys = make(map[[sha256.Size]byte]*principal)
	for i := range cfg.Projects {
		p := &cfg.Projects[i]
		for _, k := range p.Keys {
			h := sha256.Sum256([]byte(k.Key))
			s.keys[h] = &principal{keyID: hex.EncodeToString(h[:6]), storeHash: billing.HashKey(s.accounts.Pepper, k.Key), Caller: gateway.Caller{Project: p, KeyHash: h,
				Policy: llm.ParseDataPolicy(p.DataPolicy), BillingKeyID: billing.ConfigKeyID(s.accounts.Pepper, k.Key), FromConfig: true,
				KeyRates: billing.Rates{RPM: k.RPM, TPM: k.TPM, Budget: k.Budget}}}
		}
	}
	s.models = newModelCatalog(cfg)
	s.responses = responses.New(responses.Deps{Idempotency: opts.Idempotency, Now: s.now, Log: s.log, MaxBodyBytes: cfg.Server.MaxBodyBytes})
	s.mux = s.routes()
	return s
}

// ServeHTTP gives every response an x-request-id, recovers from a panic with
// a 500 envelope (a bug, logged with the request id), and dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Finisher.Wait covers the request to its log line: its answer may
	// reach the client before its record, its bill and its metrics.
	defer s.fin.Track()()
	id := newRequestID()
	x := &exchange{Recorder: clientapi.Recorder{ResponseWriter: w}, id: id, idValue: [1]string{id}}
	// As Header.Set, with the value's slice in x: one allocation fewer.
	w.Header()["X-Request-Id"] = x.idValue[:]
	start := s.now()
	rec, info := &x.Recorder, &x.info
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic serving request", "request_id", id, "panic", v)
			if rec.Wrote {
				// Too late for a status: the response must break off, as
				// for a dropped client (wire.Abort), never end as if it
				// were whole.
				panic(http.ErrAbortHandler)
			}
			rec.Status = errorsFor(r)(rec, errors.New("panic"))
		}
	}()
	defer func() {
		// A client the gateway dropped (wire.Abort) loses its connection,
		// after the request's log line: the response must not end as if
		// it were whole.
		if rec.Aborted {
			panic(http.ErrAbortHandler)
		}
	}()
	// The request's log line is at info: below that level nothing is
	// collected for it (half a kilobyte of attributes a request).
	info.Off = !s.log.Enabled(r.Context(), slog.LevelInfo)
	if !info.Off {
		// The line's own attributes go in front of the handlers', in
		// slots kept for them.
		info.Attrs = make([]slog.Attr, lineHead, lineHead+16)
	}
	s.dispatch(x, r)
	status := rec.Status
	if status == 0 {
		status = http.StatusOK
	}
	if info.ClientGone {
		status = 499 // nginx's "client closed request", for the logs only
	}
	if rec.Aborted {
		info.Add(slog.Bool("client_dropped", true))
	}
	if rec.KeptAlive {
		info.Add(slog.Bool("kept_alive", true))
	}
	if info.chat {
		m := info.Metrics
		m.Status, m.Latency = status, s.now().Sub(start)
		switch rec.Code {
		case llm.CodeIdempotencyConflict:
			m.Conflict = true
		case llm.CodeReplayUnavailable:
			m.ReplayUnavailable = true
		case llm.CodeInProgress:
			m.InProgress = true
		case llm.CodeStoreUnavailable:
			m.StoreError = true
		case llm.CodeBudgetExceeded:
			m.BudgetRefused = true
		case llm.CodeInsufficientBalance, llm.CodeKeyLimitReached:
			m.BalanceRefused = true
		case llm.CodeRateLimited:
			m.RateLimited = true
		}
		s.metrics.Record(m)
	}
	if info.Off {
		return
	}
	attrs := info.Attrs
	attrs[0] = slog.String("request_id", id)
	attrs[1] = slog.String("method", r.Method)
	attrs[2] = slog.String("path", clientapi.Sanitize(r.URL.Path))
	attrs[3] = slog.Int("status", status)
	attrs[4] = slog.Float64("duration_ms", float64(s.now().Sub(start).Microseconds())/1000)
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

// lineHead is the number of attributes the request's log line begins
// with: request_id, method, path, status and duration_ms.
const lineHead = 5

// logInfo collects what a handler wants in the request's log line. Never a
// prompt, an answer or a key: only ids, names and numbers.
type logInfo struct {
	gateway.Log
	// chat marks a chat completion, which reports metrics.
	chat bool
}

func newRequestID() string {
	var r [12]byte
	rand.Read(r[:])
	b := [len("req_") + 2*len(r)]byte{'r', 'e', 'q', '_'}
	hex.Encode(b[len("req_"):], r[:])
	return string(b[:]) // one allocation; "req_" + EncodeToString makes two
}

// authenticate finds the caller by the SHA-256 of its key, which every
// endpoint takes in Authorization: Bearer <key> (the OpenAI SDKs) or in
// x-api-key: <key> (the Anthropic SDKs). A request may carry the key more
// than once (both headers, or one of them twice) only if every copy is the
// same key: two different keys are refused (401), whichever of them is
// valid, rather than one chosen silently. Only hashes are kept and
// compared: the map lookup never touches the raw key, and the comparisons
// are constant-time.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	token, err := requestKey(r.Header)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256([]byte(token))
	cfgKey, ok := s.keys[h]
	if ok && subtle.ConstantTimeCompare(cfgKey.KeyHash[:], h[:]) != 1 {
		cfgKey = nil
	}
	if s.accounts.Keys == nil {
		if cfgKey != nil {
			return cfgKey, nil
		}
		return nil, llm.Errorf(llm.CodeInvalidAPIKey, "", "invalid API key")
	}
	// Keys issued by the admin tool live in the key store, hashed with the
	// pepper, behind a short in-process cache. A config key is asked about
	// too: one revoked with the admin tool stays revoked, whatever the
	// config file says.
	storeHash := ""
	if cfgKey != nil {
		storeHash = cfgKey.storeHash
	} else {
		storeHash = billing.HashKey(s.accounts.Pepper, token)
	}
	rec, err := s.accounts.Keys.Lookup(r.Context(), storeHash)
	switch {
	case err == nil && cfgKey != nil:
		return cfgKey, nil
	case err == nil:
	case errors.Is(err, billing.ErrUnknownKey) && cfgKey != nil:
		return cfgKey, nil
	case errors.Is(err, billing.ErrUnknownKey), errors.Is(err, billing.ErrKeyRevoked):
		return nil, llm.Errorf(llm.CodeInvalidAPIKey, "", "invalid API key")
	default:
		return nil, gateway.BillingUnavailable(err)
	}
	project, ok := s.cfg.Project(rec.Project)
	if !ok {
		project = &catalog.Project{ID: rec.Project, DataPolicy: "none", Residency: "anywhere"}
	}
	return &principal{keyID: hex.EncodeToString(h[:6]), Caller: gateway.Caller{Project: project, KeyHash: h,
		Policy: llm.ParseDataPolicy(project.DataPolicy), BillingKeyID: rec.KeyID,
		KeyRates: rec.Rates}}, nil
}

// requestKey is the one API key a request carries: every Authorization:
// Bearer value and every x-api-key value must be the same key.
func requestKey(h http.Header) (string, error) {
	var (
		token          string
		found          bool
		first, firstIn string
	)
	const prefix = "bearer "
	add := func(key, in string) error {
		if !found {
			token, found, first, firstIn = key, true, key, in
			return nil
		}
		a, b := sha256.Sum256([]byte(first)), sha256.Sum256([]byte(key))
		if subtle.ConstantTimeCompare(a[:], b[:]) == 1 {
			return nil
		}
		if in == firstIn {
			return llm.Errorf(llm.CodeInvalidAPIKey, "", "two %s headers carry two different keys; send one key", in)
		}
		return llm.Errorf(llm.CodeInvalidAPIKey, "", "Authorization: Bearer and x-api-key carry two different keys; send one key")
	}
	for _, auth := range h.Values("Authorization") {
		if len(auth) > len(prefix) && strings.EqualFold(auth[:len(prefix)], prefix) {
			if err := add(strings.TrimSpace(auth[len(prefix):]), "Authorization"); err != nil {
				return "", err
			}
		}
	}
	for _, v := range h.Values("X-Api-Key") {
		if apiKey := strings.TrimSpace(v); apiKey != "" {
			if err := add(apiKey, "x-api-key"); err != nil {
				return "", err
			}
		}
	}
	if !found {
		return "", llm.Errorf(llm.CodeInvalidAPIKey, "", "missing API key: send Authorization: Bearer <key> or x-api-key: <key>")
	}
	return token, nil
}

// getResponse serves GET /api/v1/responses/{id}: a kept response of the
// caller's own project.
func (s *Server) getResponse(w *clientapi.Recorder, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		clientapi.WriteError(w, err)
		return
	}
	s.responses.ServeKept(r.Context(), w, p.Project.ID, r.PathValue("id"))
}

// readBody reads at most the configured body size (more is a 413), whole,
// within server.body_timeout (later is a 408 body_timeout): a client that
// trickles its body holds a connection, never an admission slot, since a
// request is admitted only once its body is read.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.cfg.Server.MaxBodyBytes
	tooLarge := func() error {
		return llm.Errorf(llm.CodeRequestTooLarge, "", "request body is larger than %d bytes", limit)
	}
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	rc := http.NewResponseController(w)
	timeout := s.cfg.Server.BodyTimeout.D()
	deadlineSet := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	body, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if deadlineSet {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return nil, tooLarge()
		case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
			// The connection cannot be read again: close it after the answer.
			w.Header().Set("Connection", "close")
			return nil, llm.Errorf(llm.CodeBodyTimeout, "", "the request body did not arrive within %s", s.cfg.Server.BodyTimeout)
		}
		return nil, llm.Errorf(llm.CodeInvalidRequest, "", "could not read the request body")
	}
	return body, nil
}

// readAll is io.ReadAll for a body that says its length n (-1: unknown).
// A large body is read into pooled chunks until half of it has come; the
// rest is read straight into one buffer of its size, into which the
// chunks are copied. A 1 MB body allocates 1 MB (io.ReadAll's doubling
// buffer, each time copied, allocates twice that) and is copied half, and
// what a client pins by announcing a length stays within twice what it
// sent.
func readAll(r io.Reader, n int64) ([]byte, error) {
	switch {
	case n < 0:
		return io.ReadAll(r)
	case n < readChunk:
		return readInto(r, make([]byte, 0, n+1))
	}
	var chunks [][]byte
	defer func() {
		for _, c := range chunks {
			c := c[:0]
			chunkPool.Put(&c)
		}
	}()
	got := int64(0)
	for got < n/2 {
		c := (*chunkPool.Get().(*[]byte))[:0]
		chunks = append(chunks, c)
		for len(c) < cap(c) {
			m, err := r.Read(c[len(c):cap(c)])
			c = c[:len(c)+m]
			got += int64(m)
			chunks[len(chunks)-1] = c
			if err == io.EOF {
				return bytes.Join(chunks, nil), nil
			}
			if err != nil {
				return nil, err
			}
		}
	}
	b := make([]byte, 0, n+1)
	for _, c := range chunks {
		b = append(b, c...)
	}
	return readInto(r, b)
}

// readInto reads r to its end into b, which has room for one byte more
// than r holds (the read that finds the end needs room); more than
// announced cannot come (net/http ends a body at its Content-Length), but
// if it does, b grows.
func readInto(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// readChunk is the size of readAll's chunks, and the body size from which
// it reads into them.
const readChunk = 64 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, readChunk); return &b }}
