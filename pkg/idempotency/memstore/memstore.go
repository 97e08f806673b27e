// Package memstore is the in-process idempotency.Store, the gateway's
// embedded default. Its records live in one process: they survive neither a
// restart nor a second instance.
//
// # What is bounded, and how
//
// The store counts bytes: for each record a fixed RecordOverhead plus its
// strings (key, fingerprint, owner, request id, tenant), the head and the
// events appended while it runs, and the stored answer (status line, header
// names and values, body, event data, plus EventOverhead per event and
// HeaderOverhead per header). Everything counts, tombstones included, and
// the count never passes maxBytes.
//
// Memory is shared fairly between tenants (Record.Tenant, the project). A
// tenant's fair share is maxBytes divided by the number of tenants holding
// bytes now. The rules:
//
//   - Only stored answers are ever dropped, never a record's identity
//     before its window ends: a record whose answer was dropped keeps its
//     state (Load and Reserve return it as StateCompleted with a nil
//     Answer), so a retry answers "replay unavailable" instead of running
//     again.
//   - When a write needs room, the store first removes records whose
//     window ended, then drops answers of the tenant furthest over its fair
//     share (its oldest completion first), then of the next one, and so on.
//     The answers of a tenant within its fair share are never dropped to
//     make room for another tenant: one tenant's flood (thousands of
//     tombstones, say) cannot push out another tenant's answers.
//   - A tenant's records and running streams (everything but answers) may
//     hold at most TenantRecordShare of maxBytes, so that another tenant
//     always finds room to reserve even when one tenant filled the store
//     with records first.
//   - A write that cannot get its room by these rules fails with
//     idempotency.ErrFull and changes nothing: Reserve (the caller answers
//     503 with retry-after: the room comes back as windows end) and Append
//     (only joiners' live view is lost: the answer is stored whole on
//     completion). Complete does not fail: an answer that cannot get its
//     room is not stored (the record is completed without it, and the
//     other answers stay).
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

// TenantRecordShare is the part of maxBytes one tenant's records and
// running streams may hold (answers aside): the rest stays free for other
// tenants to reserve.
const TenantRecordShare = 0.5

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
	tenants map[string]*tenant
}

// tenant is what one tenant holds.
type tenant struct {
	base    int64     // bytes of its records, heads and appended events
	ans     int64     // bytes of its stored answers
	answers list.List // its entries with a stored answer, oldest completion first
}

func (t *tenant) bytes() int64 { return t.base + t.ans }

var _ idempotency.Store = (*Store)(nil)

// entry is one record. ans, rec.Head and the events in rec.Events are
// never changed once stored (they are replaced or dropped), and rec.Events
// only grows by append, so a copy of rec taken under the mutex can be
// deep-copied after it is released.
type entry struct {
	rec     idempotency.Record // its Answer is always nil: see ans
	ans     []byte             // the stored answer, packed (pack.go); nil for none
	ends    []int              // per applied Append seq, the end of its events in rec.Events
	size    int64              // counted in Store.base
	ansSize int64              // counted in Store.ans
	index   int                // in Store.expiry
	elem    *list.Element
}

// InProcess reports that the store's calls never wait on a network or a
// disk: the gateway gives them no deadline of their own.
func (s *Store) InProcess() bool { return true }

// New returns a store that keeps at most maxBytes bytes (see the package
// doc for what is counted and how room is shared).
func New(maxBytes int64) *Store {
	return &Store{max: maxBytes, clock: time.Now, recs: make(map[string]*entry), tenants: make(map[string]*tenant)}
}

// Bytes returns the bytes counted now: records, running streams and stored
// answers.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base + s.ans
}

// TenantBytes returns the bytes counted now for one tenant.
func (s *Store) TenantBytes(tenant string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenants[tenant]; t != nil {
		return t.bytes()
	}
	return 0
}

// Len returns the number of records held, those whose window ended and that
// were not removed yet included.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

