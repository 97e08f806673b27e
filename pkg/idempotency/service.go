package idempotency

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/internal/storecall"
)

// DefaultStoreTimeout bounds one store call the service makes on its own
// behalf (Config.StoreTimeout).
const DefaultStoreTimeout = 10 * time.Second

// Config is the service's timing and size policy.
type Config struct {
	// Window is how long a key is remembered.
	Window time.Duration
	// Lease is how long a reservation lives without a heartbeat; the owner
	// renews it every Lease/3.
	Lease time.Duration
	// MaxResponseBytes: a larger answer is not stored and its reservation is
	// released, so that a retry runs again.
	MaxResponseBytes int64
	// MaxWait is how long a retry waits for the first call to answer (or,
	// for a stream, to start) before it answers 409 idempotency_in_progress.
	MaxWait time.Duration
	// PollInterval is the first wait between two reads of the store while a
	// retry waits for a request running on another instance; it doubles up
	// to 8 times its value.
	PollInterval time.Duration
	// AppendInterval batches a running stream's events into one store write
	// at most this often, for retries on other instances to join.
	AppendInterval time.Duration
	// StoreTimeout bounds each store call the service makes on its own (a
	// reservation, a retry's reads), unless the store is in this process:
	// a store that stops answering costs a call this long, not the wait
	// it was given. DefaultStoreTimeout when <= 0.
	StoreTimeout time.Duration
}

func (c *Config) defaults() {
	if c.Window <= 0 {
		c.Window = 24 * time.Hour
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = 1 << 20
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 600 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 50 * time.Millisecond
	}
	if c.AppendInterval <= 0 {
		c.AppendInterval = 250 * time.Millisecond
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = DefaultStoreTimeout
	}
}

// Service runs the Idempotency-Key protocol over a Store: it reserves,
// heartbeats, records and completes the first call, and answers retries from
// the record: replay, wait, join, or a documented 409.
type Service struct {
	store Store
	cfg   Config
	now   func() time.Time
	log   *slog.Logger

	mu      sync.Mutex
	flights map[flightKey]*flight

	inProcess bool // the store says so (InProcess)
}

// New returns a service over store. now and log may be nil.
func New(store Store, cfg Config, now func() time.Time, log *slog.Logger) *Service {
	cfg.defaults()
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, cfg: cfg, now: now, log: log, flights: map[flightKey]*flight{},
		inProcess: storecall.InProcess(store)}
}

func unavailable(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Request is what Begin needs to know of a keyed request.
type Request struct {
	// Key is the record key (Identity), Fingerprint the request's
	// (Fingerprint), RequestID its x-request-id.
	Key, Fingerprint, RequestID string
	// Tenant is the project: the memory store shares its room fairly
	// between tenants.
	Tenant string
}

// InProcess reports whether the store's calls never wait on a network or a
// disk (the memory store): a caller may then skip giving each its own
// deadline, as Begin does.
func (s *Service) InProcess() bool { return s.inProcess }

// Begin reserves the record for req.Key, or finds the record that holds it.
// It returns an Execution when this request owns the record and must run
// (a new record, or one taken over: see Store.Reserve), or the existing
// record when another request got there first (the caller then answers with
// Serve). An error wraps ErrUnavailable (the store could not be reached; or
// ErrFull too: it has no room).
func (s *Service) Begin(ctx context.Context, req Request) (*Execution, *Record, error) {
	now := s.now()
	owner := newToken()
	key := req.Key
	rec := &Record{
		Key: key, Fingerprint: req.Fingerprint, State: StateInProgress, Owner: owner,
		LeaseUntil: now.Add(s.cfg.Lease), ExpiresAt: now.Add(s.cfg.Window), RequestID: req.RequestID,
		Tenant: req.Tenant,
	}
	// The flight is registered before the reservation exists, so that a
	// retry on this instance that sees the reservation always finds it.
	f := newFlight()
	s.mu.Lock()
	s.flights[flightKey{key, owner}] = f
	s.mu.Unlock()
	// The reservation is not cut short by the client going away: a write
	// that lands after its caller gave up would hold the key with nobody
	// running it.
	rctx, cancel := storecall.Detached(ctx, s.cfg.StoreTimeout, s.inProcess)
	existing, err := s.store.Reserve(rctx, rec, now)
	cancel()
	if err != nil || existing != nil {
		s.dropFlight(key, owner)
		if err != nil {
			// The write may have landed even so (its answer was lost): undo
			// it, best effort. Should that fail too, the record never
			// started, so a retry takes it over once its lease lapsed.
			if !errors.Is(err, ErrFull) {
				rctx, cancel := storecall.Detached(ctx, s.cfg.StoreTimeout, s.inProcess)
				s.store.Release(rctx, key, owner)
				cancel()
			}
			return nil, nil, unavailable(err)
		}
		return nil, existing, nil
	}
	e := &Execution{svc: s, key: key, owner: owner, flight: f}
	e.hbMu.Lock() // heartbeat reads e.hb under it
	e.hb = time.AfterFunc(e.hbInterval(), e.heartbeat)
	e.hbMu.Unlock()
	return e, nil, nil
}

// flightKey is a flight's key in Service.flights: a record's key and the
// token of the execution that owns it.
type flightKey struct{ key, owner string }

func (s *Service) flight(key, owner string) *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flights[flightKey{key, owner}]
}

