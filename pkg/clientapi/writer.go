package clientapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/buzzgate/buzzgate/pkg/sse"
)

// Wire is the one writer of answers on HTTP: live answers, waiters' answers,
// joined streams and replays all go out through it, so that they are the
// same bytes (an event whose data spans lines is split into several data:
// lines, whoever writes it). Every write has a deadline: a client that
// makes no progress for writeTimeout is dropped (its request, if keyed,
// still finishes and records its answer).
type Wire struct {
	w            *Recorder
	rc           *http.ResponseController
	writeTimeout time.Duration
	// errorf writes an error envelope (the API's own).
	errorf func(w http.ResponseWriter, err error) int
	gone   error
	// status of a JSON answer, written with its Content-Length by Body.
	status int
	// more, when set, tells Event that another event is at hand (SetMore).
	more func() bool
	// streaming: Start wrote a stream's status and headers.
	streaming bool
}

func NewWire(w *Recorder, writeTimeout time.Duration, errorf func(http.ResponseWriter, error) int) *Wire {
	return &Wire{w: w, rc: http.NewResponseController(w), writeTimeout: writeTimeout, errorf: errorf}
}

func (o *Wire) Error(err error) {
	if o.w.Wrote {
		return // never a second status line
	}
	o.deadline()
	o.errorf(o.w, err)
}

func (o *Wire) Start(status int, header map[string]string, stream bool) {
	h := o.w.Header()
	// As h.Set for each, with one backing array for all the values instead
	// of one slice per header (an answer's headers are set once).
	n := len(header)
	if stream {
		n += 2
	}
	vals := make([]string, 0, n)
	set := func(k, v string) {
		vals = append(vals, v)
		h[http.CanonicalHeaderKey(k)] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	for k, v := range header {
		set(k, v)
	}
	if stream {
		set("Cache-Control", "no-cache")
		set("X-Accel-Buffering", "no")
		h.Del("Content-Length")
		o.streaming = true
		o.deadline()
		o.w.WriteHeader(status)
		if o.more != nil && o.more() {
			// The first event is at hand (the router answers once the
			// provider's output began): the headers leave with it, in
			// one write instead of two.
			return
		}
		o.flush()
		return
	}
	o.status = status
}

// Body writes a JSON answer whole, with its Content-Length.
func (o *Wire) Body(b []byte) error {
	if o.gone != nil {
		return o.gone
	}
	o.w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	o.w.WriteHeader(o.status)
	o.deadline()
	if _, err := (pieces{o}).Write(b); err != nil {
		o.gone = err
		return err
	}
	// Out now: the writes that finish the request (the record, the bill)
	// come after, and the client must not wait for them.
	return o.flush()
}

func (o *Wire) Event(name string, data []byte) error {
	if o.gone != nil {
		return o.gone
	}
	o.deadline()
	if err := sse.WriteEvent(pieces{o}, name, data); err != nil {
		o.gone = err
		return err
	}
	if o.more != nil && o.more() {
		// The next event is already at hand: it goes out with this one.
		return nil
	}
	return o.flush()
}

// SetMore makes Event flush only when more reports that no other event is
// at hand (router.Answer.More): a burst from the provider leaves in one
// write, and an event followed by a pause leaves at once.
func (o *Wire) SetMore(more func() bool) { o.more = more }

// Flush sends what Event held back; it does nothing before a stream
// started (a JSON answer's headers wait for its Body).
func (o *Wire) Flush() error {
	if o.gone != nil || !o.streaming {
		return o.gone
	}
	o.deadline()
	return o.flush()
}

// writePiece is the most a write to the client carries under one deadline.
const writePiece = 64 << 10

// pieces writes to the client in pieces of at most writePiece bytes, each
// under a deadline of its own (the first under the caller's): a client is
// dropped when it makes no progress for writeTimeout, never because a large
// answer that it reads steadily takes longer than that as a whole.
type pieces struct{ o *Wire }

func (p pieces) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), writePiece)
		if n > 0 {
			p.o.deadline()
		}
		m, err := p.o.w.Write(b[:k])
		n += m
		if err != nil {
			return n, err
		}
		b = b[k:]
	}
	return n, nil
}

// errAborted is what every write returns once Abort was called.
var errAborted = errors.New("clientapi: the client was dropped")

// Abort drops the client: every later write fails, and when the handler
// returns the connection is cut without the response's proper end (a
// chunked stream's last chunk; ServeHTTP panics with http.ErrAbortHandler,
// which both edges turn into a broken response), so that the client sees
// its answer break off and retries, instead of taking a stream the gateway
// stopped feeding for a whole one. A keyed request's pump calls it
// (gateway's aborter), from the goroutine that writes.
func (o *Wire) Abort() {
	if o.gone == nil {
		o.gone = errAborted
	}
	o.w.Aborted = true
}

// WritesBounded reports whether every write has a deadline: a write
// timeout is set and the connection takes deadlines (the Lambda edge's
// writer and test recorders do not). Only then does a keyed request's pump
// let the request write a small answer itself (gateway's pump). The probe
// sets the deadline the next write would get, so the connection is never
// left without one.
func (o *Wire) WritesBounded() bool {
	return o.writeTimeout > 0 && o.rc.SetWriteDeadline(time.Now().Add(o.writeTimeout)) == nil
}

// deadline gives the next write writeTimeout to make progress. A writer
// that cannot take a deadline (the Lambda edge, a test recorder) writes
// without one.
func (o *Wire) deadline() {
	if o.writeTimeout > 0 {
		_ = o.rc.SetWriteDeadline(time.Now().Add(o.writeTimeout))
	}
}

func (o *Wire) flush() error {
	if err := o.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		o.gone = err
	}
	return o.gone
}
