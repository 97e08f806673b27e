package systemtest_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

// afterTests run once every test has: the integration tier's shared
// servers register their Close here.
var afterTests []func()

// closeUpstreamPool closes the idle connections of the gateways' shared
// upstream client: kept for the next call, they belong to the pool, not to
// a request, and their goroutines end with them.
func closeUpstreamPool() { upstream.HTTPClient(nil).CloseIdleConnections() }

// TestMain runs the tests, closes the shared servers and then fails the
// run if any goroutine outlives them: every gateway, upstream and client a
// test starts must be gone by then.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	if code == 0 {
		closeUpstreamPool()
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlive the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
