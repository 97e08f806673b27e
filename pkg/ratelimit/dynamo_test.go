//go:build integration

package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/dynalite"
)

var server dynalite.Shared

func TestMain(m *testing.M) { dynalite.Main(m, &server) }

func TestDynamo(t *testing.T) {
	runLimiter(t, func(t *testing.T) Limiter {
		client := dynalite.Client(t, server.Endpoint(t))
		return NewDynamo(client, server.SharedTable(t))
	})
}

// Two instances (two clients) taking at once from one counter never count
// past its limit: exactly rpm requests pass in a window.
func TestDynamoAcrossInstances(t *testing.T) {
	table := server.SharedTable(t)
	a := NewDynamo(dynalite.Client(t, server.Endpoint(t)), table)
	b := NewDynamo(dynalite.Client(t, server.Endpoint(t)), table)
	now := time.Now()
	c := []Counter{{Scope: "p", ID: "proj-across-" + now.Format("150405.000000"), Limit: Limit{RPM: 25}}}
	var passed, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		l := Limiter(a)
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			_, _, err := l.Take(context.Background(), now, c, 0)
			switch {
			case err == nil:
				passed.Add(1)
			case errors.Is(err, ErrLimited):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if passed.Load() != 25 || refused.Load() != 35 {
		t.Errorf("%d passed, %d refused; want 25 and 35", passed.Load(), refused.Load())
	}
}
