package idempotency

import (
	"context"
	"errors"
	"io"
	"maps"
	"time"

	"github.com/buzzgate/buzzgate/internal/storecall"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// HeaderReplayed marks every answer a request did not produce itself: a
// replay, a waiter's and a joiner's.
const HeaderReplayed = "Idempotency-Replayed"

// Retry is what Serve needs to know of the retrying request.
type Retry struct {
	Fingerprint string
	// IncludeUsage is the retry's own stream_options.include_usage: a
	// stored usage chunk is sent only when the retry asks for it.
	IncludeUsage bool
}

// next returns the first event of evs from *pos on that the retry is sent
// (a usage event only when it asks for usage), and moves *pos past it;
// false when there is none.
func (r Retry) next(evs []Event, pos *int) (Event, bool) {
	for *pos < len(evs) {
		ev := evs[*pos]
		*pos++
		if ev.Usage && !r.IncludeUsage {
			continue
		}
		return ev, true
	}
	return Event{}, false
}

// ErrRunAgain: the record was released while the retry waited for it (the
// answer was larger than max_response_bytes, or the first call was refused
// before it ran), or its owner went away before it started. The caller
// begins again, as a new request would (and takes the record over).
var ErrRunAgain = errors.New("idempotency: the record was released; begin again")

// ErrJoinBroken: a joined stream cannot go on (the first request failed,
// the answer outgrew max_response_bytes, the wait reached its limit, the
// record can no longer be read). Reply.Next wraps it with a reason a client
// may read; the caller ends the stream with an error event in its API's
// format (the status line is sent already).
var ErrJoinBroken = errors.New("idempotency: the joined answer cannot go on")

// JoinError is the error wrapping ErrJoinBroken: Reason is for the client
// (it never carries an internal error's text), Cause for the logs.
type JoinError struct {
	Reason string
	Cause  error
}

func (e *JoinError) Error() string {
	if e.Cause != nil {
		return ErrJoinBroken.Error() + ": " + e.Reason + ": " + e.Cause.Error()
	}
	return ErrJoinBroken.Error() + ": " + e.Reason
}

// Unwrap lets errors.Is see ErrJoinBroken and the cause.
func (e *JoinError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrJoinBroken, e.Cause}
	}
	return []error{ErrJoinBroken}
}

func joinBroken(why string, cause error) error {
	return &JoinError{Reason: why, Cause: cause}
}

func conflict() error {
	return &llm.Error{Code: llm.CodeIdempotencyConflict, Message: "this Idempotency-Key was used with a different request; send a new key for a new request"}
}

func replayUnavailable(why string) error {
	return &llm.Error{Code: llm.CodeReplayUnavailable, Message: "this Idempotency-Key's request was accepted, and " + why + "; it is not run again"}
}

func inProgress(retryAfter time.Duration) error {
	return &llm.Error{Code: llm.CodeInProgress, Message: "the first request with this Idempotency-Key is still running; retry with the same key", RetryAfter: retryAfter}
}

// Reply is an answer to replay: a stored one, a waiter's or a joined
// stream. Head carries the status and the headers that matter, with
// Idempotency-Replayed: true. A JSON answer is Body; a stream (Stream) is
// read with Next.
type Reply struct {
	Head   Head
	Stream bool
	Body   []byte

	next func(ctx context.Context) (Event, error)
}

// Next returns the stream's next event: the stored events, then the live
// ones of a running first call, in order, without the usage chunk unless
// the retry asked for it. io.EOF is the clean end; an error wrapping
// ErrJoinBroken means the stream cannot go on. Not for concurrent use.
func (r *Reply) Next(ctx context.Context) (Event, error) {
	if r.next == nil {
		return Event{}, io.EOF
	}
	return r.next(ctx)
}

func replyHead(h *Head) Head {
	hdr := maps.Clone(h.Header)
	if hdr == nil {
		hdr = map[string]string{}
	}
	hdr[HeaderReplayed] = "true"
	return Head{Status: h.Status, Header: hdr}
}

// answerReply replays a stored answer as it was sent: the same status, the
// headers that matter (the original x-request-id among them), and the same
// body bytes or the same events in order.
func answerReply(a *Answer, retry Retry) *Reply {
	r := &Reply{Head: replyHead(&a.Head), Stream: a.Stream, Body: a.Body}
	if a.Stream {
		evs, pos := a.Events, 0
		r.next = func(context.Context) (Event, error) {
			if ev, ok := retry.next(evs, &pos); ok {
				return ev, nil
			}
			return Event{}, io.EOF
		}
	}
	return r
}

