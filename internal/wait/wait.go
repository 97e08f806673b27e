// Package wait waits a duration that a request's context, or a closing
// component, can cut short: the backoff between attempts, a simulated or
// scripted upstream's latency.
package wait

import (
	"context"
	"time"
)

// Sleep waits d with a timer, so that it ends at once when ctx is done or
// done is closed (a nil done never is). It returns nil once d has passed,
// ctx's error when ctx ended the wait, and closed when done did. A d of
// zero or less does not wait and returns ctx's error.
func Sleep(ctx context.Context, done <-chan struct{}, closed error, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return closed
	}
}
