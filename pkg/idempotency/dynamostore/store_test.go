//go:build integration

package dynamostore_test

import (
	"context"
	"time"

	"testing"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/storetest"
)

// The contract suite, on one table, a fresh Store per subtest. dynalite
// ignores ReturnValuesOnConditionCheckFailure, so every Reserve that finds
// a live record takes the fallback read (Load).
func TestContract(t *testing.T) {
	t.Parallel()
	client := dynalite.Client(t, server.Endpoint(t))
	table := sharedTable(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store { return dynamostore.New(client, table) })
}

// The contract suite through a proxy that adds the old item to a failed
// reserving put, as DynamoDB does: Reserve answers completed records and
// tombstones from it.
func TestContractAllOld(t *testing.T) {
	t.Parallel()
	proxy := dynalite.AllOldProxy(t, server.Endpoint(t))
	client := dynalite.Client(t, proxy.Endpoint)
	table := sharedTable(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store { return dynamostore.New(client, table) })
	if proxy.Injected() == 0 {
		t.Fatalf("the proxy never added an old item: the ALL_OLD path did not run")
	}
	t.Logf("the proxy added the old item to %d failed puts", proxy.Injected())
}

// The contract suite with a new Store for every call, as if each call came
// from another instance: nothing is remembered between calls (Append reads
// the record to check its owner and find the next seq).
func TestContractStoreEveryCall(t *testing.T) {
	t.Parallel()
	client := dynalite.Client(t, server.Endpoint(t))
	table := sharedTable(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		return newEveryCall(func() idempotency.Store { return dynamostore.New(client, table) })
	})
}

// everyCall makes a new store for every call.
type everyCall struct{ fresh func() idempotency.Store }

func newEveryCall(fresh func() idempotency.Store) idempotency.Store { return everyCall{fresh} }

func (e everyCall) Reserve(ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	return e.fresh().Reserve(ctx, rec, now)
}

func (e everyCall) Load(ctx context.Context, key string, now time.Time) (*idempotency.Record, error) {
	return e.fresh().Load(ctx, key, now)
}

func (e everyCall) Heartbeat(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	return e.fresh().Heartbeat(ctx, key, owner, leaseUntil)
}

func (e everyCall) Append(ctx context.Context, key, owner string, seq int, head *idempotency.Head, events []idempotency.Event) error {
	return e.fresh().Append(ctx, key, owner, seq, head, events)
}

func (e everyCall) Complete(ctx context.Context, key, owner string, ans *idempotency.Answer) error {
	return e.fresh().Complete(ctx, key, owner, ans)
}

func (e everyCall) Tombstone(ctx context.Context, key, owner string) error {
	return e.fresh().Tombstone(ctx, key, owner)
}

func (e everyCall) Release(ctx context.Context, key, owner string) error {
	return e.fresh().Release(ctx, key, owner)
}

func (e everyCall) Poll(ctx context.Context, key, owner string, from int, now time.Time) (*idempotency.Record, int, error) {
	return e.fresh().Poll(ctx, key, owner, from, now)
}

func (e everyCall) MarkStarted(ctx context.Context, key, owner string) error {
	return e.fresh().MarkStarted(ctx, key, owner)
}