// Reserve implements idempotency.Store. It stores rec's identity, state,
// lease, expiry and tenant; a reservation carries no answer, head or events.
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
		Tenant:      rec.Tenant,
		Started:     rec.Started,
	}}
	e.size = baseSize(&e.rec)

	s.mu.Lock()
	defer s.mu.Unlock()
	takeover := false
	if old := s.recs[rec.Key]; old != nil {
		if !old.rec.ExpiresAt.Before(now) {
			if !takesOver(&old.rec, rec, now) {
				snap, ans := old.rec, old.ans
				return clone(&snap, ans)
			}
			takeover = true
		}
		if !takeover {
			s.remove(old)
		}
	}
	if !takeover {
		// A takeover replaces a record of the same tenant that is at least
		// as large, less a request id: it needs no room.
		if !s.room(e.rec.Tenant, e.size) {
			return nil, idempotency.ErrFull
		}
	} else {
		s.remove(s.recs[rec.Key])
	}
	s.recs[rec.Key] = e
	heap.Push(&s.expiry, e)
	s.addBase(e, e.size)
	s.sweep(SweepBatch)
	return nil, nil
}

// takesOver reports whether rec takes over the live record old: in
// progress, never started, its lease lapsed, the same request.
func takesOver(old, rec *idempotency.Record, now time.Time) bool {
	return old.State == idempotency.StateInProgress && !old.Started &&
		old.LeaseUntil.Before(now) && old.Fingerprint == rec.Fingerprint
}

// Load implements idempotency.Store.
func (s *Store) Load(_ context.Context, key string, now time.Time) (*idempotency.Record, error) {
	s.mu.Lock()
	e := s.recs[key]
	if e == nil || e.rec.ExpiresAt.Before(now) {
		s.mu.Unlock()
		return nil, idempotency.ErrNotFound
	}
	snap, ans := e.rec, e.ans
	s.mu.Unlock()
	return clone(&snap, ans)
}

// Poll implements idempotency.Store.
func (s *Store) Poll(_ context.Context, key, owner string, from int, now time.Time) (*idempotency.Record, int, error) {
	s.mu.Lock()
	e := s.recs[key]
	if e == nil || e.rec.ExpiresAt.Before(now) {
		s.mu.Unlock()
		return nil, 0, idempotency.ErrNotFound
	}
	snap, ans := e.rec, e.ans
	next := len(e.ends)
	if snap.State == idempotency.StateInProgress && snap.Owner == owner && from > 0 {
		snap.Head = nil
		if from <= next {
			snap.Events = snap.Events[e.ends[from-1]:]
		} else {
			snap.Events = nil
		}
	}
	if snap.State != idempotency.StateInProgress {
		next = 0
	}
	s.mu.Unlock()
	c, err := clone(&snap, ans)
	return c, next, err
}

// owned runs f, under s.mu, on the in-progress entry under key owned by
// owner; without one it is idempotency.ErrNotOwner. It fences every write
// of an owner.
func (s *Store) owned(key, owner string, f func(*entry) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.recs[key]
	if e == nil || e.rec.Owner != owner || e.rec.State != idempotency.StateInProgress {
		return idempotency.ErrNotOwner
	}
	return f(e)
}

// end ends e's reservation in state, which keeps no head and no events.
// s.mu is held.
func (s *Store) end(e *entry, state idempotency.State) {
	e.rec.State = state
	e.rec.Head, e.rec.Events, e.ends = nil, nil, nil
	s.resize(e)
	s.sweep(SweepBatch)
}

// Heartbeat implements idempotency.Store.
func (s *Store) Heartbeat(_ context.Context, key, owner string, leaseUntil time.Time) error {
	return s.owned(key, owner, func(e *entry) error {
		e.rec.LeaseUntil = leaseUntil
		s.sweep(SweepBatch)
		return nil
	})
}

// MarkStarted implements idempotency.Store.
func (s *Store) MarkStarted(_ context.Context, key, owner string) error {
	return s.owned(key, owner, func(e *entry) error {
		e.rec.Started = true
		return nil
	})
}

// Append implements idempotency.Store. A seq already applied is ignored; a
// seq beyond the next one is refused with an error (a call was lost) and
// nothing is applied. A head replaces the one stored. An Append that cannot
// get its room is idempotency.ErrFull.
func (s *Store) Append(_ context.Context, key, owner string, seq int, head *idempotency.Head, events []idempotency.Event) error {
	h := cloneHead(head)
	evs := cloneEvents(events)
	return s.owned(key, owner, func(e *entry) error { return s.addEvents(e, seq, h, evs) })
}

