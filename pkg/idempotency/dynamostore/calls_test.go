//go:build integration

package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/proc"
	"github.com/buzzgate/buzzgate/pkg/ddbtable"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/storetest"
)

type calls = map[string]int

// TestCallCounts measures the DynamoDB calls of each operation, on dynalite
// (no ALL_OLD) and through the ALL_OLD proxy (as on DynamoDB).
func TestCallCounts(t *testing.T) {
	var counter dynalite.Counter
	table := sharedTable(t)
	direct := dynamostore.New(dynalite.Client(t, server.Endpoint(t), dynalite.CountCalls(&counter)), table)
	proxy := dynalite.AllOldProxy(t, server.Endpoint(t))
	allOld := dynamostore.New(dynalite.Client(t, proxy.Endpoint, dynalite.CountCalls(&counter)), table)
	ctx := t.Context()
	base := storetest.Base()

	var report []string
	measure := func(name string, want calls, f func() error) {
		t.Helper()
		counter.Reset()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := counter.Snapshot()
		report = append(report, fmt.Sprintf("%-58s %s", name, format(got)))
		if want != nil && !maps.Equal(got, want) {
			t.Errorf("%s: calls %s, want %s", name, format(got), format(want))
		}
	}
	reserve := func(s idempotency.Store, rec *idempotency.Record, wantExisting bool) func() error {
		return func() error {
			got, err := s.Reserve(ctx, storetest.Clone(rec), base)
			switch {
			case err != nil:
				return err
			case wantExisting && got == nil:
				return errors.New("created a record over a live one")
			case !wantExisting && got != nil:
				return errors.New("found a record, want it created")
			}
			return nil
		}
	}
	load := func(s idempotency.Store, key string, want idempotency.State) func() error {
		return func() error {
			got, err := s.Load(ctx, key, base)
			if err == nil && got.State != want {
				err = fmt.Errorf("state %s, want %s", got.State, want)
			}
			return err
		}
	}

	// A new non-stream request: reserve, complete.
	rec := storetest.NewRecord(storetest.Key(), base)
	measure("new request: Reserve", calls{"PutItem": 1}, reserve(direct, rec, false))
	measure("Heartbeat", calls{"UpdateItem": 1}, func() error {
		return direct.Heartbeat(ctx, rec.Key, rec.Owner, base.Add(time.Minute))
	})
	ans := storetest.JSONAnswer([]byte(`{"id":"chatcmpl-1","choices":[{"message":{"content":"hello"}}]}`))
	measure("Complete (small answer, inline)", calls{"UpdateItem": 1}, func() error {
		return direct.Complete(ctx, rec.Key, rec.Owner, ans)
	})
	measure("Load (completed)", calls{"Query": 1}, load(direct, rec.Key, idempotency.StateCompleted))

	// Retries of it: a replay, a conflict (another fingerprint: the same
	// Reserve, the service compares), through each path.
	measure("replay, dynalite (no ALL_OLD): Reserve", calls{"PutItem": 1, "Query": 1}, reserve(direct, storetest.NewRecord(rec.Key, base), true))
	injected := proxy.Injected()
	measure("replay, ALL_OLD: Reserve", calls{"PutItem": 1}, reserve(allOld, storetest.NewRecord(rec.Key, base), true))
	if proxy.Injected() != injected+1 {
		t.Errorf("the proxy did not add the old item to the failed put")
	}

	// A tombstone.
	tomb := storetest.NewRecord(storetest.Key(), base)
	measure("new request: Reserve", calls{"PutItem": 1}, reserve(direct, tomb, false))
	measure("Tombstone", calls{"UpdateItem": 1}, func() error { return direct.Tombstone(ctx, tomb.Key, tomb.Owner) })
	measure("retry of a tombstone, ALL_OLD: Reserve", calls{"PutItem": 1}, reserve(allOld, storetest.NewRecord(tomb.Key, base), true))
	measure("retry of a tombstone, dynalite: Reserve", calls{"PutItem": 1, "Query": 1}, reserve(direct, storetest.NewRecord(tomb.Key, base), true))

	// A stream: reserve, append, complete; a retry while it runs joins it.
	str := storetest.NewRecord(storetest.Key(), base)
	measure("new stream: Reserve", calls{"PutItem": 1}, reserve(direct, str, false))
	evs := storetest.TextEvents("tok", 30)
	for seq := range 3 {
		var head *idempotency.Head
		if seq == 0 {
			head = storetest.StreamHead()
		}
		measure(fmt.Sprintf("Append %d (by the reserving Store)", seq), calls{"PutItem": 1}, func() error {
			return direct.Append(ctx, str.Key, str.Owner, seq, head, evs[seq*10:(seq+1)*10])
		})
	}
	measure("Append 2 again (a retry: known applied)", calls{}, func() error {
		return direct.Append(ctx, str.Key, str.Owner, 2, nil, evs[20:30])
	})
	measure("retry in flight, ALL_OLD: Reserve (in progress: + Load)", calls{"PutItem": 1, "Query": 1}, reserve(allOld, storetest.NewRecord(str.Key, base), true))
	measure("Load (in progress, 3 batches)", calls{"Query": 1}, load(direct, str.Key, idempotency.StateInProgress))
	other := dynamostore.New(dynalite.Client(t, server.Endpoint(t), dynalite.CountCalls(&counter)), table)
	measure("Append 3 by a Store that did not reserve (reads first)", calls{"Query": 1, "PutItem": 1}, func() error {
		return other.Append(ctx, str.Key, str.Owner, 3, nil, storetest.TextEvents("more", 2))
	})
	measure("Append 4 by that Store", calls{"PutItem": 1}, func() error {
		return other.Append(ctx, str.Key, str.Owner, 4, nil, storetest.TextEvents("more", 2))
	})
	measure("Complete (stream answer, inline)", calls{"UpdateItem": 1}, func() error {
		return direct.Complete(ctx, str.Key, str.Owner, storetest.StreamAnswer(evs))
	})
	measure("replay of a stream, ALL_OLD: Reserve", calls{"PutItem": 1}, reserve(allOld, storetest.NewRecord(str.Key, base), true))

	// Refused before it ran: released.
	rel := storetest.NewRecord(storetest.Key(), base)
	measure("new request: Reserve", calls{"PutItem": 1}, reserve(direct, rel, false))
	measure("Release", calls{"DeleteItem": 1}, func() error { return direct.Release(ctx, rel.Key, rel.Owner) })

	// An answer in parts: 1 MiB that does not compress.
	big := storetest.NewRecord(storetest.Key(), base)
	measure("new request: Reserve", calls{"PutItem": 1}, reserve(direct, big, false))
	measure("Complete (1 MiB random body: 3 parts)", calls{"PutItem": 3, "UpdateItem": 1}, func() error {
		return direct.Complete(ctx, big.Key, big.Owner, storetest.JSONAnswer(storetest.RandomBytes(1<<20, 1)))
	})
	measure("Load (1 MiB in 3 parts)", nil, load(direct, big.Key, idempotency.StateCompleted))
	measure("replay of 1 MiB, ALL_OLD: Reserve (parts: + Load)", nil, reserve(allOld, storetest.NewRecord(big.Key, base), true))

	t.Logf("DynamoDB calls per operation:\n%s", strings.Join(report, "\n"))
}

