package openairesponses_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
)

// TestMain fails the package's tests if a goroutine outlives them, once
// the shared client's idle connections are closed.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		upstream.HTTPClient(nil).CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
