// Package idempotency makes a request that carries an Idempotency-Key
// exactly-once: the first request under a key reserves a record, runs, and
// stores its answer; a retry with the same key and the same request gets that
// answer back (or waits for it, or joins its stream) and never runs or bills
// again. This file is the contract between the service and its stores.
package idempotency

import (
	"context"
	"errors"
	"time"
)

// State is where a record stands.
type State string

const (
	// StateInProgress: reserved by an owner that is running the request and
	// renewing its lease. Stores return a lapsed lease as stored; the
	// service reads it as a tombstone: the owner may have died mid-request,
	// and the request is never run a second time.
	//
	// A reservation whose lease lapsed before it Started (no provider was
	// called) is the exception: Reserve hands it to a retry of the same
	// request (same Fingerprint), which then runs it. The old owner is
	// fenced out by the new owner token.
	StateInProgress State = "in_progress"
	// StateCompleted: the answer is stored (or was dropped to make room, in
	// which case Answer is nil).
	StateCompleted State = "completed"
	// StateTombstone: the request ended in an error after it was accepted;
	// there is no answer and the key cannot run the request again.
	StateTombstone State = "tombstone"
)

// Record is one Idempotency-Key record. Key is a hash of the record's
// identity (project, API key, Idempotency-Key, data-policy demand,
// residency): the raw key is never stored.
type Record struct {
	Key         string
	Fingerprint string
	State       State
	// Owner is the fencing token of the reservation: every write after the
	// reservation is conditional on it, so a stale owner can never
	// overwrite a newer one.
	Owner      string
	LeaseUntil time.Time
	// ExpiresAt is the end of the window; after it the key is new again.
	// Stores check it on every read and in every condition (a TTL deletion
	// may lag by days).
	ExpiresAt time.Time
	// RequestID is the x-request-id of the request that owns the record.
	RequestID string
	// Tenant is the project the record belongs to: the memory store's fair
	// shares are per tenant. Set by the caller through Begin.
	Tenant string
	// Started is set by MarkStarted, right before the first provider call:
	// a reservation that never started can be taken over once its lease
	// lapsed; one that started is never run again.
	Started bool

	// Answer is the stored answer of a completed record; nil while in
	// progress, for a tombstone, and when the answer was dropped.
	Answer *Answer
	// Events are the stream events appended so far by a running owner, in
	// order (for joiners on other instances); Head is the answer's status
	// and headers once the owner started answering.
	Events []Event
	Head   *Head
}

// Head is the status line and the headers of an answer that matter for a
// replay: x-request-id, x-gateway-model, x-gateway-provider,
// x-gateway-route-depth and the content type.
type Head struct {
	Status int
	Header map[string]string
}

// Answer is a stored answer: a JSON body, or for a stream every event in
// order.
type Answer struct {
	Head
	Stream bool
	Body   []byte
	Events []Event
}

// Size is the answer's size as the max_response_bytes cap counts it: the
// uncompressed body, or the sum of the stream's event bytes.
func (a *Answer) Size() int64 {
	n := int64(len(a.Body))
	for _, e := range a.Events {
		n += int64(len(e.Name) + len(e.Data))
	}
	return n
}

// Event is one SSE event of a stream: its data payload. Usage marks the
// gateway's usage chunk, which a replay sends or leaves out according to the
// retry's stream_options.include_usage. "[DONE]" is stored as an event like any other.
type Event struct {
	// Name is the SSE event name ("event:" line), "" for none (Chat
	// Completions sends none; Messages and Responses name every event).
	Name  string `json:",omitempty"`
	Data  []byte
	Usage bool `json:",omitempty"`
}

// Store keeps the records. Implementations: memstore (in process) and
// dynamostore (DynamoDB). Every method is safe for concurrent use, and
// every write after Reserve is fenced by the owner token.
type Store interface {
	// Reserve creates rec (State in progress, Owner, LeaseUntil, ExpiresAt,
	// Tenant set by the caller) unless a record with the same Key exists
	// whose window has not ended (now <= ExpiresAt): first writer wins. One
	// live record is taken over all the same: an in-progress record that
	// never Started, whose lease lapsed (LeaseUntil < now) and whose
	// Fingerprint equals rec's (its owner is gone before it ran: the key
	// must not be stuck); rec replaces it whole, and the first of several
	// concurrent takeovers wins. It returns (nil, nil) when rec was created,
	// and otherwise the existing record as Load returns it (with its
	// Answer, Head and Events), read consistently.
	Reserve(ctx context.Context, rec *Record, now time.Time) (*Record, error)
	// Load reads a record consistently, with its Answer, Head and Events.
	// A record whose window ended (now > ExpiresAt) reads as ErrNotFound.
	Load(ctx context.Context, key string, now time.Time) (*Record, error)
	// Poll is Load for a waiter that already saw part of a running stream:
	// when the record is in progress and owned by owner, Head is set only
	// when from is 0 and Events holds only the events of the Append calls
	// from seq from on; otherwise (another owner, or an ended record) it is
	// what Load returns. next is the seq to pass as from the next time (the
	// number of Append calls of the record's owner read so far).
	Poll(ctx context.Context, key, owner string, from int, now time.Time) (rec *Record, next int, err error)
	// Heartbeat extends the lease of an in-progress record owned by owner.
	Heartbeat(ctx context.Context, key, owner string, leaseUntil time.Time) error
	// MarkStarted sets Started on an in-progress record owned by owner
	// (again: nil). After it the record can no longer be taken over.
	MarkStarted(ctx context.Context, key, owner string) error
	// Append adds stream events (and, with the first call, the head) to an
	// in-progress record owned by owner. seq numbers the calls from 0: a seq
	// already applied is ignored (nil), so a retried Append is not applied
	// twice, and a gap is an error. A non-nil head replaces the stored one.
	Append(ctx context.Context, key, owner string, seq int, head *Head, events []Event) error
	// Complete stores the answer of a record owned by owner.
	Complete(ctx context.Context, key, owner string, ans *Answer) error
	// Tombstone ends a record owned by owner without an answer.
	Tombstone(ctx context.Context, key, owner string) error
	// Release deletes a record owned by owner, so that a retry runs again
	// (the request was refused before it ran, or its answer is too large to
	// store). Like every write after Reserve, it needs the owner token and
	// the in-progress state, or it is ErrNotOwner and changes nothing. What
	// Head and Events read as after completion is unspecified: the Answer is
	// authoritative.
	Release(ctx context.Context, key, owner string) error
}

// ErrNotFound: no record under that key (or its window ended).
var ErrNotFound = errors.New("idempotency: no record")

// ErrNotOwner: the record is gone, or is owned by another owner token, or is
// no longer in progress: the write was refused.
var ErrNotOwner = errors.New("idempotency: not the record's owner")

// ErrUnavailable wraps every failure to reach the store, so that the HTTP
// layer can answer 503 idempotency_store_unavailable.
var ErrUnavailable = errors.New("idempotency store unavailable")

// ErrFull: the store has no room for the write without taking room from
// another tenant within its fair share (the memory store). Begin returns it
// wrapped together with ErrUnavailable: a 503 with retry-after; the room
// comes back as windows end.
var ErrFull = errors.New("idempotency store full")
