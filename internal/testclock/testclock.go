// Package testclock is a clock for tests: it moves only when told to, and
// is safe to read from the goroutines of the code under test.
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock that reads t until advanced.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time (pass c.Now where a func() time.Time is wanted).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
