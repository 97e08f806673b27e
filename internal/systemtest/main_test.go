package systemtest_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// afterTests run once every test has: the integration tier's shared
// servers register their Close here.
var afterTests []func()

// ignoreNotOurs passes over a fasthttp HostClient's pool janitor,
// connsCleaner, which is not ours to stop: the library starts one per
// upstream host and it ends by itself once the host's connections have
// been idle for MaxIdleConnDuration, seconds after the test that made them.
var ignoreNotOurs = goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner")

// TestMain runs the tests, closes the shared servers and then fails the
// run if any goroutine outlives them: every gateway, upstream and client a
// test starts must be gone by then.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	if code == 0 {
		if err := goleak.Find(ignoreNotOurs); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlive the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
