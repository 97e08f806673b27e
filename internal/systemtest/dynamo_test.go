package systemtest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// dynaliteServer is the dynalite server the package's tests share, started
// by the first test that needs it.
var dynaliteServer dynalite.Shared

func TestMain(m *testing.M) { dynalite.Main(m, &dynaliteServer) }

// dynamoStore is a DynamoDB store on a fresh dynalite table. Two gateway
// instances given the same store value share one table, as two Lambda
// instances would.
func dynamoStore(t testing.TB, optFns ...func(*dynamodb.Options)) idempotency.Store {
	t.Helper()
	return dynamoStoreAt(t, dynaliteServer.Endpoint(t), optFns...)
}

func dynamoStoreAt(t testing.TB, endpoint string, optFns ...func(*dynamodb.Options)) idempotency.Store {
	t.Helper()
	client := dynalite.NewClient(endpoint, optFns...)
	return dynamostore.New(client, dynalite.Table(t, client, "gw"))
}

type storeKind struct {
	name string
	new  func(t testing.TB) idempotency.Store
}

var storeKinds = []storeKind{
	{"memory", func(testing.TB) idempotency.Store { return memstore.New(1 << 30) }},
	{"dynamodb", func(t testing.TB) idempotency.Store { return dynamoStore(t) }},
}

// TestIdempotencyRaceStores: 100 goroutines, one key, over one or two
// gateway instances on one store, memory and DynamoDB (dynalite).
func TestIdempotencyRaceStores(t *testing.T) {
	for _, sk := range storeKinds {
		for _, stream := range []bool{false, true} {
			for _, instances := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/stream=%v/instances=%d", sk.name, stream, instances), func(t *testing.T) {
					raceOneKey(t, sk.new(t), instances, stream)
				})
			}
		}
	}
}

// TestIdempotencyAcrossInstances: a replay, a waiter and a stream joiner on
// another instance than the one that ran the request, through DynamoDB.
func TestIdempotencyAcrossInstances(t *testing.T) {
	store := dynamoStore(t)
	g := newGateway(t, setup{store: store})
	other := g.instance(t, store)

	t.Run("replay", func(t *testing.T) {
		first := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
		again := mustCall(t, other, chatBody(""), "Idempotency-Key", key(t))
		sameAnswer(t, first, again)
		conflict := mustCall(t, other, chatBody(`"temperature":1`), "Idempotency-Key", key(t))
		if conflict.status != 409 || conflict.code != "idempotency_conflict" {
			t.Errorf("conflict on the other instance: %d %q", conflict.status, conflict.code)
		}
	})
	t.Run("waiter", func(t *testing.T) {
		before := g.ups[0].Calls()
		g.ups[0].Script(providertest.Response{FirstChunkDelay: 400 * time.Millisecond})
		firstc := make(chan answer, 1)
		go func() { firstc <- call(context.Background(), g.url, chatBody(`"n":1`), "Idempotency-Key", key(t)) }()
		waitCalls(t, g.ups[0], before+1)
		again := mustCall(t, other, chatBody(`"n":1`), "Idempotency-Key", key(t))
		sameAnswer(t, <-firstc, again)
		if got := g.ups[0].Calls() - before; got != 1 {
			t.Errorf("%d upstream calls, want 1", got)
		}
	})
	t.Run("stream joiner", func(t *testing.T) {
		before := g.ups[0].Calls()
		g.ups[0].Script(providertest.Response{Text: []string{"a", "b", "c", "d", "e", "f", "g", "h"}, ChunkDelay: 100 * time.Millisecond})
		body := chatBody(`"stream":true`)
		firstc := make(chan answer, 1)
		go func() { firstc <- call(context.Background(), g.url, body, "Idempotency-Key", key(t)) }()
		waitCalls(t, g.ups[0], before+1)
		time.Sleep(350 * time.Millisecond) // some events are appended to the table
		joined := mustCall(t, other, body, "Idempotency-Key", key(t))
		first := <-firstc
		sameAnswer(t, first, joined)
		if !strings.HasSuffix(first.body, "data: [DONE]\n\n") {
			t.Errorf("first stream %q", first.body)
		}
		if got := g.ups[0].Calls() - before; got != 1 {
			t.Errorf("%d upstream calls, want 1", got)
		}
	})
}

// silentOwner drops its heartbeats and its completion: an instance that
// froze or died in the middle of a request.
type silentOwner struct {
	idempotency.Store
	mu   sync.Mutex
	dead bool
}

func (s *silentOwner) kill() { s.mu.Lock(); s.dead = true; s.mu.Unlock() }

func (s *silentOwner) alive() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.dead }

func (s *silentOwner) Heartbeat(ctx context.Context, key, owner string, until time.Time) error {
	if !s.alive() {
		return fmt.Errorf("%w: instance is dead", idempotency.ErrUnavailable)
	}
	return s.Store.Heartbeat(ctx, key, owner, until)
}

func (s *silentOwner) Complete(ctx context.Context, key, owner string, a *idempotency.Answer) error {
	if !s.alive() {
		return fmt.Errorf("%w: instance is dead", idempotency.ErrUnavailable)
	}
	return s.Store.Complete(ctx, key, owner, a)
}

// TestIdempotencyOwnerDies: the instance running a keyed request dies
// (stops heartbeating and never completes); once its lease lapses, retries
// on the other instance answer 409 idempotency_replay_unavailable, and the
// upstream is never called again.
func TestIdempotencyOwnerDies(t *testing.T) {
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			store := sk.new(t)
			dying := &silentOwner{Store: store}
			g := newGateway(t, setup{store: dying, extraYAML: "idempotency: {lease: 300ms}\n"})
			survivor := g.instance(t, store)
			g.ups[0].SetDefault(providertest.Response{FirstChunkDelay: 1500 * time.Millisecond})
			firstc := make(chan answer, 1)
			go func() { firstc <- call(context.Background(), g.url, chatBody(""), "Idempotency-Key", key(t)) }()
			waitCalls(t, g.ups[0], 1)
			dying.kill()
			time.Sleep(700 * time.Millisecond) // the lease lapses
			for i := 0; i < 3; i++ {
				a := mustCall(t, survivor, chatBody(""), "Idempotency-Key", key(t))
				if a.status != 409 || a.code != "idempotency_replay_unavailable" {
					t.Errorf("retry %d after the owner died: %d %q", i, a.status, a.code)
				}
			}
			<-firstc
			if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
				t.Errorf("upstream calls (-want +got): the request ran again\n%s", diff)
			}
		})
	}
}
