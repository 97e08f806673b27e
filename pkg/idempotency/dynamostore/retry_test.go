//go:build integration

package dynamostore_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/storetest"
)

// loseAnswer sends a request of the operation to the server, then answers
// 500 InternalServerError instead of the server's answer, once: the write
// happened, its answer was lost, and the SDK retries it.
type loseAnswer struct {
	op   string
	lost atomic.Int32
}

func (l *loseAnswer) Do(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil || !strings.HasSuffix(req.Header.Get("X-Amz-Target"), "."+l.op) || !l.lost.CompareAndSwap(0, 1) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return &http.Response{
		StatusCode: http.StatusInternalServerError,
		Status:     "500 Internal Server Error",
		Header:     http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:       io.NopCloser(strings.NewReader(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"answer lost"}`)),
		Request:    req,
	}, nil
}

// A reserving put whose answer is lost is retried by the SDK and then fails
// its condition on the record it created: Reserve still reports it created.
func TestReserveRetriedPut(t *testing.T) {
	lose := &loseAnswer{op: "PutItem"}
	var counter dynalite.Counter
	client := dynalite.Client(t, server.Endpoint(t), dynalite.CountCalls(&counter),
		func(o *dynamodb.Options) { o.HTTPClient = lose })
	s := dynamostore.New(client, sharedTable(t))
	base := storetest.Base()
	rec := storetest.NewRecord(storetest.Key(), base)
	storetest.MustReserve(t, s, rec, base)
	if lose.lost.Load() != 1 {
		t.Fatalf("the put's answer was not lost")
	}
	t.Logf("Reserve with a lost answer (2 attempts of one put): %s", format(counter.Snapshot()))
	storetest.ExpectRecord(t, s, rec.Key, base, rec)

	// The owner's writes go on.
	if err := s.Append(t.Context(), rec.Key, rec.Owner, 0, storetest.StreamHead(), storetest.TextEvents("a", 1)); err != nil {
		t.Fatalf("Append: %v", err)
	}
}
