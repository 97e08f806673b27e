package gateway

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// blockedWriter is a client that reads nothing until released. reading,
// when set, is sent to once the first event is being written.
type blockedWriter struct {
	noTuning
	release chan struct{}
	reading chan struct{}
	mu      sync.Mutex
	events  int
	started bool
}

func (b *blockedWriter) Error(error)                        {}
func (b *blockedWriter) Start(int, map[string]string, bool) { b.started = true }
func (b *blockedWriter) Body([]byte) error                  { <-b.release; return nil }
func (b *blockedWriter) Event(string, []byte) error {
	if b.reading != nil {
		b.reading <- struct{}{}
		b.reading = nil
	}
	<-b.release
	b.mu.Lock()
	b.events++
	b.mu.Unlock()
	return nil
}

// The pump never blocks its caller on a client that does not read (a
// writer without write deadlines, as blockedWriter is); past
// pumpMaxBytes queued it drops the client (errClientTooSlow) through its
// writer, so that the answer visibly breaks off; Close waits until the
// client's copy is done.
func TestPumpNeverBlocks(t *testing.T) {
	w := &abortWriter{blockedWriter: blockedWriter{release: make(chan struct{}), reading: make(chan struct{})}}
	p := newPump(w)
	p.Start(200, nil, true)
	big := make([]byte, 1<<20)
	// The client takes the first event and reads no further (without this
	// wait, whether the pump's goroutine got to an event before the drop
	// depended on the scheduler).
	err := p.Event("", big)
	<-w.reading
	for i := 1; i < 16 && err == nil; i++ {
		err = p.Event("", big)
	}
	if !errors.Is(err, errClientTooSlow) {
		t.Fatalf("after 16 MiB to a client that reads nothing: %v, want errClientTooSlow", err)
	}
	close(w.release)
	p.Close(context.Background())
	if !w.started || w.events != 1 || w.aborts != 1 {
		t.Errorf("started %v, %d events written, %d aborts; want only the event under way, and the client dropped through its writer", w.started, w.events, w.aborts)
	}
	// A JSON body is never capped: an answer is not replaced by nothing.
	w2 := &blockedWriter{release: make(chan struct{})}
	close(w2.release)
	p2 := newPump(w2)
	p2.Start(200, nil, false)
	if err := p2.Body(make([]byte, pumpMaxBytes+1)); err != nil {
		t.Errorf("a body over the cap: %v", err)
	}
	p2.Close(context.Background())
}

// hintWriter records, after each event, what the pump's SetMore hint said.
type hintWriter struct {
	noTuning
	release chan struct{}
	more    Backlog
	events  []string
	hints   []bool
}

func (h *hintWriter) SetMore(f Backlog)                  { h.more = f }
func (h *hintWriter) Error(error)                        {}
func (h *hintWriter) Start(int, map[string]string, bool) { <-h.release }
func (h *hintWriter) Body([]byte) error                  { return nil }
func (h *hintWriter) Event(name string, data []byte) error {
	h.events = append(h.events, string(data))
	h.hints = append(h.hints, h.more.More())
	return nil
}

// TestPumpHintsQueuedEvents: a writer that can hold a flush back is told
// that more events are queued for every event but the last one queued.
func TestPumpHintsQueuedEvents(t *testing.T) {
	w := &hintWriter{release: make(chan struct{})}
	p := newPump(w)
	if w.more == nil {
		t.Fatal("the pump did not give the writer its hint")
	}
	p.Start(200, nil, true) // the writer holds Start until every event is queued
	for i := range 10 {
		p.Event("", []byte{byte('0' + i)})
	}
	close(w.release)
	p.Close(context.Background())
	if len(w.events) != 10 || w.events[0] != "0" || w.events[9] != "9" {
		t.Fatalf("events %q", w.events)
	}
	for i, more := range w.hints {
		if want := i < 9; more != want {
			t.Errorf("after event %d the hint said %v, want %v", i, more, want)
		}
	}
}

// bodyWriter records a JSON answer; Body blocks until release is closed.
type bodyWriter struct {
	noTuning
	release chan struct{}
	mu      sync.Mutex
	status  int
	body    []byte
	errs    int
}

func (b *bodyWriter) Error(error) {
	b.mu.Lock()
	b.errs++
	b.mu.Unlock()
}
func (b *bodyWriter) Start(status int, _ map[string]string, _ bool) { b.status = status }
func (b *bodyWriter) Event(string, []byte) error                    { return nil }
func (b *bodyWriter) Body(p []byte) error {
	<-b.release
	b.mu.Lock()
	b.body = append([]byte(nil), p...)
	b.mu.Unlock()
	return nil
}

