package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
)

func fastFinisher(horizon time.Duration) *Finisher {
	return NewFinisher(FinisherOptions{Horizon: horizon, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
}

// A step that fails while the store cannot be reached is retried until it
// lands; the first attempt runs at once, in the caller's goroutine.
func TestFinisherRetriesUntilItLands(t *testing.T) {
	f := fastFinisher(time.Minute)
	var calls atomic.Int64
	var gaveUp, started atomic.Bool
	release := make(chan struct{})
	f.Do("step", func(context.Context) error {
		// Retries wait until the test has looked at the count Do left, so
		// a retry that comes within the backoff's millisecond on a loaded
		// machine cannot be taken for a second attempt inside Do.
		if !started.CompareAndSwap(false, true) {
			<-release
		}
		if calls.Add(1) < 5 {
			return fmt.Errorf("%w: down", billing.ErrUnavailable)
		}
		return nil
	}, func() { gaveUp.Store(true) })
	if calls.Load() != 1 {
		t.Fatalf("%d calls before Do returned, want the first attempt only", calls.Load())
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 5 || gaveUp.Load() || f.Pending() != 0 {
		t.Errorf("calls %d, gave up %v, pending %d; want 5, false, 0", calls.Load(), gaveUp.Load(), f.Pending())
	}
}

// A step refused for another reason (a fencing refusal) is not retried; one
// that keeps failing past the horizon is given up. Either way giveUp runs.
func TestFinisherGivesUp(t *testing.T) {
	for name, c := range map[string]struct {
		err       error
		wantCalls func(int64) bool
	}{
		"not retryable": {idempotency.ErrNotOwner, func(n int64) bool { return n == 1 }},
		"past horizon":  {fmt.Errorf("%w: down", idempotency.ErrUnavailable), func(n int64) bool { return n > 1 }},
	} {
		t.Run(name, func(t *testing.T) {
			f := fastFinisher(30 * time.Millisecond)
			var calls atomic.Int64
			gaveUp := make(chan struct{})
			f.Do("step", func(context.Context) error { calls.Add(1); return c.err }, func() { close(gaveUp) })
			select {
			case <-gaveUp:
			case <-time.After(10 * time.Second):
				t.Fatal("giveUp never ran")
			}
			if !c.wantCalls(calls.Load()) {
				t.Errorf("%d calls", calls.Load())
			}
		})
	}
}

// Drain waits for the retries; past its context it stops them (giveUp
// runs) and returns the context's error. Wait counts tracked requests too.
func TestFinisherDrainAndTrack(t *testing.T) {
	f := fastFinisher(time.Hour)
	gaveUp := make(chan struct{})
	f.Do("step", func(context.Context) error { return fmt.Errorf("%w: down", billing.ErrUnavailable) }, func() { close(gaveUp) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain: %v, want its deadline", err)
	}
	<-gaveUp
	done := f.Track()
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer wcancel()
	if err := f.Wait(wctx); err == nil {
		t.Error("Wait returned while a tracked request was running")
	}
	done()
	if err := f.Wait(context.Background()); err != nil {
		t.Error(err)
	}
}

// A Group waits for its own steps only: a step of another group, or of
// none, still being retried does not hold it.
func TestGroupWaitsForItsOwnSteps(t *testing.T) {
	f := fastFinisher(time.Minute)
	var land atomic.Bool
	down := func(context.Context) error {
		if land.Load() {
			return nil
		}
		return fmt.Errorf("%w: down", billing.ErrUnavailable)
	}
	_, first := WithGroup(context.Background())
	_, second := WithGroup(context.Background())
	f.do(first, "first's step", down, nil, true)
	f.do(nil, "a step of no group", down, nil, true)
	if first.Pending() != 1 || second.Pending() != 0 || f.Pending() != 2 {
		t.Fatalf("pending: first %d, second %d, finisher %d; want 1, 0, 2", first.Pending(), second.Pending(), f.Pending())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := second.Wait(ctx); err != nil {
		t.Fatalf("the second group waited for the others' steps: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := first.Wait(short); err == nil {
		t.Fatal("the first group did not wait for its step")
	}
	land.Store(true)
	if err := first.Wait(ctx); err != nil || first.Pending() != 0 {
		t.Fatalf("the first group's step landed: wait %v, pending %d", err, first.Pending())
	}
	if err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// The group follows the request's context, a keyed request's detached one
// included: Service.Run counts the request's steps in it.
func TestGroupOfRequestContext(t *testing.T) {
	ctx, g := WithGroup(context.Background())
	if groupOf(ctx) != g || groupOf(context.WithoutCancel(ctx)) != g || groupOf(context.Background()) != nil {
		t.Fatal("the group does not follow the context")
	}
}
