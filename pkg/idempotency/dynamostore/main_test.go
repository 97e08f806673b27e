//go:build integration

package dynamostore_test

import (
	"testing"

	"github.com/buzzgate/buzzgate/internal/dynalite"
)

// server is the dynalite server all the tests of the package share, started
// by the first test that needs it.
var server dynalite.Shared

func TestMain(m *testing.M) { dynalite.Main(m, &server) }

func sharedTable(t *testing.T) string { return server.SharedTable(t) }
