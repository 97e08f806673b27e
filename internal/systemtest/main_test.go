package systemtest_test

import (
	"os"
	"testing"
)

// afterTests run once every test has: the integration tier's shared
// servers register their Close here.
var afterTests []func()

func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}
