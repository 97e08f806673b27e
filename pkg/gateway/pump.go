package gateway

import (
	"context"
	"errors"
	"sync"
	"time"
)

// pumpMaxBytes bounds what a pump holds for a client that reads slower than
// the provider writes; past it the client is dropped.
const pumpMaxBytes = 8 << 20

var errClientTooSlow = errors.New("gateway: the client reads too slowly; dropped")

// errPastCeiling drops a client still reading when its request's time is up.
var errPastCeiling = errors.New("gateway: the request's time limit passed while its client was still reading; dropped")

// pumpCloseGrace is how long past its request's limit Close still lets the
// queue go out to a client that reads: a request that ended at its limit
// (its last events, and the error that says so, still queued) gets them to
// its client instead of a cut.
const pumpCloseGrace = 5 * time.Second

// pumpSyncBytes is the largest JSON answer the caller writes itself.
const pumpSyncBytes = 16 << 10

// pump is a Writer that does not block its caller on the client: it queues
// what is written and a goroutine of its own writes it to the client. A
// keyed request's answer is recorded through a pump, so that recording does
// not wait on the client reading: a client that stops reading is dropped
// by the wire's write deadline, or here once pumpMaxBytes are queued, and
// the request goes on. Close waits until the queue is written (or the
// client dropped).
//
// A JSON answer of up to pumpSyncBytes, and an error, the caller writes
// itself when nothing is queued and the writer bounds its writes
// (Client.WritesBounded: a deadline on every write): one write the socket takes at
// once (its buffer holds far more), without starting the goroutine and
// waking it for the one frame, which would cost a keyed request about a
// tenth of its latency under load. Only a client that left earlier
// answers unread on its connection can make that write wait, and then for
// the write deadline at most; the answer is recorded after it either way.
// A writer without deadlines (the Lambda edge writes into a pipe the
// runtime drains) gets every frame through the goroutine. The goroutine
// starts with the first frame that is queued: a stream's, or a larger body.
type pump struct {
	w Client

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []frame
	bytes   int
	closed  bool
	err     error
	running bool // run was started
	aborted bool // run told the writer to drop the client
	sync    bool // the writer bounds its writes: small answers may be written by the caller
	stopped chan struct{}
	grace   time.Duration // pumpCloseGrace; tests shorten it
}

type frame struct {
	kind   byte // 's' start, 'b' body, 'e' event, 'x' error
	name   string
	status int
	header map[string]string
	stream bool
	data   []byte
	err    error
}

// KeepAlive starts the client's keep-alive. It is called before any frame
// is queued; the client's first frame ends it.
func (p *pump) KeepAlive() (stop func()) { return p.w.KeepAlive() }

func newPump(w Client) *pump {
	p := &pump{w: w, stopped: make(chan struct{}), grace: pumpCloseGrace, sync: w.WritesBounded()}
	p.wake = sync.NewCond(&p.mu)
	// The client flushes an event only when no other event is queued
	// behind it: a burst goes out in one write, and nothing queued ever
	// waits.
	w.SetMore(p)
	return p
}

// More reports whether the next frame to write is an event (Backlog); the
// writer calls it from run, between frames.
func (p *pump) More() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) > 0 && p.queue[0].kind == 'e'
}

