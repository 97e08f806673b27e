// Package ratelimit counts requests and tokens per minute for projects and
// keys (their rpm and tpm), on every instance together when the counters
// live in DynamoDB (Dynamo), in the process otherwise (Memory).
//
// A limit is counted in fixed windows of one UTC minute: a request takes
// one request and its reserved tokens (its prompt's estimate plus the
// output it may produce) from the current window of each of its counters,
// or is refused when a counter has no room. Tokens count in the window
// they are produced in: a request still running when its window ends is
// counted again, its output reserve, in each later window it runs in
// (Carry: it was admitted, so no limit is checked), and once it ends, the
// window it ends in is corrected to its real count (Adjust). Within a
// window the count is exact on every instance (one conditional write a
// counter); across a window's edge a client may spend up to one window's
// worth on each side.
package ratelimit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Window is the length of a counting window.
const Window = time.Minute

// Limit is a counter's bounds per window; 0 means none.
type Limit struct {
	RPM, TPM int64
}

// Counter is one thing counted: a project ("p") or a key ("k") by id,
// with its limit.
type Counter struct {
	Scope, ID string
	Limit     Limit
}

// Usage is a counter's window after a Take: its limit, what it counted and
// when the window ends.
type Usage struct {
	// Scope is its counter's ("p" or "k").
	Scope            string
	Limit            Limit
	Requests, Tokens int64
	Reset            time.Time
}

// Remaining is what is left of the limits (0 when spent, or not set).
func (u Usage) Remaining() (requests, tokens int64) {
	return max(u.Limit.RPM-u.Requests, 0), max(u.Limit.TPM-u.Tokens, 0)
}

// ErrLimited is Take's refusal: a counter has no room in this window (its
// Usage says which and until when).
var ErrLimited = errors.New("ratelimit: limit reached")

// ErrUnavailable means the counters could not be reached.
var ErrUnavailable = errors.New("ratelimit: store unavailable")

// Taken is what a Take counted, for Adjust.
type Taken struct {
	Counters []Counter
	Window   int64 // unix minute
	Reserved int64
}

// Limiter counts. Take counts one request and reserve tokens on every
// counter in the window of now, or none: on ErrLimited, usages says the
// windows as they were (the refusing counter's first); Adjust corrects the
// tokens of what was taken, in the window it was taken in, by delta (the
// real count less the reserve); Carry counts tokens of what was taken, a
// request that still runs, in the later window of now, with no limit
// check, and returns what was taken there (Reserved: tokens), which later
// Adjusts and Carries go on from.
type Limiter interface {
	Take(ctx context.Context, now time.Time, counters []Counter, reserve int64) (Taken, []Usage, error)
	Adjust(ctx context.Context, t Taken, delta int64) error
	Carry(ctx context.Context, t Taken, now time.Time, tokens int64) (Taken, error)
}

// WindowOf is the window of t: its unix minute.
func WindowOf(t time.Time) int64 { return t.Unix() / int64(Window/time.Second) }

// windowEnd is when window w ends.
func windowEnd(w int64) time.Time { return time.Unix((w+1)*int64(Window/time.Second), 0).UTC() }

// fits reports whether one more request with reserve tokens fits counts
// under l.
func fits(l Limit, requests, tokens, reserve int64) bool {
	if l.RPM > 0 && requests+1 > l.RPM {
		return false
	}
	if l.TPM > 0 && tokens+reserve > l.TPM {
		return false
	}
	return true
}

// Memory is a Limiter in the process: its counts are this instance's
// alone.
type Memory struct {
	mu      sync.Mutex
	windows map[string]*memWindow
}

type memWindow struct {
	window           int64
	requests, tokens int64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{windows: map[string]*memWindow{}} }

func (m *Memory) window(c Counter, w int64) *memWindow {
	k := c.Scope + "#" + c.ID
	mw := m.windows[k]
	if mw == nil || mw.window != w {
		mw = &memWindow{window: w}
		m.windows[k] = mw
	}
	return mw
}

// Take implements Limiter.
func (m *Memory) Take(_ context.Context, now time.Time, counters []Counter, reserve int64) (Taken, []Usage, error) {
	w := WindowOf(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.windows) > 4096 {
		for k, mw := range m.windows {
			if mw.window < w {
				delete(m.windows, k)
			}
		}
	}
	usages := make([]Usage, len(counters))
	for _, c := range counters {
		mw := m.window(c, w)
		if !fits(c.Limit, mw.requests, mw.tokens, reserve) {
			return Taken{}, []Usage{{Scope: c.Scope, Limit: c.Limit, Requests: mw.requests, Tokens: mw.tokens, Reset: windowEnd(w)}}, ErrLimited
		}
	}
	for i, c := range counters {
		mw := m.window(c, w)
		mw.requests++
		mw.tokens += reserve
		usages[i] = Usage{Scope: c.Scope, Limit: c.Limit, Requests: mw.requests, Tokens: mw.tokens, Reset: windowEnd(w)}
	}
	return Taken{Counters: counters, Window: w, Reserved: reserve}, usages, nil
}

// Carry implements Limiter. A counter whose window is already later than
// now's (another request's clock ran ahead) keeps it: its older window is
// over.
func (m *Memory) Carry(_ context.Context, t Taken, now time.Time, tokens int64) (Taken, error) {
	w := WindowOf(now)
	if w <= t.Window {
		return t, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range t.Counters {
		if mw := m.windows[c.Scope+"#"+c.ID]; mw != nil && mw.window > w {
			continue
		}
		m.window(c, w).tokens += tokens
	}
	return Taken{Counters: t.Counters, Window: w, Reserved: tokens}, nil
}

// Adjust implements Limiter.
func (m *Memory) Adjust(_ context.Context, t Taken, delta int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range t.Counters {
		if mw := m.windows[c.Scope+"#"+c.ID]; mw != nil && mw.window == t.Window {
			mw.tokens = max(mw.tokens+delta, 0)
		}
	}
	return nil
}