func (s *Service) dropFlight(key, owner string) {
	s.mu.Lock()
	delete(s.flights, flightKey{key, owner})
	s.mu.Unlock()
}

func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hexString(b[:])
}

// Execution is the first call of a key, running. It records the answer as it
// is written, shares it live with retries on this instance, appends stream
// events to the store for retries on other instances, renews the lease, and
// finally completes, tombstones or releases the record. Its methods are for
// one goroutine (the request's).
//
// Its end (Complete, Fail, Release) is durable: the first end call fixes
// the outcome and hands it at once to the retries on this instance; its
// store write may fail (ErrUnavailable), and then any end call does the
// same write again (a write that landed although its answer was lost reads
// as success). The lease is renewed until an end write succeeds or Abandon
// is called: the caller must do one of the two. ErrNotOwner from an end
// call is final (the record is another owner's now).
type Execution struct {
	svc    *Service
	key    string
	owner  string
	flight *flight

	// The lease is renewed by a timer: most requests end long before
	// the first renewal, and then no goroutine was ever started for it.
	// hbMu guards hbStopped and hb's Reset; hbRunning counts a renewal in
	// progress, which stop waits for.
	hb        *time.Timer
	hbMu      sync.Mutex
	hbStopped bool
	hbRunning sync.WaitGroup

	started bool

	head     *Head
	stream   bool
	body     []byte
	events   []Event
	size     int64
	tooLarge bool

	// The appender writes batches of events to the store in a goroutine of
	// its own, so that a slow store never slows the answer; amu guards what
	// it shares with Event.
	amu        sync.Mutex
	appended   int // events already appended to the store
	seq        int
	appendErr  bool
	appendSig  chan struct{} // an event is waiting (buffered, one)
	appendQuit chan struct{} // closed when the record ends
	appendDone chan struct{}
	appendStop sync.Once

	outcome outcome // fixed by the first end call
	answer  *Answer
	done    bool // the end write succeeded
}

func (e *Execution) hbInterval() time.Duration {
	return max(e.svc.cfg.Lease/3, time.Millisecond)
}

// heartbeat renews the lease (it runs on the timer's goroutine) and sets
// the timer again, until stop. The next renewal is due an interval after
// this one began, as with a ticker: a slow store call does not push the
// renewals apart (one that took the whole interval is followed at once).
func (e *Execution) heartbeat() {
	began := time.Now()
	e.hbMu.Lock()
	if e.hbStopped {
		e.hbMu.Unlock()
		return
	}
	e.hbRunning.Add(1)
	e.hbMu.Unlock()
	defer e.hbRunning.Done()

	ctx, cancel := context.WithTimeout(context.Background(), max(e.svc.cfg.Lease/3, time.Second))
	err := e.svc.store.Heartbeat(ctx, e.key, e.owner, e.svc.now().Add(e.svc.cfg.Lease))
	cancel()
	if errors.Is(err, ErrNotOwner) {
		return // ended (an end write landed) or taken over: nothing to renew
	}
	if err != nil {
		e.svc.log.Warn("idempotency heartbeat failed", "error", err)
	}
	e.hbMu.Lock()
	if !e.hbStopped {
		e.hb.Reset(untilNextRenewal(began, time.Now(), e.hbInterval()))
	}
	e.hbMu.Unlock()
}

// untilNextRenewal is the wait before the renewal after one that began at
// began: an interval after that, none if it is already past.
func untilNextRenewal(began, now time.Time, interval time.Duration) time.Duration {
	return max(began.Add(interval).Sub(now), 0)
}

