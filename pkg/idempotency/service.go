package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// storeTimeout bounds one store call the service makes on its own behalf.
const storeTimeout = 10 * time.Second

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
	flights map[string]*flight
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
	return &Service{store: store, cfg: cfg, now: now, log: log, flights: map[string]*flight{}}
}

func unavailable(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Begin reserves the record for key, or finds the record that holds it. It
// returns an Execution when this request owns the record and must run, or
// the existing record when another request got there first (the caller then
// answers with Serve). An error means the store could not be reached.
func (s *Service) Begin(ctx context.Context, key, fingerprint, requestID string) (*Execution, *Record, error) {
	now := s.now()
	owner := newToken()
	rec := &Record{
		Key: key, Fingerprint: fingerprint, State: StateInProgress, Owner: owner,
		LeaseUntil: now.Add(s.cfg.Lease), ExpiresAt: now.Add(s.cfg.Window), RequestID: requestID,
	}
	// The flight is registered before the reservation exists, so that a
	// retry on this instance that sees the reservation always finds it.
	f := newFlight()
	s.mu.Lock()
	s.flights[key+"\x00"+owner] = f
	s.mu.Unlock()
	// The reservation is not cut short by the client going away: a write
	// that lands after its caller gave up would hold the key with nobody
	// running it.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	existing, err := s.store.Reserve(rctx, rec, now)
	cancel()
	if err != nil || existing != nil {
		s.dropFlight(key, owner)
		if err != nil {
			// The write may have landed even so (its answer was lost): undo
			// it, best effort, or the key would read as a dead owner's for
			// the whole window. Release is fenced by our owner token.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			s.store.Release(rctx, key, owner)
			cancel()
			return nil, nil, unavailable(err)
		}
		return nil, existing, nil
	}
	e := &Execution{svc: s, key: key, owner: owner, flight: f, stopHB: make(chan struct{}), hbDone: make(chan struct{})}
	go e.heartbeat()
	return e, nil, nil
}

func (s *Service) flight(key, owner string) *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flights[key+"\x00"+owner]
}

func (s *Service) dropFlight(key, owner string) {
	s.mu.Lock()
	delete(s.flights, key+"\x00"+owner)
	s.mu.Unlock()
}

func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Execution is the first call of a key, running. It records the answer as it
// is written, shares it live with retries on this instance, appends stream
// events to the store for retries on other instances, renews the lease, and
// finally completes, tombstones or releases the record. Its methods are for
// one goroutine (the request's); Finish-type methods end it.
type Execution struct {
	svc    *Service
	key    string
	owner  string
	flight *flight

	stopHB   chan struct{}
	hbDone   chan struct{}
	stopOnce sync.Once

	head     *Head
	stream   bool
	body     []byte
	events   []Event
	size     int64
	tooLarge bool

	appended   int // events already appended to the store
	seq        int
	lastAppend time.Time
	appendErr  bool
}

func (e *Execution) heartbeat() {
	defer close(e.hbDone)
	t := time.NewTicker(max(e.svc.cfg.Lease/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-e.stopHB:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), max(e.svc.cfg.Lease/3, time.Second))
			err := e.svc.store.Heartbeat(ctx, e.key, e.owner, e.svc.now().Add(e.svc.cfg.Lease))
			cancel()
			if err != nil {
				e.svc.log.Warn("idempotency heartbeat failed", "error", err)
			}
		}
	}
}

func (e *Execution) stop() {
	e.stopOnce.Do(func() {
		close(e.stopHB)
		<-e.hbDone
	})
}

// Finished reports whether Complete, Fail or Release was called.
func (e *Execution) Finished() bool {
	select {
	case <-e.stopHB:
		return true
	default:
		return false
	}
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
// then appends the events so far to the store for remote joiners.
func (e *Execution) Event(ctx context.Context, ev Event) {
	ev.Data = append([]byte(nil), ev.Data...)
	e.size += int64(len(ev.Data))
	if e.size > e.svc.cfg.MaxResponseBytes {
		e.tooLarge = true
	}
	if !e.tooLarge {
		// Past the cap the answer will not be stored: only local joiners,
		// through the flight, still need the events.
		e.events = append(e.events, ev)
	}
	e.flight.update(func(f *flight) { f.events = append(f.events, ev) })
	if now := e.svc.now(); !e.tooLarge && now.Sub(e.lastAppend) >= e.svc.cfg.AppendInterval {
		e.append(ctx)
		e.lastAppend = now
	}
}

// append writes the events not yet in the store as one batch. A failure is
// logged and only costs remote joiners their live view: the answer is still
// stored whole on completion.
func (e *Execution) append(ctx context.Context) {
	if e.appendErr || e.appended == len(e.events) {
		return
	}
	var head *Head
	if e.seq == 0 {
		head = e.head
	}
	batch := e.events[e.appended:]
	if err := e.svc.store.Append(ctx, e.key, e.owner, e.seq, head, batch); err != nil {
		e.appendErr = true
		e.svc.log.Warn("idempotency append failed", "error", err)
		return
	}
	e.seq++
	e.appended = len(e.events)
}

// Complete stores the recorded answer, or, when it is larger than
// max_response_bytes, releases the record so that a retry runs again.
func (e *Execution) Complete(ctx context.Context) error {
	e.stop()
	defer e.svc.dropFlight(e.key, e.owner)
	if e.tooLarge || e.head == nil {
		err := e.svc.store.Release(ctx, e.key, e.owner)
		e.flight.finish(outcomeReleased, nil)
		return err
	}
	ans := &Answer{Head: *e.head, Stream: e.stream, Body: e.body, Events: e.events}
	err := e.svc.store.Complete(ctx, e.key, e.owner, ans)
	e.flight.finish(outcomeCompleted, ans)
	return err
}

// Fail ends the record without an answer: the request failed after it was
// accepted, and a retry answers 409 idempotency_replay_unavailable.
func (e *Execution) Fail(ctx context.Context) error {
	e.stop()
	defer e.svc.dropFlight(e.key, e.owner)
	err := e.svc.store.Tombstone(ctx, e.key, e.owner)
	e.flight.finish(outcomeFailed, nil)
	return err
}

// Release deletes the record: the request was refused before it ran (a
// spent balance, say), so a retry runs normally.
func (e *Execution) Release(ctx context.Context) error {
	e.stop()
	defer e.svc.dropFlight(e.key, e.owner)
	err := e.svc.store.Release(ctx, e.key, e.owner)
	e.flight.finish(outcomeReleased, nil)
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
	mu      sync.Mutex
	head    *Head
	events  []Event
	outcome outcome
	answer  *Answer
	changed chan struct{}
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

// snapshot returns the flight's state and a channel closed at its next change.
func (f *flight) snapshot() (head *Head, events []Event, o outcome, ans *Answer, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head, f.events[:len(f.events):len(f.events)], f.outcome, f.answer, f.changed
}