// addEvents applies Append call seq to e. s.mu is held.
func (s *Store) addEvents(e *entry, seq int, h *idempotency.Head, evs []idempotency.Event) error {
	switch {
	case seq < len(e.ends):
		return nil
	case seq > len(e.ends):
		return fmt.Errorf("memstore: Append seq %d out of order: the next is %d", seq, len(e.ends))
	}
	grow := eventsSize(evs)
	if h != nil {
		grow += headSize(h)
		if e.rec.Head != nil {
			grow -= headSize(e.rec.Head)
		}
	}
	s.sweep(SweepBatch)
	if grow > 0 && !s.room(e.rec.Tenant, grow) {
		return idempotency.ErrFull
	}
	if e.index < 0 {
		return idempotency.ErrNotOwner // its window ended long ago, and the sweep just took it
	}
	if h != nil {
		e.rec.Head = h
	}
	e.rec.Events = append(e.rec.Events, evs...)
	e.ends = append(e.ends, len(e.rec.Events))
	s.resize(e)
	return nil
}

// Complete implements idempotency.Store. When the answer cannot get its
// room (see the package doc), the record is completed without it.
func (s *Store) Complete(_ context.Context, key, owner string, ans *idempotency.Answer) error {
	if ans == nil {
		return errors.New("memstore: Complete with a nil answer")
	}
	size := answerSize(ans)
	packed := packAnswer(ans)
	return s.owned(key, owner, func(e *entry) error { return s.complete(e, packed, size) })
}

// complete completes e, keeping its packed answer (of size bytes) when it
// gets its room. s.mu is held.
func (s *Store) complete(e *entry, packed []byte, size int64) error {
	s.end(e, idempotency.StateCompleted)
	if s.base+size > s.max {
		s.sweep(len(s.recs))
	}
	if e.index < 0 {
		return nil // its window ended long ago, and the sweep just took it
	}
	if s.base+size > s.max {
		return nil // it would not fit even alone: completed, replay unavailable
	}
	t := s.tenant(e.rec.Tenant)
	e.ans = packed
	e.ansSize = size
	s.ans += size
	t.ans += size
	e.elem = t.answers.PushBack(e)
	s.shrink(e)
	return nil
}

// Tombstone implements idempotency.Store.
func (s *Store) Tombstone(_ context.Context, key, owner string) error {
	return s.owned(key, owner, func(e *entry) error {
		s.end(e, idempotency.StateTombstone)
		return nil
	})
}

// Release implements idempotency.Store.
func (s *Store) Release(_ context.Context, key, owner string) error {
	return s.owned(key, owner, func(e *entry) error {
		s.remove(e)
		s.sweep(SweepBatch)
		return nil
	})
}

// tenant returns the bookkeeping of a tenant, made on first use. s.mu is
// held.
func (s *Store) tenant(name string) *tenant {
	t := s.tenants[name]
	if t == nil {
		t = &tenant{}
		s.tenants[name] = t
	}
	return t
}

// addBase counts n more base bytes for e. s.mu is held.
func (s *Store) addBase(e *entry, n int64) {
	s.base += n
	t := s.tenant(e.rec.Tenant)
	t.base += n
	s.forgetIfEmpty(e.rec.Tenant, t)
}

func (s *Store) forgetIfEmpty(name string, t *tenant) {
	if t.base == 0 && t.ans == 0 && t.answers.Len() == 0 {
		delete(s.tenants, name)
	}
}

// remove deletes e and its bytes. s.mu is held.
func (s *Store) remove(e *entry) {
	if s.recs[e.rec.Key] == e {
		delete(s.recs, e.rec.Key)
	}
	heap.Remove(&s.expiry, e.index)
	s.dropAnswer(e)
	s.addBase(e, -e.size)
	e.size = 0
}

// dropAnswer drops e's stored answer, if any. s.mu is held.
func (s *Store) dropAnswer(e *entry) {
	if e.elem == nil {
		return
	}
	t := s.tenant(e.rec.Tenant)
	t.answers.Remove(e.elem)
	e.elem = nil
	e.ans = nil
	s.ans -= e.ansSize
	t.ans -= e.ansSize
	e.ansSize = 0
	s.forgetIfEmpty(e.rec.Tenant, t)
}

