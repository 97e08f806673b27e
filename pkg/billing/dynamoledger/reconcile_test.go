//go:build integration

package dynamoledger_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/billingtest"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
)

// ownTable returns a Store on a table of its own (Reconcile reads every
// project's holds), with opts and the SDK options.
func ownTable(t *testing.T, opts dynamoledger.Options, optFns ...func(*dynamodb.Options)) (*dynamoledger.Store, *dynamodb.Client, string) {
	t.Helper()
	client := dynalite.Client(t, server.Endpoint(t))
	table := dynalite.Table(t, client, "rec")
	opts.Pepper = pepper
	return dynamoledger.New(dynalite.Client(t, server.Endpoint(t), optFns...), table, opts), client, table
}

// priced holds and prices n entries of project, due at due plus i
// seconds for the i-th.
func priced(t *testing.T, s *dynamoledger.Store, project string, n int, due time.Time) []billing.Entry {
	t.Helper()
	var es []billing.Entry
	for i := range n {
		e := billingtest.NewEntry(project, billingtest.ID("k"), int64(1000+i))
		if err := s.Hold(t.Context(), billingtest.HoldOf(e, due.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
		if err := s.Price(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

func requestIDs(es []billing.Entry) []string {
	var ids []string
	for _, e := range es {
		ids = append(ids, e.RequestID)
	}
	slices.Sort(ids)
	return ids
}

// TestReconcileSkipsWhatItCannotSettle: an entry Reconcile cannot read
// (due first) is skipped and reported with its reason; the run settles
// every other one and says so, and the next run reports it again.
func TestReconcileSkipsWhatItCannotSettle(t *testing.T) {
	s, client, table := ownTable(t, dynamoledger.Options{Shards: 1})
	project := billingtest.ID("p")
	due := time.Now().Add(-time.Hour)
	es := priced(t, s, project, 4, due)
	bad, good := es[0], es[1:]
	// The first entry's cost is no number any more.
	if _, err := client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dynamoledger.PKRequest + bad.RequestID}, "sk": &types.AttributeValueMemberS{Value: dynamoledger.SKEntry}},
		UpdateExpression:          aws.String("SET #c = :x"),
		ExpressionAttributeNames:  map[string]string{"#c": "cost"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":x": &types.AttributeValueMemberS{Value: "garbled"}},
	}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reconcile(t.Context(), time.Now(), true)
	if err != nil {
		t.Fatalf("Reconcile stopped at the entry it cannot read: %v", err)
	}
	if got := requestIDs(r.Settled); !slices.Equal(got, requestIDs(good)) {
		t.Errorf("settled %v, want %v", got, requestIDs(good))
	}
	if len(r.Skipped) != 1 || r.Skipped[0].RequestID != bad.RequestID || r.Skipped[0].Project != project || r.Skipped[0].Reason == "" {
		t.Errorf("skipped %+v, want %s of %s with a reason", r.Skipped, bad.RequestID, project)
	}
	var sum int64
	for _, e := range good {
		sum += e.CostNanos
	}
	if a, err := s.Account(t.Context(), project, ""); err != nil || a.SpentNanos != sum {
		t.Errorf("project spend %+v, %v; want %d", a, err, sum)
	}
	again, err := s.Reconcile(t.Context(), time.Now(), true)
	if err != nil || len(again.Settled) != 0 || len(again.Skipped) != 1 {
		t.Errorf("the next run: %+v, %v; want the bad entry skipped again, nothing settled", again, err)
	}
}

// TestReconcileSettlesAsItPages: a backlog is settled a page at a time, so
// that when the store goes away half way the pages read before are
// settled already.
func TestReconcileSettlesAsItPages(t *testing.T) {
	fail := &failQueries{}
	fail.after.Store(2)
	s, _, _ := ownTable(t, dynamoledger.Options{Shards: 1, HoldShards: 1, ReconcilePage: 2}, noRetry, withHTTP(fail))
	project := billingtest.ID("p")
	es := priced(t, s, project, 5, time.Now().Add(-time.Hour))
	r, err := s.Reconcile(t.Context(), time.Now(), true)
	if err == nil {
		t.Fatal("Reconcile did not see its third Query fail")
	}
	// Pages of two: the first two pages (four entries, in deadline order)
	// are settled before the third Query.
	if got, want := requestIDs(r.Settled), requestIDs(es[:4]); !slices.Equal(got, want) {
		t.Errorf("settled before the store went away: %v, want %v", got, want)
	}
	fail.after.Store(1 << 30)
	r, err = s.Reconcile(t.Context(), time.Now(), true)
	if err != nil || !slices.Equal(requestIDs(r.Settled), requestIDs(es[4:])) {
		t.Errorf("the next run: %+v, %v; want the last entry settled", r, err)
	}
}

// failQueries fails every Query after the first after ones.
type failQueries struct {
	after, n atomic.Int32
}

func (f *failQueries) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".Query") && f.n.Add(1) > f.after.Load() {
		return nil, context.DeadlineExceeded
	}
	return http.DefaultClient.Do(req)
}

// TestPastPeriodsLeaveTheCounters: a counter keeps the spend of the
// current day, week and month only: the first bill of a new period
// removes the attributes of the ones before, so that an item does not
// grow by three attributes a day.
func TestPastPeriodsLeaveTheCounters(t *testing.T) {
	s, client, table := ownTable(t, dynamoledger.Options{Shards: 1})
	project, keyID := billingtest.ID("p"), billingtest.ID("k")
	now := time.Now().UTC()
	old := billingtest.NewEntry(project, keyID, 5)
	old.At = now.AddDate(0, -2, 0)
	billingtest.MustBill(t, s, old)
	periods := func() []string {
		out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dynamoledger.PKKeyAccount + keyID}, "sk": &types.AttributeValueMemberS{Value: project}}})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for name := range out.Item {
			if strings.HasPrefix(name, "per#") {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	if got := periods(); len(got) != 3 {
		t.Fatalf("after a bill two months ago: %v, want its day, week and month", got)
	}
	cur := billingtest.NewEntry(project, keyID, 7)
	cur.At = now
	billingtest.MustBill(t, s, cur)
	want := []string{"per#" + billing.Day.Label(now), "per#" + billing.Month.Label(now), "per#" + billing.Week.Label(now)}
	slices.Sort(want)
	if got := periods(); !slices.Equal(got, want) {
		t.Errorf("after a bill now: %v, want %v", got, want)
	}
	if a := billingtest.MustAccount(t, s, project, keyID); a.KeyPeriodSpent != [billing.NumPeriods]int64{7, 7, 7} || a.KeySpentNanos != 12 {
		t.Errorf("account %+v", a)
	}
}
