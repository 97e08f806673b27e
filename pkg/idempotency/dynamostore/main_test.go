package dynamostore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore/dynalite"
)

// server is the dynalite server all the tests of the package share, started
// by the first test that needs it.
var server dynalite.Shared

func TestMain(m *testing.M) { dynalite.Main(m, &server) }

// shared is one table for the tests that use random keys.
var shared struct {
	once  sync.Once
	table string
	err   error
}

func sharedTable(t *testing.T) string {
	t.Helper()
	endpoint := server.Endpoint(t)
	shared.once.Do(func() {
		shared.table = dynalite.TableName("idem")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shared.err = dynamostore.EnsureTable(ctx, dynalite.NewClient(endpoint), shared.table)
	})
	if shared.err != nil {
		t.Fatalf("EnsureTable: %v", shared.err)
	}
	return shared.table
}