// stop ends the renewals, waiting for one in progress.
func (e *Execution) stop() {
	e.hbMu.Lock()
	e.hbStopped = true
	e.hb.Stop()
	e.hbMu.Unlock()
	e.hbRunning.Wait()
}

// Finished reports whether an end (Complete, Fail or Release) was called.
func (e *Execution) Finished() bool { return e.outcome != outcomeRunning }

// MarkStarted records, durably, that the request is about to call a
// provider: the caller calls it right before the first provider call and
// does not call the provider when it fails. After it the record is never
// taken over: a retry after the owner died answers 409. Calling it again is
// free.
func (e *Execution) MarkStarted(ctx context.Context) error {
	if e.started {
		return nil
	}
	if err := e.svc.store.MarkStarted(ctx, e.key, e.owner); err != nil {
		if errors.Is(err, ErrNotOwner) {
			return err
		}
		return unavailable(err)
	}
	e.started = true
	return nil
}

// Start records the answer's status and headers.
func (e *Execution) Start(status int, header map[string]string, stream bool) {
	e.head = &Head{Status: status, Header: header}
	e.stream = stream
	e.flight.update(func(f *flight) { f.head = e.head })
}

// Body records (part of) a non-streaming answer's body.
func (e *Execution) Body(b []byte) {
	e.size += int64(len(b))
	if e.size > e.svc.cfg.MaxResponseBytes {
		e.tooLarge = true
		e.body = nil
		return
	}
	e.body = append(e.body, b...)
}

// Event records one stream event, shares it with local joiners, and now and
// then appends the events so far to the store for remote joiners. Past
// max_response_bytes nothing more is kept (the answer will not be stored):
// joiners that have not caught up end with ErrJoinBroken.
func (e *Execution) Event(ctx context.Context, ev Event) {
	if e.tooLarge {
		return
	}
	e.size += int64(len(ev.Data))
	if e.size > e.svc.cfg.MaxResponseBytes {
		e.amu.Lock()
		e.tooLarge = true
		e.events = nil
		e.amu.Unlock()
		e.flight.update(func(f *flight) { f.overflow = true })
		return
	}
	ev.Data = append([]byte(nil), ev.Data...)
	e.amu.Lock()
	e.events = append(e.events, ev)
	e.amu.Unlock()
	e.flight.update(func(f *flight) { f.events = append(f.events, ev) })
	if e.appendSig == nil {
		e.appendSig, e.appendQuit, e.appendDone = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go e.appender()
	}
	select {
	case e.appendSig <- struct{}{}:
	default: // already signalled: the next batch takes this one too
	}
}

// appendTimeout bounds one batch's write.
const appendTimeout = 5 * time.Second

// appender writes the events not yet in the store, a batch per signal,
// and at most one batch per AppendInterval: a batch waits until the
// interval since the one before it has passed, and a signal left meanwhile
// starts it with every event since. So the tail of a burst reaches the store one interval after
// the batch before it, even when the provider then pauses (an event that
// only woke the appender once the interval had passed waited for the next
// event, the pause's whole length). A failure is logged and stops the
// appends: it only costs remote joiners their live view (the answer is
// still stored whole at the end).
func (e *Execution) appender() {
	defer close(e.appendDone)
	pace := time.NewTimer(0)
	defer pace.Stop()
	for range e.appendSig {
		select {
		case <-e.appendQuit:
			return
		case <-pace.C:
			pace.Reset(e.svc.cfg.AppendInterval) // the next batch waits until then
		}
		e.amu.Lock()
		if e.appendErr || e.tooLarge || e.appended == len(e.events) {
			e.amu.Unlock()
			continue
		}
		var head *Head
		if e.seq == 0 {
			head = e.head
		}
		batch := e.events[e.appended:len(e.events):len(e.events)]
		seq := e.seq
		e.amu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), appendTimeout)
		err := e.svc.store.Append(ctx, e.key, e.owner, seq, head, batch)
		cancel()
		e.amu.Lock()
		if err != nil {
			e.appendErr = true
			e.svc.log.Warn("idempotency append failed", "error", err)
		} else {
			e.seq++
			e.appended += len(batch)
		}
		e.amu.Unlock()
	}
}

// stopAppender waits for a batch being written, and ends the appender.
func (e *Execution) stopAppender() {
	e.appendStop.Do(func() {
		if e.appendSig != nil {
			close(e.appendQuit) // no batch waits out its interval now
			close(e.appendSig)
			<-e.appendDone
		}
	})
}

