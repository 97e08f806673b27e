// Package memstore is the in-process idempotency.Store, the gateway's
// embedded default. Its records live in one process: they survive neither a
// restart nor a second instance.
//
// # What is bounded, and how
//
// The store counts bytes: for each record a fixed RecordOverhead plus its
// strings (key, fingerprint, owner, request id), the head and the events
// appended while it runs, and the stored answer (status line, header names
// and values, body, event data, plus EventOverhead per event and
// HeaderOverhead per header). When a write brings the count over maxBytes,
// the store first removes records whose window ended, then drops stored
// answers, oldest completion first, until the count fits. A record whose
// answer was dropped keeps its identity and its state until its window ends
// (Load and Reserve return it as StateCompleted with a nil Answer), so a
// retry answers "replay unavailable" instead of running again. An answer
// that cannot fit even with every other answer dropped is not stored at all
// (the record is completed without it), and dropping the others would not
// help, so they stay.
//
// Only answers are ever dropped. Records themselves, and the head and events
// of requests still running (which joiners read), are kept whatever the
// count says: correctness over memory. So when records and running streams
// alone exceed maxBytes, Bytes stays above maxBytes until their windows end.
// What bounds them is the traffic: records per window, and per running
// stream the service's max_response_bytes.
//
// # Expiry
//
// Every expiry check uses the now passed to Reserve or Load, as the
// interface asks: a record is live while now <= ExpiresAt. Removing a record
// whose window ended is lazy: Reserve replaces an ended record under its
// key, and every write also removes up to SweepBatch ended records, in
// ExpiresAt order (a min-heap), by the real clock less SweepGrace, so that
// the sweep never takes a record that a caller's now, lagging a little,
// still sees as live. There is no background goroutine.
//
// Every method is safe for concurrent use (one mutex; deep copies are made
// outside it). Data is copied in and out: a caller never shares a slice or a
// map with the store. Contexts are ignored: an in-process store cannot be
// unreachable, and it never fails with idempotency.ErrUnavailable.
package memstore

import (
	"bytes"
	"container/heap"
	"container/list"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
)

// Byte accounting: what a record, an event and a header cost on top of
// their own bytes.
const (
	RecordOverhead = 256
	EventOverhead  = 32
	HeaderOverhead = 32
)

// SweepBatch is how many ended records a write removes at most, and
// SweepGrace how long after its ExpiresAt (by the real clock) a record
// becomes one the sweep may remove.
const (
	SweepBatch = 16
	SweepGrace = 5 * time.Minute
)

// Store is the in-process store. The zero value is not usable: use New.
type Store struct {
	max   int64
	clock func() time.Time // the real clock, for the sweep only

	mu      sync.Mutex
	base    int64 // bytes of records, heads and appended events
	ans     int64 // bytes of stored answers
	recs    map[string]*entry
	expiry  expiryHeap // every entry, soonest ExpiresAt first
	answers list.List  // entries with a stored answer, oldest completion first
}

var _ idempotency.Store = (*Store)(nil)

// entry is one record. rec.Answer, rec.Head and the events in rec.Events are
// never changed once stored (they are replaced or dropped), and rec.Events
// only grows by append, so a copy of rec taken under the mutex can be
// deep-copied after it is released.
type entry struct {
	rec     idempotency.Record
	next    int   // the next Append seq
	size    int64 // counted in Store.base
	ansSize int64 // counted in Store.ans
	index   int   // in Store.expiry
	elem    *list.Element
}

// New returns a store that keeps at most about maxBytes bytes of answers
// (see the package doc for what is counted and what is never dropped).
func New(maxBytes int64) *Store {
	return &Store{max: maxBytes, clock: time.Now, recs: make(map[string]*entry)}
}

// Bytes returns the bytes counted now: records, running streams and stored
// answers.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base + s.ans
}

// Len returns the number of records held, those whose window ended and that
// were not removed yet included.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