func format(c calls) string {
	if len(c) == 0 {
		return "none"
	}
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s=%d", op, c[op]))
	}
	return strings.Join(parts, " ")
}

// TestLargeAnswerSplit stores a 1 MiB body that does not compress: more
// than a DynamoDB item holds (dynalite enforces the 400 KB limit too), so it
// goes into parts of at most MaxInline bytes, all with the record's ttl.
func TestLargeAnswerSplit(t *testing.T) {
	client := dynalite.Client(t, server.Endpoint(t))
	table := sharedTable(t)
	ctx := t.Context()
	body := storetest.RandomBytes(1<<20, 7)

	// One item cannot hold it.
	_, err := client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			dynamostore.AttrPK: &types.AttributeValueMemberS{Value: storetest.Key()},
			dynamostore.AttrSK: &types.AttributeValueMemberS{Value: "idem#test"},
			"d":                &types.AttributeValueMemberB{Value: body},
		},
	})
	if err == nil || !strings.Contains(err.Error(), "size") {
		t.Fatalf("PutItem of a 1 MiB item: %v, want the item size limit", err)
	}

	s := dynamostore.New(client, table)
	base := storetest.Base()
	rec := storetest.NewRecord(storetest.Key(), base)
	storetest.MustReserve(t, s, rec, base)
	head := storetest.StreamHead()
	if err := s.Append(ctx, rec.Key, rec.Owner, 0, head, storetest.StreamEvents(2000, 300, 8)); err != nil {
		t.Fatalf("Append of 600 KB: %v", err)
	}
	ans := storetest.JSONAnswer(body)
	if err := s.Complete(ctx, rec.Key, rec.Owner, ans); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	got := storetest.MustLoad(t, s, rec.Key, base)
	if d := storetest.DiffAnswer(ans, got.Answer); d != "" {
		t.Fatalf("the answer differs after the round trip:\n%s", d)
	}

	items := rawItems(t, client, table, rec.Key)
	ttl := strconv.FormatInt(rec.ExpiresAt.Unix()+3600, 10)
	var record map[string]types.AttributeValue
	var parts, chunks, batches int
	for _, it := range items {
		sk := it[dynamostore.AttrSK].(*types.AttributeValueMemberS).Value
		if n := it[dynamostore.AttrTTL].(*types.AttributeValueMemberN).Value; n != ttl {
			t.Errorf("item %s: ttl %s, want %s (expires_at + 1h)", sk, n, ttl)
		}
		if d, ok := it[dynamostore.AttrData].(*types.AttributeValueMemberB); ok && len(d.Value) > dynamostore.MaxInline {
			t.Errorf("item %s holds %d bytes, more than %d", sk, len(d.Value), dynamostore.MaxInline)
		}
		switch {
		case sk == dynamostore.SKRecord:
			record = it
		case strings.HasPrefix(sk, dynamostore.SKPartPrefix+rec.Owner+"#"):
			parts++
		case strings.HasPrefix(sk, dynamostore.SKEventPrefix+rec.Owner+"#000000#"):
			chunks++
		case sk == dynamostore.SKEventPrefix+rec.Owner+"#000000":
			batches++
		default:
			t.Errorf("unexpected item %s", sk)
		}
	}
	if record == nil {
		t.Fatalf("no record item")
	}
	if _, ok := record[dynamostore.AttrAnswer]; ok {
		t.Errorf("the record holds the answer inline")
	}
	if n := record[dynamostore.AttrParts].(*types.AttributeValueMemberN).Value; n != "3" || parts != 3 {
		t.Errorf("record says %s parts, %d part items; want 3 and 3", n, parts)
	}
	if batches != 1 || chunks != 2 {
		t.Errorf("the 600 KB batch is %d items and %d chunks, want 1 and 2", batches, chunks)
	}
	t.Logf("1 MiB body: the record and %d parts; the 600 KB Append: 1 item and %d chunks", parts, chunks)
}