func (p *pump) run() {
	defer close(p.stopped)
	for {
		p.mu.Lock()
		// A stream's start alone waits for its first event, which the
		// caller pushes next (it starts a stream once it has output): the
		// headers then leave with that event, in one write (the writer's
		// SetMore hint sees it queued). Any other frame, or Close, ends
		// the wait.
		for !p.closed && (len(p.queue) == 0 || len(p.queue) == 1 && p.queue[0].kind == 's' && p.queue[0].stream) {
			p.wake.Wait()
		}
		if len(p.queue) == 0 {
			p.mu.Unlock()
			return
		}
		f := p.queue[0]
		p.queue[0] = frame{}
		p.queue = p.queue[1:]
		p.bytes -= len(f.data)
		gone := p.err != nil
		drop := !p.aborted && (p.err == errClientTooSlow || p.err == errPastCeiling)
		if drop {
			p.aborted = true
		}
		p.mu.Unlock()
		if drop {
			// The pump gave up on the client with frames still queued:
			// the writer (this goroutine's) cuts the answer off, so that
			// it visibly breaks off (httpapi's wire: the connection is
			// cut without the response's proper end). A stream the pump
			// stops feeding would otherwise end as if it were whole,
			// short of its last events, and a client could take a cut
			// answer for a complete one instead of retrying its key for
			// the recorded one.
			p.w.Abort()
		}
		if gone && f.kind != 's' && f.kind != 'x' {
			continue
		}
		if err := p.write(f); err != nil {
			p.mu.Lock()
			if p.err == nil {
				p.err = err
			}
			p.mu.Unlock()
		}
	}
}

// write hands one frame to the client's writer.
func (p *pump) write(f frame) error {
	switch f.kind {
	case 's':
		p.w.Start(f.status, f.header, f.stream)
	case 'x':
		p.w.Error(f.err)
	case 'b':
		return p.w.Body(f.data)
	case 'e':
		return p.w.Event(f.name, f.data)
	}
	return nil
}

func (p *pump) push(f frame) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil && f.kind != 's' && f.kind != 'x' {
		return p.err
	}
	if p.sync && !p.running && len(p.queue) == 0 && (f.kind == 's' && !f.stream || f.kind == 'x' || f.kind == 'b' && len(f.data) <= pumpSyncBytes) {
		// Written by the caller (see pump). The pump's methods are called
		// from one goroutine and run has not started, so nothing else
		// uses the writer meanwhile; the lock is let go while it writes,
		// as the writer may ask More. (A body never reaches here
		// once the client is gone: see above.)
		p.mu.Unlock()
		err := p.write(f)
		p.mu.Lock()
		if err != nil && p.err == nil {
			p.err = err
		}
		return p.err
	}
	if !p.running {
		p.running = true
		go p.run()
	}
	// A JSON body is one frame, written whole: only a stream's events are
	// capped (an answer is never replaced by an empty one).
	if f.kind == 'e' && p.bytes+len(f.data) > pumpMaxBytes {
		p.err = errClientTooSlow
		return p.err
	}
	// The caller may reuse its buffer.
	f.data = append([]byte(nil), f.data...)
	p.queue = append(p.queue, f)
	p.bytes += len(f.data)
	p.wake.Signal()
	return nil
}

func (p *pump) Error(err error) { p.push(frame{kind: 'x', err: err}) }

func (p *pump) Start(status int, header map[string]string, stream bool) {
	p.push(frame{kind: 's', status: status, header: header, stream: stream})
}

func (p *pump) Body(b []byte) error { return p.push(frame{kind: 'b', data: b}) }

func (p *pump) Event(name string, data []byte) error {
	return p.push(frame{kind: 'e', name: name, data: data})
}

// Close waits until everything queued is written or the client is
// dropped: at the latest pumpCloseGrace after ctx (the request's, with its
// time limit) is done, when the client still being written to is dropped
// (a slow reader that keeps reading would otherwise hold the request, and
// its admission slot, for as long as it likes) and Close waits only for the
// write under way, which has a deadline.
func (p *pump) Close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	p.wake.Signal()
	running := p.running
	p.mu.Unlock()
	if !running {
		return
	}
	select {
	case <-p.stopped:
		return
	case <-ctx.Done():
	}
	grace := time.NewTimer(p.grace)
	defer grace.Stop()
	select {
	case <-p.stopped:
		return
	case <-grace.C:
	}
	p.mu.Lock()
	if p.err == nil {
		p.err = errPastCeiling
	}
	p.wake.Signal()
	p.mu.Unlock()
	<-p.stopped
}
