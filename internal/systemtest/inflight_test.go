package systemtest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// inFlightTogether sends n Chat Completions requests to g at once, holds
// each at the first upstream until all n have arrived (so all of them
// passed the gateway's checks while nothing was spent), then lets them
// answer, and fails unless every one got a 200.
func inFlightTogether(t *testing.T, g *gateway, n int) {
	t.Helper()
	arrived := make(chan struct{}, n)
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	g.ups[0].SetHandler(func(int, providertest.Request) providertest.Response {
		arrived <- struct{}{}
		<-gate
		return providertest.Response{}
	})
	answers := make(chan answer, n)
	for i := range n {
		go func() { answers <- call(context.Background(), g.url, chatBody(fmt.Sprintf(`"n":%d`, i))) }()
	}
	for range n {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d requests reached the provider", g.ups[0].Calls(), n)
		}
	}
	release()
	for range n {
		if a := <-answers; a.err != nil || a.status != 200 {
			t.Fatalf("a request in flight: %v %d %s", a.err, a.status, a.body)
		}
	}
}