func rawItems(t *testing.T, client *dynamodb.Client, table, key string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(client, &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: key}},
	})
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		items = append(items, out.Items...)
	}
	return items
}

// TestUnavailable points a store at a closed port: every operation fails
// fast with an error that is ErrUnavailable and carries its cause.
func TestUnavailable(t *testing.T) {
	addr, err := proc.FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + addr

	base := storetest.Base()
	rec := storetest.NewRecord(storetest.Key(), base)
	ops := []struct {
		name string
		do   func(ctx context.Context, s idempotency.Store) error
	}{
		{"Reserve", func(ctx context.Context, s idempotency.Store) error {
			_, err := s.Reserve(ctx, storetest.Clone(rec), base)
			return err
		}},
		{"Load", func(ctx context.Context, s idempotency.Store) error {
			_, err := s.Load(ctx, rec.Key, base)
			return err
		}},
		{"Poll", func(ctx context.Context, s idempotency.Store) error {
			_, _, err := s.Poll(ctx, rec.Key, rec.Owner, 1, base)
			return err
		}},
		{"Heartbeat", func(ctx context.Context, s idempotency.Store) error {
			return s.Heartbeat(ctx, rec.Key, rec.Owner, base.Add(time.Minute))
		}},
		{"MarkStarted", func(ctx context.Context, s idempotency.Store) error {
			return s.MarkStarted(ctx, rec.Key, rec.Owner)
		}},
		{"Append", func(ctx context.Context, s idempotency.Store) error {
			return s.Append(ctx, rec.Key, rec.Owner, 0, storetest.StreamHead(), storetest.TextEvents("x", 1))
		}},
		{"Complete", func(ctx context.Context, s idempotency.Store) error {
			return s.Complete(ctx, rec.Key, rec.Owner, storetest.JSONAnswer([]byte(`{}`)))
		}},
		{"Complete in parts", func(ctx context.Context, s idempotency.Store) error {
			return s.Complete(ctx, rec.Key, rec.Owner, storetest.JSONAnswer(storetest.RandomBytes(1<<20, 3)))
		}},
		{"Tombstone", func(ctx context.Context, s idempotency.Store) error {
			return s.Tombstone(ctx, rec.Key, rec.Owner)
		}},
		{"Release", func(ctx context.Context, s idempotency.Store) error {
			return s.Release(ctx, rec.Key, rec.Owner)
		}},
	}

	t.Run("no_retries", func(t *testing.T) {
		s := dynamostore.New(dynalite.Client(t, dead, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }), "idem")
		for _, op := range ops {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			err := op.do(ctx, s)
			expired := ctx.Err() != nil
			cancel()
			if !errors.Is(err, idempotency.ErrUnavailable) {
				t.Fatalf("%s: %v, want ErrUnavailable", op.name, err)
			}
			var netErr *net.OpError
			if !errors.As(err, &netErr) {
				t.Errorf("%s: %v does not carry the connection error", op.name, err)
			}
			// The refused connection ends the call, not the deadline: without
			// retries nothing waits.
			if expired {
				t.Errorf("%s ran until its deadline", op.name)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := ddbtable.EnsureTable(ctx, dynalite.Client(t, dead, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }), "idem"); err == nil {
			t.Fatalf("EnsureTable on a dead endpoint succeeded")
		}
	})

	// With the SDK's default retryer (3 attempts, backoff), the caller's
	// deadline bounds the wait.
	t.Run("default_retryer_deadline", func(t *testing.T) {
		s := dynamostore.New(dynalite.Client(t, dead), "idem")
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := s.Load(ctx, rec.Key, base)
		d := time.Since(start)
		if !errors.Is(err, idempotency.ErrUnavailable) {
			t.Fatalf("Load: %v, want ErrUnavailable", err)
		}
		if d > 5*time.Second {
			t.Fatalf("Load took %s with a 500ms deadline", d)
		}
		t.Logf("default retryer, 500ms deadline: %s: %v", d.Round(time.Millisecond), err)
	})
}

