package dynamoledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore/dynalite"
)

// server is the dynalite server all the tests of the package share, started
// by the first test that needs it.
var server dynalite.Shared

func TestMain(m *testing.M) { dynalite.Main(m, &server) }

var pepper = []byte("test pepper")

// shared is one table for every test (they use fresh ids).
var shared struct {
	once  sync.Once
	table string
	err   error
}

func sharedTable(t *testing.T) string {
	t.Helper()
	endpoint := server.Endpoint(t)
	shared.once.Do(func() {
		shared.table = dynalite.TableName("billing")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shared.err = dynamostore.EnsureTable(ctx, dynalite.NewClient(endpoint), shared.table)
	})
	if shared.err != nil {
		t.Fatalf("EnsureTable: %v", shared.err)
	}
	return shared.table
}

// newStore returns a Store on the shared table through a new client.
func newStore(t *testing.T, opts dynamoledger.Options, optFns ...func(*dynamodb.Options)) *dynamoledger.Store {
	t.Helper()
	table := sharedTable(t)
	if opts.Pepper == nil {
		opts.Pepper = pepper
	}
	return dynamoledger.New(dynalite.Client(t, server.Endpoint(t), optFns...), table, opts)
}
