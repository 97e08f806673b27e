package clientapi

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/pkg/gateway"
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
	rc           http.ResponseController
	writeTimeout time.Duration
	// noDeadline: the writer took no write deadline (ErrNotSupported),
	// and will take none: it is not asked again.
	noDeadline bool
	// envelope writes an error envelope (the API's own).
	envelope ErrorWriter
	gone     error
	// status of a JSON answer, written with its Content-Length by Body;
	// contentLength is that header's value slice.
	status        int
	contentLength [1]string
	// more, when set, tells Event that another event is at hand (SetMore).
	more gateway.Backlog
	// streaming: Start wrote a stream's status and headers.
	streaming bool
	// keepAliveEvery is SetKeepAlive's interval (0: none); ka the
	// keep-alive of the answer being waited for (KeepAlive).
	keepAliveEvery time.Duration
	ka             *keepAlive
}

// keepAlive is the state of a JSON answer's keep-alive. Its timer's
// goroutine writes to the client under mu until stopped; stopped and sent
// are read by the Wire's writers once it is.
type keepAlive struct {
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	// sent: the status (200) and headers went out with the first
	// whitespace; the answer, or the error envelope, is the rest of the
	// body.
	sent bool
}

// keepAliveBytes is what a keep-alive writes: JSON allows whitespace
// before a document, so the body still parses as the answer.
var keepAliveBytes = []byte(" ")

// ErrorWriter writes an error in a client API's envelope and returns the
// status it wrote (API.WriteError).
type ErrorWriter interface {
	WriteError(w http.ResponseWriter, err error) int
}

// Init makes o, unused, the writer of an answer to w, its errors written
// by envelope (the client API's). It is a method, not a constructor, so
// that the HTTP layer keeps the Wire with the rest of a request's state,
// in one allocation.
func (o *Wire) Init(w *Recorder, writeTimeout time.Duration, envelope ErrorWriter) {
	*o = Wire{w: w, rc: *http.NewResponseController(w), writeTimeout: writeTimeout, envelope: envelope}
}

func (o *Wire) Error(err error) {
	if o.endKeepAlive() {
		// The status (200) went out with the keep-alive: the error
		// envelope is the body, after the whitespace. The log line and
		// the metrics take the error's status (a 502 counts as one).
		if o.gone == nil {
			o.deadline()
			o.w.Status = o.envelope.WriteError(o.w, err)
			o.flush()
		}
		return
	}
	if o.w.Wrote {
		return // never a second status line
	}
	o.deadline()
	o.envelope.WriteError(o.w, err)
}

func (o *Wire) Start(status int, header map[string]string, stream bool) {
	if o.endKeepAlive() {
		// The status and headers went out with the keep-alive.
		o.status = status
		return
	}
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
		if o.more != nil && o.more.More() {
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
	if !o.endKeepAlive() {
		// As Header.Set, with the value's slice in o.
		o.contentLength[0] = strconv.Itoa(len(b))
		o.w.Header()["Content-Length"] = o.contentLength[:]
		o.w.WriteHeader(o.status)
	}
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
	if o.more != nil && o.more.More() {
		// The next event is already at hand: it goes out with this one.
		return nil
	}
	return o.flush()
}

// SetMore makes Event flush only when more reports that no other event is
// at hand (router.Answer.More): a burst from the provider leaves in one
// write, and an event followed by a pause leaves at once.
func (o *Wire) SetMore(more gateway.Backlog) { o.more = more }

// Flush sends what Event held back; it does nothing before a stream
// started (a JSON answer's headers wait for its Body, and a keep-alive may
// be writing).
func (o *Wire) Flush() error {
	if !o.streaming {
		return nil
	}
	if o.gone != nil {
		return o.gone
	}
	o.deadline()
	return o.flush()
}

// SetKeepAlive makes KeepAlive write whitespace every d (0: never).
func (o *Wire) SetKeepAlive(d time.Duration) { o.keepAliveEvery = d }

// KeepAlive keeps the client's connection busy while a JSON answer is
// produced: when nothing was written for the keep-alive interval, the
// status 200 and the headers set so far go out with one space, and another
// space every interval after, until Start, Body, Error or Abort, or stop.
// A proxy that cuts a response idle for longer (API Gateway's idle
// timeout) then relays the answer, which JSON parses as if the whitespace
// were not there. The status is fixed by then: an error after it is the
// error envelope in a 200 body, and headers set later (the provider's, the
// rate limits') are not sent. It does nothing without SetKeepAlive's
// interval, or once anything was written. Call it from the goroutine that
// writes, before the answer.
func (o *Wire) KeepAlive() (stop func()) {
	if o.keepAliveEvery <= 0 || o.w.Wrote || o.ka != nil || o.gone != nil {
		return func() {}
	}
	ka := &keepAlive{}
	o.ka = ka
	ka.mu.Lock()
	ka.timer = time.AfterFunc(o.keepAliveEvery, o.keepAliveTick)
	ka.mu.Unlock()
	return func() { o.endKeepAlive() }
}

// keepAliveTick writes one keep-alive, the status and headers first, and
// sets the next.
func (o *Wire) keepAliveTick() {
	ka := o.ka
	ka.mu.Lock()
	defer ka.mu.Unlock()
	if ka.stopped || o.gone != nil {
		return
	}
	if !ka.sent {
		ka.sent, o.w.KeptAlive = true, true
		h := o.w.Header()
		h.Set("Content-Type", "application/json")
		h.Del("Content-Length")
		o.w.WriteHeader(http.StatusOK)
	}
	o.deadline()
	if _, err := o.w.Write(keepAliveBytes); err != nil {
		o.gone = err
		return
	}
	if o.flush() == nil {
		ka.timer.Reset(o.keepAliveEvery)
	}
}

// endKeepAlive stops the keep-alive, if any, waiting for a write in
// progress; it reports whether the status and headers went out with it.
func (o *Wire) endKeepAlive() (sent bool) {
	ka := o.ka
	if ka == nil {
		return false
	}
	ka.mu.Lock()
	defer ka.mu.Unlock()
	if !ka.stopped {
		ka.stopped = true
		ka.timer.Stop()
	}
	return ka.sent
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
// (gateway.Client.Abort), from the goroutine that writes.
func (o *Wire) Abort() {
	o.endKeepAlive()
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
	return o.writeTimeout > 0 && !o.noDeadline && o.setDeadline() == nil
}

// deadline gives the next write writeTimeout to make progress. A writer
// that cannot take a deadline (the Lambda edge, a test recorder) writes
// without one.
func (o *Wire) deadline() {
	if o.writeTimeout > 0 && !o.noDeadline {
		_ = o.setDeadline()
	}
}

// setDeadline sets the next write's deadline. net/http formats a new
// error each time a writer takes none: the first one is remembered.
func (o *Wire) setDeadline() error {
	err := o.rc.SetWriteDeadline(time.Now().Add(o.writeTimeout))
	if errors.Is(err, http.ErrNotSupported) {
		o.noDeadline = true
	}
	return err
}

func (o *Wire) flush() error {
	if err := o.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		o.gone = err
	}
	return o.gone
}
