package upstream

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them. A
// fasthttp HostClient's pool janitor, connsCleaner, is not ours to stop:
// the library starts one per host and it ends by itself once the host's
// connections have been idle for MaxIdleConnDuration, seconds after the
// test that made them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"))
}