// Serve answers a retry from the record another request holds: a conflict
// when the requests differ, the stored answer when there is one, the first
// call's answer when it is still running (waiting for it, or joining its
// stream once it started), and otherwise 409
// idempotency_replay_unavailable. An error means there is nothing to
// replay: an *llm.Error to send, ErrRunAgain, ErrUnavailable, or the
// context's error.
func (s *Service) Serve(ctx context.Context, rec *Record, retry Retry) (*Reply, error) {
	for range 4 { // a record re-reserved under our feet is followed a few times at most
		if rec.Fingerprint != retry.Fingerprint {
			return nil, conflict()
		}
		next, reply, err := s.serve(ctx, rec, retry)
		if next == nil {
			return reply, err
		}
		rec = next
	}
	return nil, ErrRunAgain
}

// serve returns a newer record to serve instead, or the outcome.
func (s *Service) serve(ctx context.Context, rec *Record, retry Retry) (*Record, *Reply, error) {
	switch rec.State {
	case StateCompleted:
		if rec.Answer == nil {
			return nil, nil, replayUnavailable("its stored answer is no longer kept")
		}
		return nil, answerReply(rec.Answer, retry), nil
	case StateTombstone:
		return nil, nil, replayUnavailable("it ended in an error, so there is no answer to replay")
	}
	// A running owner on this instance is alive whatever the store says of
	// its lease (its heartbeats may have failed): follow it.
	if f := s.flight(rec.Key, rec.Owner); f != nil {
		reply, err := s.followLocal(ctx, f, retry)
		return nil, reply, err
	}
	if now := s.now(); rec.LeaseUntil.Before(now) {
		// rec may be stale (a local owner ended since it was read): read
		// it again before concluding.
		fresh, err := s.load(ctx, rec.Key, now)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, nil, ErrRunAgain
		case err != nil:
			return nil, nil, unavailable(err)
		case fresh.Owner != rec.Owner || fresh.State != StateInProgress || !fresh.LeaseUntil.Before(now):
			return fresh, nil, nil
		}
		return nil, nil, lapsed(fresh)
	}
	return s.followRemote(ctx, rec, retry)
}

// lapsed is the answer to a record whose owner went away: run again when it
// never started (Reserve takes it over), else a tombstone.
func lapsed(rec *Record) error {
	if !rec.Started {
		return ErrRunAgain
	}
	return replayUnavailable("the call that ran it stopped before it answered")
}

func (s *Service) retryAfter() time.Duration { return max(time.Second, s.cfg.Lease/10) }

func (s *Service) followLocal(ctx context.Context, f *flight, retry Retry) (*Reply, error) {
	deadline := time.NewTimer(s.cfg.MaxWait)
	defer deadline.Stop()
	for {
		st := f.snapshot()
		switch st.outcome {
		case outcomeCompleted:
			return answerReply(st.answer, retry), nil
		case outcomeFailed:
			return nil, replayUnavailable("it ended in an error, so there is no answer to replay")
		case outcomeReleased:
			return nil, ErrRunAgain
		}
		// A stream past max_response_bytes cannot be joined: wait for its
		// release (then run again) like for an answer not started.
		if st.head != nil && len(st.events) > 0 && !st.overflow {
			return &Reply{Head: replyHead(st.head), Stream: true, next: localStream(f, retry)}, nil
		}
		select {
		case <-st.changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, inProgress(s.retryAfter())
		}
	}
}

// localStream reads a running stream of this instance from its start.
func localStream(f *flight, retry Retry) func(context.Context) (Event, error) {
	pos := 0
	return func(ctx context.Context) (Event, error) {
		for {
			st := f.snapshot()
			evs := st.events
			if st.outcome == outcomeCompleted {
				evs = st.answer.Events // the same events, whole
			}
			if ev, ok := retry.next(evs, &pos); ok {
				return ev, nil
			}
			switch {
			case st.outcome == outcomeCompleted:
				return Event{}, io.EOF
			case st.overflow:
				return Event{}, joinBroken("the answer is larger than max_response_bytes and cannot be joined further", nil)
			case st.outcome == outcomeFailed:
				return Event{}, joinBroken("the first request failed", nil)
			case st.outcome == outcomeReleased:
				return Event{}, io.EOF // every event was shared live
			}
			select {
			case <-st.changed:
			case <-ctx.Done():
				return Event{}, joinBroken("the wait for the first request reached its time limit", ctx.Err())
			}
		}
	}
}

