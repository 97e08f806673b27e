package storecall

import (
	"context"
	"testing"
	"time"
)

type store struct{ local bool }

func (s store) InProcess() bool { return s.local }

func TestInProcess(t *testing.T) {
	for _, c := range []struct {
		store any
		want  bool
	}{{store{true}, true}, {store{false}, false}, {struct{}{}, false}, {nil, false}} {
		if got := InProcess(c.store); got != c.want {
			t.Errorf("InProcess(%#v) = %v, want %v", c.store, got, c.want)
		}
	}
}

// A remote store's call has its own deadline; a local one's has the
// caller's context as it is. A detached call outlives its caller's
// cancellation either way.
func TestBoundAndDetached(t *testing.T) {
	caller, cancel := context.WithCancel(context.Background())
	cancel()
	for _, local := range []bool{false, true} {
		ctx, done := Bound(caller, time.Minute, local)
		_, bounded := ctx.Deadline()
		if bounded == local || ctx.Err() == nil {
			t.Errorf("Bound local %v: a deadline %v, error %v; want a deadline only when remote, and the caller's end seen", local, bounded, ctx.Err())
		}
		done()
		ctx, done = Detached(caller, time.Minute, local)
		_, bounded = ctx.Deadline()
		if bounded == local || ctx.Err() != nil {
			t.Errorf("Detached local %v: a deadline %v, error %v; want a deadline only when remote, and no end", local, bounded, ctx.Err())
		}
		done()
	}
}
