package idempotency

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/sse"
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

// ErrRunAgain: the record was released while the retry waited for it (the
// answer was larger than max_response_bytes, or the first call was refused
// before it ran). The caller begins again, as a new request would.
var ErrRunAgain = errors.New("idempotency: the record was released; begin again")

func conflict() error {
	return &llm.Error{Code: llm.CodeIdempotencyConflict, Message: "this Idempotency-Key was used with a different request; send a new key for a new request"}
}

func replayUnavailable(why string) error {
	return &llm.Error{Code: llm.CodeReplayUnavailable, Message: "this Idempotency-Key's request was accepted, and " + why + "; it is not run again"}
}

// Serve answers a retry from the record another request holds: a conflict
// when the requests differ, the stored answer when there is one, the first
// call's answer when it is still running (waiting for it, or joining its
// stream), and otherwise 409 idempotency_replay_unavailable. It returns nil
// once it has written an answer; an error means nothing was written: an
// *llm.Error to send, ErrRunAgain, ErrUnavailable, or the context's error.
func (s *Service) Serve(ctx context.Context, w http.ResponseWriter, rec *Record, retry Retry) error {
	for range 4 { // a record re-reserved under our feet is followed a few times at most
		if rec.Fingerprint != retry.Fingerprint {
			return conflict()
		}
		next, err := s.serve(ctx, w, rec, retry)
		if next == nil {
			return err
		}
		rec = next
	}
	return ErrRunAgain
}

// serve returns a newer record to serve instead, or the outcome.
func (s *Service) serve(ctx context.Context, w http.ResponseWriter, rec *Record, retry Retry) (*Record, error) {
	switch rec.State {
	case StateCompleted:
		if rec.Answer == nil {
			return nil, replayUnavailable("its stored answer is no longer kept")
		}
		writeAnswer(w, rec.Answer, retry)
		return nil, nil
	case StateTombstone:
		return nil, replayUnavailable("it ended in an error, so there is no answer to replay")
	}
	// A running owner on this instance is alive whatever the store says of
	// its lease (its heartbeats may have failed): follow it.
	if f := s.flight(rec.Key, rec.Owner); f != nil {
		return nil, s.followLocal(ctx, w, f, retry)
	}
	if rec.LeaseUntil.Before(s.now()) {
		return nil, replayUnavailable("the call that ran it stopped before it answered")
	}
	return s.followRemote(ctx, w, rec, retry)
}

func inProgress(retryAfter time.Duration) error {
	return &llm.Error{Code: llm.CodeInProgress, Message: "the first request with this Idempotency-Key is still running; retry with the same key", RetryAfter: retryAfter}
}

// joiner writes a stream the retry joined: the head once, then events as
// they come, leaving out the usage chunk unless the retry asked for it.
type joiner struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	retry   Retry
	started bool
	written int
}

func (j *joiner) start(h *Head) {
	if j.started {
		return
	}
	j.started = true
	setHead(j.w, h)
	j.w.Header().Set("Cache-Control", "no-cache")
	j.w.WriteHeader(h.Status)
}

func (j *joiner) write(events []Event) {
	for _, ev := range events[j.written:] {
		if ev.Usage && !j.retry.IncludeUsage {
			continue
		}
		sse.WriteData(j.w, ev.Data)
	}
	j.written = len(events)
	j.rc.Flush()
}

// fail ends a joined stream that cannot go on.
func (j *joiner) fail(why string) {
	sse.WriteData(j.w, []byte(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"error"}],"error":{"message":"`+
		why+`","type":"idempotency_error","code":"idempotency_replay_unavailable","param":null}}`))
	j.rc.Flush()
}

func (s *Service) followLocal(ctx context.Context, w http.ResponseWriter, f *flight, retry Retry) error {
	j := &joiner{w: w, rc: http.NewResponseController(w), retry: retry}
	deadline := time.NewTimer(s.cfg.MaxWait)
	defer deadline.Stop()
	for {
		head, events, o, ans, changed := f.snapshot()
		if head != nil && len(events) > 0 && !j.started {
			j.start(head)
		}
		if j.started {
			j.write(events)
		}
		switch o {
		case outcomeCompleted:
			if !j.started {
				writeAnswer(w, ans, retry)
			}
			return nil
		case outcomeFailed:
			if !j.started {
				return replayUnavailable("it ended in an error, so there is no answer to replay")
			}
			j.fail("the first request failed")
			return nil
		case outcomeReleased:
			if !j.started {
				return ErrRunAgain
			}
			return nil // every event was shared live
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if j.started {
				// The answer is under way: end it visibly, never with a
				// second status line.
				j.fail("the wait for the first request reached its time limit")
				return nil
			}
			return ctx.Err()
		case <-deadline.C:
			if !j.started {
				return inProgress(s.retryAfter())
			}
		}
	}
}

func (s *Service) retryAfter() time.Duration { return max(time.Second, s.cfg.Lease/10) }

func (s *Service) followRemote(ctx context.Context, w http.ResponseWriter, rec *Record, retry Retry) (*Record, error) {
	j := &joiner{w: w, rc: http.NewResponseController(w), retry: retry}
	deadline := s.now().Add(s.cfg.MaxWait)
	interval := s.cfg.PollInterval
	for {
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			if j.started {
				j.fail("the wait for the first request reached its time limit")
				return nil, nil
			}
			return nil, ctx.Err()
		case <-t.C:
		}
		interval = min(interval*2, 8*s.cfg.PollInterval)
		now := s.now()
		r, err := s.store.Load(ctx, rec.Key, now)
		switch {
		case errors.Is(err, ErrNotFound):
			if !j.started {
				return nil, ErrRunAgain
			}
			j.fail("the answer can no longer be joined")
			return nil, nil
		case err != nil:
			if !j.started {
				return nil, unavailable(err)
			}
			j.fail("the answer can no longer be joined")
			return nil, nil
		}
		if r.Owner != rec.Owner {
			if !j.started {
				return r, nil // released and reserved again meanwhile
			}
			j.fail("the answer can no longer be joined")
			return nil, nil
		}
		switch {
		case r.State == StateCompleted:
			if !j.started {
				if r.Answer == nil {
					return nil, replayUnavailable("its stored answer is no longer kept")
				}
				writeAnswer(w, r.Answer, retry)
				return nil, nil
			}
			if r.Answer != nil {
				j.write(r.Answer.Events)
			} else {
				j.fail("the stored answer is no longer kept")
			}
			return nil, nil
		case r.State == StateTombstone || r.LeaseUntil.Before(now):
			if !j.started {
				return nil, replayUnavailable("it ended in an error, so there is no answer to replay")
			}
			j.fail("the first request failed")
			return nil, nil
		}
		if r.Head != nil && len(r.Events) > 0 {
			j.start(r.Head)
			j.write(r.Events)
		}
		if !j.started && now.After(deadline) {
			return nil, inProgress(s.retryAfter())
		}
	}
}

func setHead(w http.ResponseWriter, h *Head) {
	hdr := w.Header()
	for k, v := range h.Header {
		hdr.Set(k, v)
	}
	hdr.Set(HeaderReplayed, "true")
}

// writeAnswer replays a stored answer as it was sent: the same status, the
// headers that matter (the original x-request-id among them), and the same
// body bytes or the same events in order.
func writeAnswer(w http.ResponseWriter, a *Answer, retry Retry) {
	setHead(w, &a.Head)
	if !a.Stream {
		w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
		w.WriteHeader(a.Status)
		w.Write(a.Body)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(a.Status)
	j := &joiner{w: w, rc: http.NewResponseController(w), retry: retry, started: true}
	j.write(a.Events)
}