// remote follows a record running on another instance with Store.Poll:
// each poll reads the record's own item and only the events not seen yet.
type remote struct {
	s        *Service
	key      string
	owner    string
	retry    Retry
	from     int     // the next Append seq to read
	pending  []Event // read, not handed out yet
	consumed int     // events handed out or skipped
	interval time.Duration
	ended    error // the end, once the pending events are out
}

// wait sleeps the poll interval, doubling it up to 8 times its base.
func (r *remote) wait(ctx context.Context) error {
	t := time.NewTimer(r.interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	r.interval = min(r.interval*2, 8*r.s.cfg.PollInterval)
	return nil
}

func (s *Service) followRemote(ctx context.Context, rec *Record, retry Retry) (*Record, *Reply, error) {
	r := &remote{s: s, key: rec.Key, owner: rec.Owner, retry: retry, interval: s.cfg.PollInterval}
	// max_wait is measured on the real clock, like followLocal's timer.
	deadline := time.Now().Add(s.cfg.MaxWait)
	var head *Head
	for {
		if err := r.wait(ctx); err != nil {
			return nil, nil, err
		}
		now := s.now()
		got, next, err := s.poll(ctx, r.key, r.owner, r.from, now)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, nil, ErrRunAgain
		case err != nil:
			return nil, nil, unavailable(err)
		case got.Owner != r.owner:
			return got, nil, nil // released and reserved again meanwhile
		case got.State == StateCompleted:
			if got.Answer == nil {
				return nil, nil, replayUnavailable("its stored answer is no longer kept")
			}
			return nil, answerReply(got.Answer, retry), nil
		case got.State == StateTombstone:
			return nil, nil, replayUnavailable("it ended in an error, so there is no answer to replay")
		case got.LeaseUntil.Before(now):
			return nil, nil, lapsed(got)
		}
		if got.Head != nil {
			head = got.Head
		}
		r.pending = append(r.pending, got.Events...)
		r.from = next
		if head != nil && len(r.pending) > 0 {
			r.interval = s.cfg.PollInterval
			return nil, &Reply{Head: replyHead(head), Stream: true, next: r.next}, nil
		}
		if time.Now().After(deadline) {
			return nil, nil, inProgress(s.retryAfter())
		}
	}
}

func (r *remote) next(ctx context.Context) (Event, error) {
	for {
		for len(r.pending) > 0 {
			ev := r.pending[0]
			r.pending = r.pending[1:]
			r.consumed++
			if ev.Usage && !r.retry.IncludeUsage {
				continue
			}
			return ev, nil
		}
		if r.ended != nil {
			return Event{}, r.ended
		}
		if err := r.wait(ctx); err != nil {
			return Event{}, joinBroken("the wait for the first request reached its time limit", err)
		}
		now := r.s.now()
		got, next, err := r.s.poll(ctx, r.key, r.owner, r.from, now)
		switch {
		case errors.Is(err, ErrNotFound):
			return Event{}, joinBroken("the answer can no longer be joined", nil)
		case err != nil:
			return Event{}, joinBroken("the answer can no longer be joined", err)
		case got.Owner != r.owner:
			return Event{}, joinBroken("the answer can no longer be joined", nil)
		case got.State == StateCompleted:
			if got.Answer == nil {
				return Event{}, joinBroken("the stored answer is no longer kept", nil)
			}
			if r.consumed < len(got.Answer.Events) {
				r.pending = got.Answer.Events[r.consumed:]
			}
			r.ended = io.EOF
			continue
		case got.State == StateTombstone || got.LeaseUntil.Before(now):
			return Event{}, joinBroken("the first request failed", nil)
		}
		if len(got.Events) > 0 {
			r.interval = r.s.cfg.PollInterval
		}
		r.pending = append(r.pending, got.Events...)
		r.from = next
	}
}

// load and poll read the store for a retry, each read bounded on its own
// (Config.StoreTimeout) unless the store is in this process, as every other call
// the service makes: a store that stops answering (packets dropped, not
// refused) costs a retry one bound, not the whole wait it was given.
func (s *Service) load(ctx context.Context, key string, now time.Time) (*Record, error) {
	lctx, cancel := storecall.Bound(ctx, s.cfg.StoreTimeout, s.inProcess)
	defer cancel()
	return s.store.Load(lctx, key, now)
}

func (s *Service) poll(ctx context.Context, key, owner string, from int, now time.Time) (*Record, int, error) {
	pctx, cancel := storecall.Bound(ctx, s.cfg.StoreTimeout, s.inProcess)
	defer cancel()
	return s.store.Poll(pctx, key, owner, from, now)
}
