package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzzgate/buzzgate/internal/storecall"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
)

// DefaultFinishHorizon is how long the Finisher retries one step: well past
// the 10-minute store outage the gateway is built to ride out.
const DefaultFinishHorizon = 30 * time.Minute

// stepTimeout bounds one attempt of a step.
const stepTimeout = 10 * time.Second

// FinisherOptions configures a Finisher.
type FinisherOptions struct {
	// Horizon is how long a failing step is retried (DefaultFinishHorizon).
	Horizon time.Duration
	// MinBackoff and MaxBackoff bound the wait between two attempts
	// (100ms and 5s): the wait doubles, with jitter, up to MaxBackoff, so a
	// step lands within MaxBackoff of the store coming back.
	MinBackoff, MaxBackoff time.Duration
	Log                    *slog.Logger
}

// Finisher is the one retry loop of the gateway's writes after an answer:
// completing or tombstoning an idempotency record, settling or releasing a
// hold. Each step is idempotent (it may have landed while its answer was
// lost), so running it again is always safe. The first attempt runs at once,
// in the caller's goroutine; a step that fails because a store cannot be
// reached is retried in the background with backoff until it lands or the
// horizon passes. Steps that fail for another reason (a fencing refusal, a
// ledger collision) are logged and dropped: retrying cannot help. What the
// horizon or a crash leaves undone, the reconciler finishes (bills) or the
// record's lease ends (idempotency).
type Finisher struct {
	opts    FinisherOptions
	wg      sync.WaitGroup
	pending atomic.Int64
	active  atomic.Int64 // requests that may still hand steps over
	stop    chan struct{}
	once    sync.Once
}

// NewFinisher returns a Finisher.
func NewFinisher(opts FinisherOptions) *Finisher {
	if opts.Horizon <= 0 {
		opts.Horizon = DefaultFinishHorizon
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Finisher{opts: opts, stop: make(chan struct{})}
}

// retryable reports whether running the step again can help.
func retryable(err error) bool {
	return errors.Is(err, idempotency.ErrUnavailable) || errors.Is(err, billing.ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Do runs step, and retries it in the background while it fails with a
// store that cannot be reached. giveUp (may be nil) runs when it stops
// without success.
func (f *Finisher) Do(what string, step func(context.Context) error, giveUp func()) {
	f.do(nil, what, step, giveUp, false)
}

// do is Do for a step of a request served under g (nil: none); local says
// the step's store is in this process (storecall): its first attempt then
// has no deadline of its own. It reports whether the first attempt
// succeeded.
func (f *Finisher) do(g *Group, what string, step func(context.Context) error, giveUp func(), local bool) bool {
	ctx, cancel := storecall.Bound(context.Background(), stepTimeout, local)
	err := step(ctx)
	cancel()
	if err == nil {
		return true
	}
	if !retryable(err) {
		f.opts.Log.Warn("finishing step refused", "step", what, "error", err)
		if giveUp != nil {
			giveUp()
		}
		return false
	}
	f.opts.Log.Warn("finishing step failed; retrying in the background", "step", what, "error", err)
	f.pending.Add(1)
	g.add(1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer f.pending.Add(-1)
		defer g.add(-1)
		deadline := time.Now().Add(f.opts.Horizon)
		wait := f.opts.MinBackoff
		for attempt := 2; ; attempt++ {
			t := time.NewTimer(wait/2 + rand.N(wait/2+1))
			select {
			case <-t.C:
			case <-f.stop:
				t.Stop()
				f.abandon(what, giveUp, errors.New("the finisher stopped"))
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
			err := step(ctx)
			cancel()
			switch {
			case err == nil:
				f.opts.Log.Info("finishing step landed after retries", "step", what, "attempts", attempt)
				return
			case !retryable(err), time.Now().After(deadline):
				f.abandon(what, giveUp, err)
				return
			}
			wait = min(2*wait, f.opts.MaxBackoff)
		}
	}()
	return false
}

func (f *Finisher) abandon(what string, giveUp func(), err error) {
	f.opts.Log.Error("finishing step given up", "step", what, "error", err)
	if giveUp != nil {
		giveUp()
	}
}

// Pending is the number of steps being retried.
func (f *Finisher) Pending() int64 { return f.pending.Load() }

// Track marks a request whose finishing steps may follow, until the
// returned func is called: Wait waits for it too.
func (f *Finisher) Track() (done func()) {
	f.active.Add(1)
	return func() { f.active.Add(-1) }
}

// Wait waits until no request is being finished and no step is being
// retried, or ctx ends; unlike Drain it stops nothing. Under Lambda, where nothing runs between invocations, the
// function waits so after each answer (its bytes flushed), within the
// invocation's deadline.
func (f *Finisher) Wait(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for f.pending.Load() > 0 || f.active.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Drain waits until no step is being retried, or ctx ends (then the
// remaining steps stop: what they leave, the reconciler and the leases
// finish).
func (f *Finisher) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		f.once.Do(func() { close(f.stop) })
		<-done
		return ctx.Err()
	}
}

// A Group counts the finishing steps being retried for the requests served
// under one context: under Lambda, one invocation's. The invocation waits
// for its own steps (Group.Wait), never for those an earlier invocation
// left retrying in the same execution environment.
type Group struct {
	pending atomic.Int64
}

type groupKey struct{}

// WithGroup returns ctx carrying a new Group: the finishing steps of a
// request served under ctx (Service.Run) count in it.
func WithGroup(ctx context.Context) (context.Context, *Group) {
	g := &Group{}
	return context.WithValue(ctx, groupKey{}, g), g
}

// groupOf is ctx's Group, or nil.
func groupOf(ctx context.Context) *Group {
	g, _ := ctx.Value(groupKey{}).(*Group)
	return g
}

func (g *Group) add(n int64) {
	if g != nil {
		g.pending.Add(n)
	}
}

// Pending is the number of the group's steps being retried.
func (g *Group) Pending() int64 { return g.pending.Load() }

// Wait waits until none of the group's steps is being retried, or ctx
// ends.
func (g *Group) Wait(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for g.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