func (b *bodyWriter) WritesBounded() bool { return true }

func (b *bodyWriter) got() ([]byte, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.body, b.errs
}

// A JSON answer of up to pumpSyncBytes, and an error, are written by the
// caller: done when the call returns, without the pump's goroutine. A
// larger body is queued for the goroutine and never blocks the caller.
func TestPumpWritesSmallAnswersItself(t *testing.T) {
	w := &bodyWriter{release: make(chan struct{})}
	close(w.release)
	p := newPump(w)
	p.Start(201, nil, false)
	small := []byte(`{"id":"chatcmpl-1"}`)
	if err := p.Body(small); err != nil {
		t.Fatal(err)
	}
	if body, _ := w.got(); string(body) != string(small) || w.status != 201 {
		t.Fatalf("after Body returned: status %d, body %q; want it written already", w.status, body)
	}
	p.Error(errors.New("late"))
	if _, errs := w.got(); errs != 1 {
		t.Fatalf("errors written = %d, want 1", errs)
	}
	if p.running {
		t.Error("the pump started its goroutine for a small JSON answer")
	}
	p.Close(context.Background())

	// Over the limit: queued, and the caller goes on while the client
	// reads nothing.
	w2 := &bodyWriter{release: make(chan struct{})}
	p2 := newPump(w2)
	p2.Start(200, nil, false)
	big := make([]byte, pumpSyncBytes+1)
	if err := p2.Body(big); err != nil {
		t.Fatal(err)
	}
	if body, _ := w2.got(); body != nil {
		t.Fatal("a body over pumpSyncBytes was written by the caller")
	}
	close(w2.release)
	p2.Close(context.Background())
	if body, _ := w2.got(); len(body) != len(big) {
		t.Fatalf("written %d bytes, want %d", len(body), len(big))
	}
}

// unboundedWriter is a bodyWriter that cannot put a deadline on its writes
// (the Lambda edge's pipe).
type unboundedWriter struct{ bodyWriter }

func (u *unboundedWriter) WritesBounded() bool { return false }

// A writer without write deadlines gets even a small answer through the
// goroutine: the caller never waits on it.
func TestPumpUnboundedWriterNeverBlocks(t *testing.T) {
	w := &unboundedWriter{bodyWriter{release: make(chan struct{})}}
	p := newPump(w)
	p.Start(200, nil, false)
	if err := p.Body([]byte(`{}`)); err != nil { // would block if written here
		t.Fatal(err)
	}
	if body, _ := w.got(); body != nil {
		t.Fatal("a writer without deadlines was written by the caller")
	}
	close(w.release)
	p.Close(context.Background())
	if body, _ := w.got(); string(body) != `{}` {
		t.Fatalf("written %q", body)
	}
}

// startWriter records whether each frame it was given found an event
// queued behind it (the pump's SetMore hint).
type startWriter struct {
	noTuning
	more    Backlog
	started chan bool // the hint when Start was written
	events  int
}

func (w *startWriter) SetMore(f Backlog) { w.more = f }
func (w *startWriter) Error(error)       {}
func (w *startWriter) Start(int, map[string]string, bool) {
	w.started <- w.more.More()
}
func (w *startWriter) Body([]byte) error          { return nil }
func (w *startWriter) Event(string, []byte) error { w.events++; return nil }

// TestPumpStreamStartWaitsForFirstEvent: a keyed stream's headers leave
// with its first event (the writer is told an event is queued behind them),
// however soon the pump's goroutine runs: it does not take the start frame
// alone. (The goroutine starts with that frame; it took it at once, and the
// headers left in a write of their own whenever it ran before the caller
// pushed the event: TestStreamHeadersLeaveWithFirstEvent failed so once.)
func TestPumpStreamStartWaitsForFirstEvent(t *testing.T) {
	w := &startWriter{started: make(chan bool, 1)}
	p := newPump(w)
	p.Start(200, nil, true)
	// Time for the goroutine to run (the failure needs it to run first;
	// the fixed pump waits however long this is).
	select {
	case <-w.started:
		t.Fatal("the stream's headers were written before its first event was queued")
	case <-time.After(100 * time.Millisecond):
	}
	p.Event("", []byte("one"))
	p.Close(context.Background())
	if more := <-w.started; !more || w.events != 1 {
		t.Errorf("headers written with an event queued: %v; events %d", more, w.events)
	}
	// Close alone (no event ever) still writes the start.
	w2 := &startWriter{started: make(chan bool, 1)}
	p2 := newPump(w2)
	p2.Start(200, nil, true)
	p2.Close(context.Background())
	if more := <-w2.started; more {
		t.Error("a start with nothing behind it was told an event was queued")
	}
}