// Reserve implements idempotency.Store. It stores rec's identity, state,
// lease and expiry; a reservation carries no answer, head or events.
func (s *Store) Reserve(_ context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	if rec == nil {
		return nil, errors.New("memstore: Reserve of a nil record")
	}
	e := &entry{rec: idempotency.Record{
		Key:         rec.Key,
		Fingerprint: rec.Fingerprint,
		State:       rec.State,
		Owner:       rec.Owner,
		LeaseUntil:  rec.LeaseUntil,
		ExpiresAt:   rec.ExpiresAt,
		RequestID:   rec.RequestID,
	}}
	e.size = baseSize(&e.rec)

	s.mu.Lock()
	if old := s.recs[rec.Key]; old != nil {
		if !old.rec.ExpiresAt.Before(now) {
			snap := old.rec
			s.mu.Unlock()
			return clone(&snap), nil
		}
		s.remove(old)
	}
	s.recs[rec.Key] = e
	heap.Push(&s.expiry, e)
	s.base += e.size
	s.sweep(SweepBatch)
	s.shrink()
	s.mu.Unlock()
	return nil, nil
}

// Load implements idempotency.Store.
func (s *Store) Load(_ context.Context, key string, now time.Time) (*idempotency.Record, error) {
	s.mu.Lock()
	e := s.recs[key]
	if e == nil || e.rec.ExpiresAt.Before(now) {
		s.mu.Unlock()
		return nil, idempotency.ErrNotFound
	}
	snap := e.rec
	s.mu.Unlock()
	return clone(&snap), nil
}

// owned returns the in-progress entry under key owned by owner, or nil.
// s.mu is held.
func (s *Store) owned(key, owner string) *entry {
	e := s.recs[key]
	if e == nil || e.rec.Owner != owner || e.rec.State != idempotency.StateInProgress {
		return nil
	}
	return e
}

// Heartbeat implements idempotency.Store.
func (s *Store) Heartbeat(_ context.Context, key, owner string, leaseUntil time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, owner)
	if e == nil {
		return idempotency.ErrNotOwner
	}
	e.rec.LeaseUntil = leaseUntil
	s.sweep(SweepBatch)
	return nil
}

// Append implements idempotency.Store. A seq already applied is ignored; a
// seq beyond the next one is refused with an error (a call was lost) and
// nothing is applied. A head replaces the one stored.
func (s *Store) Append(_ context.Context, key, owner string, seq int, head *idempotency.Head, events []idempotency.Event) error {
	h := cloneHead(head)
	evs := cloneEvents(events)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, owner)
	switch {
	case e == nil:
		return idempotency.ErrNotOwner
	case seq < e.next:
		return nil
	case seq > e.next:
		return fmt.Errorf("memstore: Append seq %d out of order: the next is %d", seq, e.next)
	}
	e.next++
	if h != nil {
		e.rec.Head = h
	}
	e.rec.Events = append(e.rec.Events, evs...)
	s.resize(e)
	s.sweep(SweepBatch)
	s.shrink()
	return nil
}

// Complete implements idempotency.Store. When the answer cannot fit (see the
// package doc), the record is completed without it.
func (s *Store) Complete(_ context.Context, key, owner string, ans *idempotency.Answer) error {
	if ans == nil {
		return errors.New("memstore: Complete with a nil answer")
	}
	a := cloneAnswer(ans)
	size := answerSize(a)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, owner)
	if e == nil {
		return idempotency.ErrNotOwner
	}
	e.rec.State = idempotency.StateCompleted
	e.rec.Head, e.rec.Events = nil, nil
	s.resize(e)
	s.sweep(SweepBatch)
	if s.base+size > s.max {
		s.sweep(len(s.recs))
	}
	if e.index < 0 {
		return nil // its window ended long ago, and the sweep just took it
	}
	if s.base+size > s.max {
		return nil // it would not fit even alone: completed, replay unavailable
	}
	e.rec.Answer = a
	e.ansSize = size
	s.ans += size
	e.elem = s.answers.PushBack(e)
	s.shrink()
	return nil
}

// Tombstone implements idempotency.Store.
func (s *Store) Tombstone(_ context.Context, key, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, owner)
	if e == nil {
		return idempotency.ErrNotOwner
	}
	e.rec.State = idempotency.StateTombstone
	e.rec.Head, e.rec.Events = nil, nil
	s.resize(e)
	s.sweep(SweepBatch)
	return nil
}

