//go:build integration

package dynamoledger_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
)

// server is the dynalite server all the tests of the package share, started
// by the first test that needs it.
var server dynalite.Shared

func TestMain(m *testing.M) { dynalite.Main(m, &server) }

var pepper = []byte("test pepper")

func sharedTable(t *testing.T) string { return server.SharedTable(t) }

// newStore returns a Store on the shared table through a new client.
func newStore(t *testing.T, opts dynamoledger.Options, optFns ...func(*dynamodb.Options)) *dynamoledger.Store {
	t.Helper()
	table := sharedTable(t)
	if opts.Pepper == nil {
		opts.Pepper = pepper
	}
	if opts.Shards == 0 {
		// One spend counter, so that the tests that count markers see
		// them all on one item (TestLedger runs the default).
		opts.Shards = 1
	}
	return dynamoledger.New(dynalite.Client(t, server.Endpoint(t), optFns...), table, opts)
}