// abortWriter is a blockedWriter that can drop its client (Client.Abort).
type abortWriter struct {
	blockedWriter
	aborts int // written by the pump's goroutine; read after Close
}

func (a *abortWriter) Abort() { a.aborts++ }

// A client that reads everything is never dropped (TestPumpNeverBlocks:
// one that does not is dropped through its writer).
func TestPumpKeepsAReadingClient(t *testing.T) {
	big := make([]byte, 1<<20)
	w2 := &abortWriter{blockedWriter: blockedWriter{release: make(chan struct{})}}
	close(w2.release)
	p2 := newPump(w2)
	p2.Start(200, nil, true)
	for range 4 {
		if err := p2.Event("", big); err != nil {
			t.Fatal(err)
		}
	}
	p2.Close(context.Background())
	if w2.aborts != 0 || w2.events != 4 {
		t.Errorf("a client that reads: %d aborts, %d events written; want 0 and 4", w2.aborts, w2.events)
	}
}

// slowWriter takes each event only when told to: a client that keeps
// reading, a little at a time.
type slowWriter struct {
	noTuning
	step   chan struct{}
	events int
	aborts int
}

func (s *slowWriter) Error(error)                        {}
func (s *slowWriter) Start(int, map[string]string, bool) {}
func (s *slowWriter) Body([]byte) error                  { return nil }
func (s *slowWriter) Event(string, []byte) error         { <-s.step; s.events++; return nil }
func (s *slowWriter) Abort()                             { s.aborts++ }

// Close waits for a slow client no longer than the request's time limit
// (its ctx) and the grace after it: then the client is dropped and Close
// waits only for the write under way. A slow but steady reader held the
// request, and its admission slot, for as long as it kept reading.
func TestPumpCloseEndsAtTheRequestsLimit(t *testing.T) {
	w := &slowWriter{step: make(chan struct{})}
	p := newPump(w)
	p.grace = time.Millisecond
	p.Start(200, nil, true)
	for range 10 {
		if err := p.Event("", []byte("data")); err != nil {
			t.Fatal(err)
		}
	}
	w.step <- struct{}{} // the client reads one event, and is slow with the next
	ctx, cancel := context.WithCancel(context.Background())
	closed := make(chan struct{})
	go func() {
		p.Close(ctx)
		close(closed)
	}()
	cancel() // the request's time is up
	for {    // until Close has seen it
		p.mu.Lock()
		seen := p.err == errPastCeiling
		p.mu.Unlock()
		if seen {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The write under way finishes (a real writer's deadline would end it);
	// nothing after it is written.
	w.step <- struct{}{}
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close still waits for a slow client after the request's time is up")
	}
	if w.events != 2 || w.aborts != 1 {
		t.Errorf("%d events written, %d aborts; want the 2 the client took and 1 abort", w.events, w.aborts)
	}
}

// A request that ends at its limit still gets what it queued to a client
// that reads: the last events (among them the error that says the limit
// was reached) go out within the grace, not cut off.
func TestPumpCloseGivesQueuedFramesAGrace(t *testing.T) {
	w := &slowWriter{step: make(chan struct{})}
	p := newPump(w)
	p.Start(200, nil, true)
	for range 3 {
		if err := p.Event("", []byte("data")); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the request's time is already up when it closes
	closed := make(chan struct{})
	go func() {
		p.Close(ctx)
		close(closed)
	}()
	for { // Close has begun (the queue is still there to write)...
		p.mu.Lock()
		began := p.closed
		p.mu.Unlock()
		if began {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // ...and is past the request's limit.
	// The client reads them, one at a time, while the pump writes.
	timeout := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case w.step <- struct{}{}:
		case <-closed:
			done = true
		case <-timeout:
			t.Fatal("Close did not return once the queue was written")
		}
	}
	if w.events != 3 || w.aborts != 0 {
		t.Errorf("%d events written, %d aborts; want all 3 and none", w.events, w.aborts)
	}
}
