//go:build integration

package dynamostore_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/storetest"
)

// beforeNextPage runs hook once, right before the first Query request that
// continues a paginated Query (one with an ExclusiveStartKey) is sent.
type beforeNextPage struct {
	hook  func()
	fired atomic.Bool
}

func (b *beforeNextPage) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".Query") && req.Body != nil {
		raw, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
		if bytes.Contains(raw, []byte("ExclusiveStartKey")) && b.fired.CompareAndSwap(false, true) {
			b.hook()
		}
	}
	return http.DefaultClient.Do(req)
}

// TestLoadAcrossPagesSeesNewParts: Load's Query is no snapshot across its
// 1 MB pages. The items of a key sort idem#E#... < idem#P#<owner>#... <
// idem#R, and the parts of an earlier reservation of the key (its window
// ended; DynamoDB's TTL deletion lags) stay under the same pk. A Load whose
// first page ends inside an earlier owner's parts has passed the place where
// the current owner's parts sort; when the current owner completes (parts
// first, then the record) before the next page is read, the record names
// parts the Load never saw. Load now reads a paginated record again when
// it does not assemble; before, the completed answer read as corrupt ("part
// 0 of 2 is missing"), and a retry's Begin answered 503.
func TestLoadAcrossPagesSeesNewParts(t *testing.T) {
	ctx := t.Context()
	table := sharedTable(t)
	healthy := dynamostore.New(dynalite.Client(t, server.Endpoint(t)), table)
	base := storetest.Base()
	key := storetest.Key()

	// Window 1: an owner whose token sorts last completes with an answer
	// in several parts.
	old := storetest.NewRecord(key, base)
	old.Owner = "zzzz-old-owner"
	storetest.MustReserve(t, healthy, old, base)
	if err := healthy.Complete(ctx, key, old.Owner, storetest.JSONAnswer(storetest.RandomBytes(2<<20, 1))); err != nil {
		t.Fatal(err)
	}

	// Window 2: the key is new again; an owner whose token sorts first
	// reserves it and runs.
	now := old.ExpiresAt.Add(time.Second)
	cur := storetest.NewRecord(key, now)
	cur.Owner = "aaaa-new-owner"
	storetest.MustReserve(t, healthy, cur, now)
	ans := storetest.JSONAnswer(storetest.RandomBytes(600_000, 2)) // 2 parts
	var completeErr error
	pager := &beforeNextPage{hook: func() { completeErr = healthy.Complete(ctx, key, cur.Owner, ans) }}
	reader := dynamostore.New(dynalite.Client(t, server.Endpoint(t), func(o *dynamodb.Options) { o.HTTPClient = pager }), table)

	got, err := reader.Load(ctx, key, now)
	if !pager.fired.Load() {
		t.Fatalf("the Query was not paginated")
	}
	if completeErr != nil {
		t.Fatal(completeErr)
	}
	// The table holds the whole answer: a Load that does not race reads it.
	again, aerr := healthy.Load(ctx, key, now)
	if aerr != nil || again.State != "completed" || storetest.DiffAnswer(ans, again.Answer) != "" {
		t.Fatalf("a later Load: %v", aerr)
	}
	if err != nil {
		t.Fatalf("Load while the owner completed between two pages: %v; the answer is whole in the table", err)
	}
	if d := storetest.DiffAnswer(ans, got.Answer); got.State != "completed" || d != "" {
		t.Fatalf("Load: state %s, answer diff %s", got.State, d)
	}
}
