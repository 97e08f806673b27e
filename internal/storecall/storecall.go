// Package storecall gives one call to a store its own deadline, unless the
// store runs in this process.
//
// A call to DynamoDB gets a deadline of its own, so that a store that does
// not answer cannot hold a request for its whole ceiling. A call to a
// memory store (the memory ledger, the memory idempotency store) returns
// without waiting on a network or a disk; a context and a timer for it would be
// about a tenth of the gateway's allocations under load, so it
// gets none, and still sees its caller's context end.
package storecall

import (
	"context"
	"time"
)

// InProcess reports whether store says its calls never wait on a network or
// a disk (an InProcess method that returns true). A store that does not say
// so, a wrapper around a memory store included, is bounded.
func InProcess(store any) bool {
	ip, ok := store.(interface{ InProcess() bool })
	return ok && ip.InProcess()
}

// Bound returns ctx with deadline d for a call to a store, or ctx as it is
// for a store in this process (local).
func Bound(ctx context.Context, d time.Duration, local bool) (context.Context, context.CancelFunc) {
	if local {
		return ctx, nop
	}
	return context.WithTimeout(ctx, d)
}

// Detached is Bound for a write that must land even when ctx's caller has
// gone: ctx's cancellation is not passed on. A store in this process looks
// at nothing in its context but its end, so it gets context.Background().
func Detached(ctx context.Context, d time.Duration, local bool) (context.Context, context.CancelFunc) {
	if local {
		return context.Background(), nop
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

func nop() {}