// Release implements idempotency.Store.
func (s *Store) Release(_ context.Context, key, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, owner)
	if e == nil {
		return idempotency.ErrNotOwner
	}
	s.remove(e)
	s.sweep(SweepBatch)
	return nil
}

// remove deletes e and its bytes. s.mu is held.
func (s *Store) remove(e *entry) {
	if s.recs[e.rec.Key] == e {
		delete(s.recs, e.rec.Key)
	}
	heap.Remove(&s.expiry, e.index)
	s.dropAnswer(e)
	s.base -= e.size
	e.size = 0
}

// dropAnswer drops e's stored answer, if any. s.mu is held.
func (s *Store) dropAnswer(e *entry) {
	if e.elem == nil {
		return
	}
	s.answers.Remove(e.elem)
	e.elem = nil
	e.rec.Answer = nil
	s.ans -= e.ansSize
	e.ansSize = 0
}

// resize recounts e's base bytes. s.mu is held.
func (s *Store) resize(e *entry) {
	n := baseSize(&e.rec)
	s.base += n - e.size
	e.size = n
}

// sweep removes up to n records whose window ended SweepGrace ago by the
// real clock. s.mu is held.
func (s *Store) sweep(n int) {
	if len(s.expiry) == 0 {
		return
	}
	cut := s.clock().Add(-SweepGrace)
	for i := 0; i < n && len(s.expiry) > 0 && s.expiry[0].rec.ExpiresAt.Before(cut); i++ {
		s.remove(s.expiry[0])
	}
}

// shrink brings the count under s.max if dropping answers can: ended records
// first, then the oldest answers. s.mu is held.
func (s *Store) shrink() {
	if s.base+s.ans <= s.max {
		return
	}
	s.sweep(len(s.recs))
	for s.base+s.ans > s.max && s.answers.Len() > 0 {
		s.dropAnswer(s.answers.Front().Value.(*entry))
	}
}

func baseSize(r *idempotency.Record) int64 {
	n := int64(RecordOverhead + len(r.Key) + len(r.Fingerprint) + len(r.Owner) + len(r.RequestID))
	if r.Head != nil {
		n += headSize(r.Head)
	}
	return n + eventsSize(r.Events)
}

func answerSize(a *idempotency.Answer) int64 {
	return headSize(&a.Head) + int64(len(a.Body)) + eventsSize(a.Events)
}

func headSize(h *idempotency.Head) int64 {
	n := int64(8)
	for k, v := range h.Header {
		n += int64(HeaderOverhead + len(k) + len(v))
	}
	return n
}

func eventsSize(evs []idempotency.Event) int64 {
	n := int64(0)
	for _, e := range evs {
		n += int64(EventOverhead + len(e.Data))
	}
	return n
}

// clone deep-copies a record snapshot taken under the mutex.
func clone(r *idempotency.Record) *idempotency.Record {
	c := *r
	c.Answer = cloneAnswer(r.Answer)
	c.Head = cloneHead(r.Head)
	c.Events = cloneEvents(r.Events)
	return &c
}

func cloneAnswer(a *idempotency.Answer) *idempotency.Answer {
	if a == nil {
		return nil
	}
	c := *a
	c.Header = maps.Clone(a.Header)
	c.Body = bytes.Clone(a.Body)
	c.Events = cloneEvents(a.Events)
	return &c
}

func cloneHead(h *idempotency.Head) *idempotency.Head {
	if h == nil {
		return nil
	}
	return &idempotency.Head{Status: h.Status, Header: maps.Clone(h.Header)}
}

// cloneEvents copies events and their data into one allocation.
func cloneEvents(evs []idempotency.Event) []idempotency.Event {
	if len(evs) == 0 {
		return nil
	}
	n := 0
	for _, e := range evs {
		n += len(e.Data)
	}
	buf := make([]byte, 0, n)
	c := make([]idempotency.Event, len(evs))
	for i, e := range evs {
		start := len(buf)
		buf = append(buf, e.Data...)
		c[i] = idempotency.Event{Data: buf[start:len(buf):len(buf)], Usage: e.Usage}
	}
	return c
}

// expiryHeap orders entries by ExpiresAt, soonest first.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].rec.ExpiresAt.Before(h[j].rec.ExpiresAt) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