// resize recounts e's base bytes. s.mu is held.
func (s *Store) resize(e *entry) {
	n := baseSize(&e.rec)
	s.addBase(e, n-e.size)
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

// room makes room for need more base bytes of tenant name, by the rules of
// the package doc, and reports whether it did (nothing is dropped when it
// cannot). s.mu is held.
func (s *Store) room(name string, need int64) bool {
	tenantBase := func() int64 {
		if t := s.tenants[name]; t != nil {
			return t.base
		}
		return 0
	}
	limit := TenantRecordShare * float64(s.max)
	if float64(tenantBase()+need) > limit {
		s.sweep(len(s.recs)) // its ended records may make the room
		if float64(tenantBase()+need) > limit {
			return false
		}
	}
	if s.base+s.ans+need <= s.max {
		return true
	}
	s.sweep(len(s.recs))
	// What dropping would free, from tenants over their share: only go
	// ahead when it is enough.
	if s.base+need > s.max {
		return false
	}
	// A tenant may also give up its own oldest answers for its own new
	// records: that costs no other tenant anything.
	share := s.share(name)
	own := s.tenants[name]
	free := int64(0)
	for _, t := range s.tenants {
		if t == own {
			free += t.ans
		} else if over := t.bytes() - share; over > 0 {
			free += min(over, t.ans)
		}
	}
	if s.base+s.ans+need-free > s.max {
		return false
	}
	for s.base+s.ans+need > s.max {
		t := s.furthestOver(share)
		if t == nil && own != nil && own.answers.Len() > 0 {
			t = own
		}
		if t == nil {
			return false
		}
		s.dropAnswer(t.answers.Front().Value.(*entry))
	}
	return true
}

// shrink brings the count under s.max after e's answer was stored: answers
// of the tenants furthest over their share first, and e's own answer when
// that is not enough. s.mu is held.
func (s *Store) shrink(e *entry) {
	if s.base+s.ans <= s.max {
		return
	}
	s.sweep(len(s.recs))
	share := s.share(e.rec.Tenant)
	own := s.tenants[e.rec.Tenant]
	for s.base+s.ans > s.max {
		t := s.furthestOver(share)
		if t == nil && own != nil && own.answers.Front() != nil && own.answers.Front().Value.(*entry) != e {
			t = own // its own older answers, before its newest
		}
		if t == nil {
			break
		}
		s.dropAnswer(t.answers.Front().Value.(*entry))
	}
	if s.base+s.ans > s.max {
		s.dropAnswer(e) // it cannot get its room: the others stay
	}
}

// share is a tenant's fair share of s.max: divided among the tenants that
// hold bytes, and newcomer. s.mu is held.
func (s *Store) share(newcomer string) int64 {
	n := len(s.tenants)
	if _, ok := s.tenants[newcomer]; !ok {
		n++
	}
	return s.max / int64(max(n, 1))
}

// furthestOver is the tenant with stored answers that is furthest over its
// share, or nil. s.mu is held.
func (s *Store) furthestOver(share int64) *tenant {
	var best *tenant
	var bestOver int64
	for _, t := range s.tenants {
		if over := t.bytes() - share; over > 0 && t.answers.Len() > 0 && (best == nil || over > bestOver) {
			best, bestOver = t, over
		}
	}
	return best
}

func baseSize(r *idempotency.Record) int64 {
	n := int64(RecordOverhead + len(r.Key) + len(r.Fingerprint) + len(r.Owner) + len(r.RequestID) + len(r.Tenant))
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
		n += int64(EventOverhead + len(e.Name) + len(e.Data))
	}
	return n
}

// clone deep-copies a record snapshot taken under the mutex, with its
// packed answer (never changed once stored) unpacked.
// The error (a packed answer that does not unpack) can only come from a
// bug in pack.go, which is fuzzed.
func clone(r *idempotency.Record, packed []byte) (*idempotency.Record, error) {
	c := *r
	if packed != nil {
		a, err := unpackAnswer(packed)
		if err != nil {
			return nil, err
		}
		c.Answer = a
	}
	c.Head = cloneHead(r.Head)
	c.Events = cloneEvents(r.Events)
	return &c, nil
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
		c[i] = idempotency.Event{Name: e.Name, Data: buf[start:len(buf):len(buf)], Usage: e.Usage}
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