// TestEnsureTableConcurrent: two instances starting at once both come up
// with the table; a third finds it.
func TestEnsureTableConcurrent(t *testing.T) {
	var counter dynalite.Counter
	client := dynalite.Client(t, server.Endpoint(t), dynalite.CountCalls(&counter))
	table := dynalite.TableName("ensure")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = ddbtable.EnsureTable(ctx, client, table) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("EnsureTable %d: %v", i, err)
		}
	}
	t.Logf("two concurrent EnsureTable on a missing table: %s", format(counter.Snapshot()))

	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Table.TableStatus != types.TableStatusActive {
		t.Fatalf("status %s", out.Table.TableStatus)
	}
	var schema []string
	for _, k := range out.Table.KeySchema {
		schema = append(schema, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	if want := []string{"pk HASH", "sk RANGE"}; !slices.Equal(schema, want) {
		t.Fatalf("key schema %v, want %v", schema, want)
	}
	if bm := out.Table.BillingModeSummary; bm == nil || bm.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode summary %+v, want PAY_PER_REQUEST", bm)
	}

	counter.Reset()
	if err := ddbtable.EnsureTable(ctx, client, table); err != nil {
		t.Fatalf("EnsureTable on an existing table: %v", err)
	}
	if got := counter.Snapshot(); !maps.Equal(got, calls{"DescribeTable": 1}) {
		t.Errorf("EnsureTable on an existing table: %s, want DescribeTable=1", format(got))
	}

	// What dynalite does with TTL (EnsureTable ignores the error).
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(dynamostore.AttrTTL), Enabled: aws.Bool(true),
		},
	})
	t.Logf("dynalite UpdateTimeToLive: %v", err)
}