// Complete stores the recorded answer, or, when it is larger than
// max_response_bytes (or there is none), releases the record so that a
// retry runs again.
func (e *Execution) Complete(ctx context.Context) error { return e.end(ctx, outcomeCompleted) }

// Fail ends the record without an answer: the request failed after it was
// accepted, and a retry answers 409 idempotency_replay_unavailable.
func (e *Execution) Fail(ctx context.Context) error { return e.end(ctx, outcomeFailed) }

// Release deletes the record: the request was refused before it ran (a
// spent balance, say), so a retry runs normally.
func (e *Execution) Release(ctx context.Context) error { return e.end(ctx, outcomeReleased) }

// Abandon gives up an end write that keeps failing (or an execution that
// never ended): the lease is no longer renewed and this instance's retries
// stop following it. The record then reads, once its lease lapsed, as a
// tombstone when it started and as free to take over when it did not.
func (e *Execution) Abandon() {
	if e.done {
		return
	}
	e.stopAppender()
	if e.outcome == outcomeRunning {
		o := outcomeFailed
		if !e.started {
			o = outcomeReleased
		}
		e.flight.finish(o, nil)
	}
	e.done = true
	e.stop()
	e.svc.dropFlight(e.key, e.owner)
}

func (e *Execution) end(ctx context.Context, o outcome) error {
	if e.done {
		return nil
	}
	e.stopAppender()
	if e.outcome == outcomeRunning {
		if o == outcomeCompleted && (e.tooLarge || e.head == nil) {
			o = outcomeReleased
		}
		e.outcome = o
		if o == outcomeCompleted {
			e.answer = &Answer{Head: *e.head, Stream: e.stream, Body: e.body, Events: e.events}
		}
		e.flight.finish(o, e.answer)
		if o == outcomeReleased {
			// Retries here follow the record in the store until the
			// release lands, then run again.
			e.svc.dropFlight(e.key, e.owner)
		}
	}
	if err := e.write(ctx); err != nil {
		return err
	}
	e.done = true
	e.stop()
	e.svc.dropFlight(e.key, e.owner)
	return nil
}

// write does the end write of the fixed outcome. ErrNotOwner is checked
// with a read: the same write may have landed before (its answer lost, in
// an earlier call or in the SDK's own retry).
func (e *Execution) write(ctx context.Context) error {
	st := e.svc.store
	var err error
	switch e.outcome {
	case outcomeCompleted:
		err = st.Complete(ctx, e.key, e.owner, e.answer)
	case outcomeFailed:
		err = st.Tombstone(ctx, e.key, e.owner)
	default:
		err = st.Release(ctx, e.key, e.owner)
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrNotOwner) {
		return unavailable(err)
	}
	rec, lerr := st.Load(ctx, e.key, e.svc.now())
	switch {
	case e.outcome == outcomeReleased && (errors.Is(lerr, ErrNotFound) || lerr == nil && rec.Owner != e.owner):
		return nil // gone, or another owner's: nothing of ours is left
	case lerr != nil && !errors.Is(lerr, ErrNotFound):
		return unavailable(lerr)
	case lerr == nil && rec.Owner == e.owner && (e.outcome == outcomeCompleted && rec.State == StateCompleted ||
		e.outcome == outcomeFailed && rec.State == StateTombstone):
		return nil // landed already
	}
	return err
}

type outcome int

const (
	outcomeRunning outcome = iota
	outcomeCompleted
	outcomeFailed
	outcomeReleased
)

// flight is a running execution as retries on the same instance see it.
type flight struct {
	mu       sync.Mutex
	head     *Head
	events   []Event
	overflow bool // past max_response_bytes: events are no longer kept
	outcome  outcome
	answer   *Answer
	changed  chan struct{}
}

func newFlight() *flight { return &flight{changed: make(chan struct{})} }

func (f *flight) update(fn func(*flight)) {
	f.mu.Lock()
	fn(f)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *flight) finish(o outcome, ans *Answer) {
	f.update(func(f *flight) { f.outcome, f.answer = o, ans })
}

// flightState is a snapshot of a flight.
type flightState struct {
	head     *Head
	events   []Event
	overflow bool
	outcome  outcome
	answer   *Answer
	changed  <-chan struct{} // closed at the flight's next change
}

func (f *flight) snapshot() flightState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return flightState{f.head, f.events[:len(f.events):len(f.events)], f.overflow, f.outcome, f.answer, f.changed}
}
