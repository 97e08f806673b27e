// Package dynamoledger keeps balances, key spend, the usage ledger, feedback
// and API keys in DynamoDB, in the gateway's one table (pk S HASH, sk S
// RANGE: ddbtable.EnsureTable), shared at once by every instance. It is a
// billing.Ledger, a billing.KeyStore and a billing.Sweeper.
//
// # Data model
//
//	pk req#<request id>     sk ledger        the ledger entry: project, key_id,
//	                                         model, provider, pt, ct, cost
//	                                         (nano-USD), at, state (pending |
//	                                         applied). Its conditional put is
//	                                         what makes a request id billed once.
//	pk ledger#<project>     sk <at>#<rid>    the same entry by project and time,
//	                                         for Totals (at: UTC, fixed width,
//	                                         so sk sorts by time)
//	pk acct#<project>       sk acct          the account: created, credit (N,
//	                                         NULL = unlimited, absent = not
//	                                         seeded), spent, epoch, per key
//	                                         ks#<key id> (spend) and kl#<key id>
//	                                         (limit, N or NULL), and the
//	                                         markers m#<hash of a request id>
//	pk fb#<request id>      sk user#<end user>   feedback: score, label,
//	                                         comment, created, updated
//	pk key#<key hash>       sk key           an API key: project, key_id,
//	                                         revoked, created
//	pk keyid#<key id>       sk keyid         the hash of a key id (Revoke)
//
// Amounts are integer nano-dollars; the remaining balance is credit - spent.
// Nothing here has a TTL: the ledger is kept.
//
// # Bill, exactly once, without transactions
//
// dynalite, which the tests run on, has no TransactWriteItems, so Bill uses
// single-item conditional writes only (there is no transactional path; the
// path tested is the only one):
//
//  1. PutItem of the entry (state pending) on attribute_not_exists(pk). When
//     it exists, its payload is compared: another payload is
//     billing.ErrLedgerCollision; an applied entry is done (return).
//  2. PutItem of the index item (unconditional: its content is a function
//     of the entry, which step 1 made unique).
//  3. If the cost is not zero, one UpdateItem of the account: ADD spent :c,
//     ks#<key> :c SET m#<h> = :rid, on the condition attribute_not_exists(
//     m#<h>) AND epoch = :e. The marker makes the increment happen once:
//     a retry (of the SDK, of Bill) finds the marker and moves on.
//  4. UpdateItem of the entry: state = applied.
//
// Markers must not stay forever (an item is at most 400 KB and DynamoDB
// charges writes by item size), and removing one reopens the door: a slow
// Bill of the same request that read the entry as pending before step 4
// would find no marker at step 3 and count the cost again (the lead's first
// design removed markers right after step 4 and fails the "20 goroutines
// bill the same entry" test that way). The epoch closes it: markers are
// removed only together with "ADD epoch 1" (see collection below), and only
// once their entries are applied; and a Bill uses, at step 3, an epoch it
// observed before it last saw its entry pending. Proof: say two step-3
// writes U1 then U2 count request r. Between them r's marker was removed
// by a write R, which came after r was marked applied, and raised the
// epoch. U2's biller saw r pending (before it was applied, so before R)
// after observing its epoch e, so e <= the epoch before R < the epoch at
// U2, and U2's condition fails. No clocks, no leases. A step 3 that fails
// reads the account (on DynamoDB the failed write returns it:
// ReturnValuesOnConditionCheckFailure=ALL_OLD; dynalite needs a GetItem):
// a marker means counted; otherwise the epoch moved, so the Bill reads its
// entry again (applied: done) and retries with the new epoch.
//
// Collection: when step 3 leaves GCThreshold markers or more on the
// account, that Bill reads their entries (BatchGetItem), marks applied the
// ones a crashed or slow Bill left pending (the marker proves they were
// counted), and removes the markers with one UpdateItem that also adds 1
// to the epoch, on the condition that the epoch did not move meanwhile. So
// the garbage is bounded: fewer than GCThreshold markers per account (plus
// the Bills in flight), whatever crashed. Bills in flight across a
// collection fail step 3 once and retry (two reads and a write more).
//
// Epochs observed (by Account, step 3, collection) are cached per project,
// so step 3 rarely fails for a stale one; a stale cached epoch is safe (it
// was observed before the entry was read), a cached epoch read after the
// entry would not be, and Bill takes it before step 1.
//
// # Calls and costs (items under 1 KB: one WCU per write)
//
//   - Bill, first time: PutItem, PutItem, UpdateItem, UpdateItem: 4 writes;
//     a zero-cost entry skips step 3: 3 writes. Every GCThreshold-th Bill of
//     an account (8 by default) also collects: one BatchGetItem of up to
//     GCThreshold consistent reads and one UpdateItem (amortized: about one
//     read and 1/8 write per Bill). A stale epoch costs a failed UpdateItem,
//     a GetItem of the entry (and on dynalite a GetItem of the account).
//   - Bill again of a billed entry: one failed PutItem (on dynalite also a
//     GetItem): nothing is written.
//   - Account: one consistent GetItem (projected).
//   - Totals: one consistent Query per 1 MB page of the range (an index item
//     is about 200 bytes: ~20 entries per read unit).
//   - Feedback: one UpdateItem. Feedbacks: one Query.
//   - SetBalance, SetKeyLimit, Seed: one UpdateItem each.
//   - Lookup: one consistent GetItem (billing.KeyCache in front saves most).
//   - Issue: GetItem (the project exists) + 2 PutItems. Revoke: GetItem +
//     UpdateItem. CreateProject: one UpdateItem. ImportKey: one GetItem
//     when the key is known, else + 2 PutItems.
//
// The account item is the one hot item of a project (every Bill writes it
// once): DynamoDB allows about 1,000 writes per second on one item, so one
// project bills at most about 1,000 requests per second.
//
// # Contention
//
// A collection fails the step 3 of every Bill of the project then between
// its epoch and its step 3 (about two round trips, W): at R Bills per
// second on a project, a step 3 is retried with probability about
// 1 - exp(-R*W/GCThreshold): some 12% at 100 Bills/s with W = 10 ms and the
// default 8, most of them at 1,000/s. A retry never counts twice; it costs
// a failed UpdateItem, a GetItem of the entry (and on dynalite one of the
// account) and the UpdateItem again. A larger GCThreshold means fewer
// collections and a larger account item (a marker is about 70 bytes, and
// DynamoDB charges a write per started KB of the item). Epochs per bucket
// of markers (a collection then fails only the Bills of its buckets) would
// lift this; they are not done.
//
// # Crashes
//
// A Bill that fails (or whose process dies) at any step leaves the entry
// pending, maybe with a marker; a Bill again with the same entry finishes
// it, counting the cost exactly once. Nothing bills an entry nobody bills
// again, except Sweep, which finishes the pending entries of a project over
// a time range (a cron job's work; an entry whose process died between
// steps 1 and 2 has no index item and is not seen by Sweep).
//
// Every failure other than a condition (network, throttling after the
// SDK's retries, a missing table, the caller's deadline) wraps
// billing.ErrUnavailable and the cause.
package dynamoledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

// DefaultGCThreshold is the default Options.GCThreshold.
const DefaultGCThreshold = 8

// maxApplyAttempts bounds the step-3 rounds of one Bill when the epoch keeps
// moving; the Bill then fails (and a Bill again finishes it).
const maxApplyAttempts = 50

// maxEpochs bounds the cached epochs; forgetting one costs one failed
// UpdateItem.
const maxEpochs = 1 << 16

// Options configures a Store.
type Options struct {
	// Pepper is the server secret of billing.HashKey, for Issue.
	Pepper []byte
	// GCThreshold is the number of markers on an account from which a Bill
	// collects them (DefaultGCThreshold when <= 0; 1 collects on every
	// Bill).
	GCThreshold int
	// Now is the clock (feedback and key times); default time.Now.
	Now func() time.Time
}

// Store is a billing.Ledger, billing.KeyStore and billing.Sweeper on a
// DynamoDB table. It is safe for concurrent use.
type Store struct {
	client *dynamodb.Client
	table  string
	opts   Options

	mu     sync.Mutex
	epochs map[string]int64 // project -> the highest epoch observed
}

var (
	_ billing.Ledger   = (*Store)(nil)
	_ billing.KeyStore = (*Store)(nil)
	_ billing.Sweeper  = (*Store)(nil)
)

// New returns a Store on table (which ddbtable.EnsureTable creates, or
// the SAM template).
func New(client *dynamodb.Client, table string, opts Options) *Store {
	if opts.GCThreshold <= 0 {
		opts.GCThreshold = DefaultGCThreshold
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{client: client, table: table, opts: opts, epochs: map[string]int64{}}
}

func (s *Store) epoch(project string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epochs[project]
}

// observe records an epoch read from the account item.
func (s *Store) observe(project string, item map[string]types.AttributeValue) int64 {
	e, _, _ := num(item, attrEpoch)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.epochs) >= maxEpochs {
		clear(s.epochs)
	}
	if e > s.epochs[project] {
		s.epochs[project] = e
	}
	return e
}

// epochCondition is the condition "the account's epoch is e" (an absent
// epoch is 0), with its names and values added.
func epochCondition(e int64, names map[string]string, values map[string]types.AttributeValue) string {
	names["#ep"] = attrEpoch
	if e == 0 {
		return "attribute_not_exists(#ep)"
	}
	values[":ep"] = attrN(e)
	return "#ep = :ep"
}

// Account implements billing.Ledger.
func (s *Store) Account(ctx context.Context, project, keyID string) (billing.Account, error) {
	if err := billing.ValidateID("project", project); err != nil {
		return billing.Account{}, err
	}
	out := billing.Account{Project: project, KeyID: keyID}
	names := map[string]string{"#cr": attrCredit, "#sp": attrSpent, "#ep": attrEpoch}
	proj := "#cr, #sp, #ep"
	if keyID != "" {
		names["#ks"], names["#kl"] = attrKeySpent+keyID, attrKeyLimit+keyID
		proj += ", #ks, #kl"
	}
	got, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      key(PKAccount+project, SKAccount),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String(proj),
		ExpressionAttributeNames: names,
	})
	if err != nil {
		return billing.Account{}, unavailable("GetItem", err)
	}
	item := got.Item
	s.observe(project, item)
	credit, err1 := optNum(item, attrCredit)
	spent, _, err2 := num(item, attrSpent)
	if err := errors.Join(err1, err2); err != nil {
		return billing.Account{}, fmt.Errorf("dynamoledger: account %s: %w", project, err)
	}
	out.SpentNanos = spent
	if credit != nil {
		out.BalanceNanos = ptr(*credit - spent)
	}
	if keyID != "" {
		ks, _, err1 := num(item, attrKeySpent+keyID)
		kl, err2 := optNum(item, attrKeyLimit+keyID)
		if err := errors.Join(err1, err2); err != nil {
			return billing.Account{}, fmt.Errorf("dynamoledger: account %s key %s: %w", project, keyID, err)
		}
		out.KeySpentNanos, out.KeyLimitNanos = ks, kl
	}
	return out, nil
}

// Bill implements billing.Ledger (see the package doc for the steps and
// why they count once).
func (s *Store) Bill(ctx context.Context, e billing.Entry) error {
	if err := billing.ValidateEntry(e); err != nil {
		return err
	}
	e = billing.NormalizeEntry(e)
	// The epoch must be observed before the entry is seen pending (the
	// fence): take it now, before step 1.
	epoch := s.epoch(e.Project)

	state, err := s.putEntry(ctx, e)
	if err != nil || state == stateApplied {
		return err
	}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: indexItem(e)}); err != nil {
		return unavailable("PutItem", err)
	}
	var view map[string]types.AttributeValue
	if e.CostNanos > 0 {
		var done bool
		view, done, err = s.apply(ctx, e, epoch)
		if err != nil || done {
			return err
		}
	}
	if err := s.markApplied(ctx, e.RequestID); err != nil {
		return err
	}
	if len(markers(view)) >= s.opts.GCThreshold {
		// Best effort: the Bill is complete; the markers wait for the next
		// collection when this one fails.
		_ = s.collect(ctx, e.Project, view)
	}
	return nil
}

// putEntry is step 1: it writes the entry, or finds it (the same payload,
// or ErrLedgerCollision), and returns its state.
func (s *Store) putEntry(ctx context.Context, e billing.Entry) (string, error) {
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                entryItem(e, statePending),
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": AttrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return statePending, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return "", unavailable("PutItem", err)
	}
	old := ccf.Item // DynamoDB sends it; dynalite does not
	if len(old) == 0 {
		if old, err = s.getEntry(ctx, e.RequestID); err != nil {
			return "", err
		}
		if old == nil {
			return "", fmt.Errorf("%w: dynamoledger: the entry of %s failed its put and is not there", billing.ErrUnavailable, e.RequestID)
		}
	}
	got, err := decodeEntry(old, e.RequestID)
	if err != nil {
		return "", err
	}
	if !billing.SamePayload(got, e) {
		return "", billing.ErrLedgerCollision
	}
	return str(old, attrState), nil
}

// getEntry reads an entry item (consistent); nil when there is none.
func (s *Store) getEntry(ctx context.Context, requestID string) (map[string]types.AttributeValue, error) {
	got, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(PKRequest+requestID, SKEntry),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, unavailable("GetItem", err)
	}
	if len(got.Item) == 0 {
		return nil, nil
	}
	return got.Item, nil
}

// apply is step 3. It returns the account as the successful write left it
// (or as a failed one found it, with the marker), or done when another Bill
// finished the entry meanwhile.
func (s *Store) apply(ctx context.Context, e billing.Entry, epoch int64) (map[string]types.AttributeValue, bool, error) {
	marker := markerName(e.RequestID)
	for attempt := 1; ; attempt++ {
		names := map[string]string{"#sp": attrSpent, "#ks": attrKeySpent + e.KeyID, "#m": marker}
		values := map[string]types.AttributeValue{":c": attrN(e.CostNanos), ":rid": attrS(e.RequestID)}
		cond := "attribute_not_exists(#m) AND " + epochCondition(epoch, names, values)
		out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(s.table),
			Key:                                 key(PKAccount+e.Project, SKAccount),
			UpdateExpression:                    aws.String("ADD #sp :c, #ks :c SET #m = :rid"),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            names,
			ExpressionAttributeValues:           values,
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			s.observe(e.Project, out.Attributes)
			return out.Attributes, false, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return nil, false, unavailable("UpdateItem", err)
		}
		view := ccf.Item
		if len(view) == 0 {
			got, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName:      aws.String(s.table),
				Key:            key(PKAccount+e.Project, SKAccount),
				ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				return nil, false, unavailable("GetItem", err)
			}
			view = got.Item
		}
		observed := s.observe(e.Project, view)
		if _, ok := view[marker]; ok {
			return view, false, nil // counted (by an earlier attempt or Bill)
		}
		// Not counted and the epoch moved: see the entry again, after
		// this observation of the epoch.
		item, err := s.getEntry(ctx, e.RequestID)
		if err != nil {
			return nil, false, err
		}
		if str(item, attrState) == stateApplied {
			return nil, true, nil
		}
		if attempt >= maxApplyAttempts {
			return nil, false, fmt.Errorf("%w: dynamoledger: the account of %s kept changing during Bill", billing.ErrUnavailable, e.Project)
		}
		epoch = observed
		if attempt > 1 {
			// Other Bills collect as fast as this one retries: back off.
			d := time.Duration(rand.Int64N(int64(min(attempt, 10)) * int64(2*time.Millisecond)))
			select {
			case <-ctx.Done():
				return nil, false, unavailable("UpdateItem", ctx.Err())
			case <-time.After(d):
			}
		}
	}
}

// markApplied is step 4.
func (s *Store) markApplied(ctx context.Context, requestID string) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(PKRequest+requestID, SKEntry),
		UpdateExpression:          aws.String("SET #st = :applied"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#st": attrState, "#pk": AttrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":applied": attrS(stateApplied)},
	})
	if err != nil {
		return unavailable("UpdateItem", err)
	}
	return nil
}

// collect removes the markers of view (an account item) whose entries are
// applied, marking applied those still pending (their marker proves they
// were counted), with one UpdateItem that also raises the epoch, on the
// condition that the epoch is still view's.
func (s *Store) collect(ctx context.Context, project string, view map[string]types.AttributeValue) error {
	ms := markers(view)
	if len(ms) == 0 {
		return nil
	}
	epoch, _, err := num(view, attrEpoch)
	if err != nil {
		return err
	}
	rids := make([]string, 0, len(ms))
	for _, rid := range ms {
		rids = append(rids, rid)
	}
	items, err := s.getEntries(ctx, rids)
	if err != nil {
		return err
	}
	names := map[string]string{}
	values := map[string]types.AttributeValue{":one": attrN(1)}
	var remove []string
	for name, rid := range ms {
		item, ok := items[rid]
		if !ok {
			continue // cannot happen (the entry is written first): keep the marker
		}
		if str(item, attrState) != stateApplied {
			if err := s.markApplied(ctx, rid); err != nil {
				return err
			}
		}
		ph := fmt.Sprintf("#m%d", len(remove))
		names[ph] = name
		remove = append(remove, ph)
	}
	if len(remove) == 0 {
		return nil
	}
	cond := epochCondition(epoch, names, values)
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(PKAccount+project, SKAccount),
		UpdateExpression:          aws.String("REMOVE " + strings.Join(remove, ", ") + " ADD #ep :one"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return nil // another collection went first
	case err != nil:
		return unavailable("UpdateItem", err)
	}
	s.observe(project, out.Attributes)
	return nil
}

// getEntries reads entry items by request id (consistent BatchGetItem).
func (s *Store) getEntries(ctx context.Context, rids []string) (map[string]map[string]types.AttributeValue, error) {
	out := map[string]map[string]types.AttributeValue{}
	for chunk := range slices.Chunk(rids, maxBatchGet) {
		keys := make([]map[string]types.AttributeValue, 0, len(chunk))
		for _, rid := range chunk {
			keys = append(keys, key(PKRequest+rid, SKEntry))
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for delay := 10 * time.Millisecond; len(req) > 0; delay = min(2*delay, time.Second) {
			got, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, unavailable("BatchGetItem", err)
			}
			for _, item := range got.Responses[s.table] {
				out[strings.TrimPrefix(str(item, AttrPK), PKRequest)] = item
			}
			req = got.UnprocessedKeys
			if len(req) > 0 {
				select {
				case <-ctx.Done():
					return nil, unavailable("BatchGetItem", ctx.Err())
				case <-time.After(delay):
				}
			}
		}
	}
	return out, nil
}

// Entry implements billing.Ledger.
func (s *Store) Entry(ctx context.Context, requestID string) (billing.Entry, error) {
	if err := billing.ValidateID("request id", requestID); err != nil {
		return billing.Entry{}, err
	}
	item, err := s.getEntry(ctx, requestID)
	if err != nil {
		return billing.Entry{}, err
	}
	if item == nil {
		return billing.Entry{}, billing.ErrNotFound
	}
	return decodeEntry(item, requestID)
}

// Totals implements billing.Ledger.
func (s *Store) Totals(ctx context.Context, project string, from, to time.Time) (billing.Totals, error) {
	if err := billing.ValidateID("project", project); err != nil {
		return billing.Totals{}, err
	}
	t := billing.NewTotals()
	if !from.Before(to) {
		return t, nil
	}
	// sk = <at>#<rid>: "<from>" <= sk for every at >= from, and sk <
	// "<to>" for every at < to ("<to>#..." sorts after "<to>").
	err := s.queryIndex(ctx, project, from, to, func(e billing.Entry) {
		if !e.At.Before(from) && e.At.Before(to) {
			t.Add(e)
		}
	})
	return t, err
}

func (s *Store) queryIndex(ctx context.Context, project string, from, to time.Time, f func(billing.Entry)) error {
	from, to = clampTime(from), clampTime(to)
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :from AND :to"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#sk": AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":   attrS(PKLedger + project),
			":from": attrS(formatTime(from)),
			":to":   attrS(formatTime(to)),
		},
		ConsistentRead: aws.Bool(true),
	}
	for {
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return unavailable("Query", err)
		}
		for _, item := range out.Items {
			e, err := decodeEntry(item, "")
			if err != nil {
				return err
			}
			f(e)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

func clampTime(t time.Time) time.Time {
	switch {
	case t.Before(minTime):
		return minTime
	case t.After(maxTime):
		return maxTime
	}
	return t
}

// Sweep implements billing.Sweeper: it finishes the pending entries of the
// project with At in [from, to) (Bill again), then collects the account's
// markers.
func (s *Store) Sweep(ctx context.Context, project string, from, to time.Time) (int, error) {
	if err := billing.ValidateID("project", project); err != nil {
		return 0, err
	}
	var entries []billing.Entry
	err := s.queryIndex(ctx, project, from, to, func(e billing.Entry) {
		if !e.At.Before(from) && e.At.Before(to) {
			entries = append(entries, e)
		}
	})
	if err != nil {
		return 0, err
	}
	rids := make([]string, len(entries))
	for i, e := range entries {
		rids[i] = e.RequestID
	}
	items, err := s.getEntries(ctx, rids)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if item, ok := items[e.RequestID]; ok && str(item, attrState) == statePending {
			if err := s.Bill(ctx, e); err != nil {
				return n, err
			}
			n++
		}
	}
	got, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(PKAccount+project, SKAccount),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return n, unavailable("GetItem", err)
	}
	return n, s.collect(ctx, project, got.Item)
}

// Feedback implements billing.Ledger: one UpdateItem on (request id, end
// user), which keeps the first created time.
func (s *Store) Feedback(ctx context.Context, f billing.Feedback) error {
	if err := billing.ValidateFeedback(f); err != nil {
		return err
	}
	now := f.UpdatedAt
	if now.IsZero() {
		now = s.opts.Now()
	}
	names := map[string]string{"#rid": attrRequestID, "#eu": attrEndUser, "#up": attrUpdated, "#cr": attrCreated}
	values := map[string]types.AttributeValue{
		":rid": attrS(f.RequestID), ":eu": attrS(f.EndUser), ":now": attrS(formatTime(now)),
	}
	set := []string{"#rid = :rid", "#eu = :eu", "#up = :now", "#cr = if_not_exists(#cr, :now)"}
	var remove []string
	opt := func(ph, attr string, v types.AttributeValue) {
		names[ph] = attr
		if v == nil {
			remove = append(remove, ph)
			return
		}
		values[":"+ph[1:]] = v
		set = append(set, ph+" = :"+ph[1:])
	}
	var score, label, comment types.AttributeValue
	if f.Score != nil {
		score = &types.AttributeValueMemberN{Value: formatFloat(*f.Score)}
	}
	if f.Label != "" {
		label = attrS(f.Label)
	}
	if f.Comment != "" {
		comment = attrS(f.Comment)
	}
	opt("#score", attrScore, score)
	opt("#label", attrLabel, label)
	opt("#comment", attrComment, comment)
	expr := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(PKFeedback+f.RequestID, SKUserPrefix+f.EndUser),
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return unavailable("UpdateItem", err)
	}
	return nil
}

// Feedbacks implements billing.Ledger.
func (s *Store) Feedbacks(ctx context.Context, requestID string) ([]billing.Feedback, error) {
	if err := billing.ValidateID("request id", requestID); err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": attrS(PKFeedback + requestID)},
		ConsistentRead:            aws.Bool(true),
	}
	var out []billing.Feedback
	for {
		page, err := s.client.Query(ctx, in)
		if err != nil {
			return nil, unavailable("Query", err)
		}
		for _, item := range page.Items {
			f, err := decodeFeedback(item)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	slices.SortFunc(out, func(a, b billing.Feedback) int { return strings.Compare(a.EndUser, b.EndUser) })
	return out, nil
}

func decodeFeedback(item map[string]types.AttributeValue) (billing.Feedback, error) {
	f := billing.Feedback{
		RequestID: str(item, attrRequestID),
		EndUser:   str(item, attrEndUser),
		Label:     str(item, attrLabel),
		Comment:   str(item, attrComment),
	}
	var errs []error
	if v, ok := item[attrScore].(*types.AttributeValueMemberN); ok {
		score, err := parseFloat(v.Value)
		errs = append(errs, err)
		f.Score = &score
	}
	var err error
	f.CreatedAt, err = parseTime(str(item, attrCreated))
	errs = append(errs, err)
	f.UpdatedAt, err = parseTime(str(item, attrUpdated))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return billing.Feedback{}, fmt.Errorf("dynamoledger: decode feedback: %w", err)
	}
	return f, nil
}

// SetBalance implements billing.Ledger: credit = spent + remaining, in one
// UpdateItem, so a concurrent Bill is never lost.
func (s *Store) SetBalance(ctx context.Context, project string, remaining *int64) error {
	if err := billing.ValidateID("project", project); err != nil {
		return err
	}
	names := map[string]string{"#cr": attrCredit}
	values := map[string]types.AttributeValue{}
	expr := "SET #cr = :null"
	if remaining == nil {
		values[":null"] = attrNull
	} else {
		names["#sp"] = attrSpent
		values[":zero"], values[":r"] = attrN(0), attrN(*remaining)
		expr = "SET #cr = if_not_exists(#sp, :zero) + :r"
	}
	return s.update(ctx, PKAccount+project, SKAccount, expr, names, values)
}

// SetKeyLimit implements billing.Ledger.
func (s *Store) SetKeyLimit(ctx context.Context, project, keyID string, limit *int64) error {
	if err := billing.ValidateID("project", project); err != nil {
		return err
	}
	if err := billing.ValidateID("key id", keyID); err != nil {
		return err
	}
	return s.update(ctx, PKAccount+project, SKAccount, "SET #kl = :l",
		map[string]string{"#kl": attrKeyLimit + keyID},
		map[string]types.AttributeValue{":l": attrOptN(limit)})
}

// Seed implements billing.Ledger: one UpdateItem of if_not_exists.
func (s *Store) Seed(ctx context.Context, project string, balance *int64, keyLimits map[string]*int64) error {
	if err := billing.ValidateID("project", project); err != nil {
		return err
	}
	names := map[string]string{"#created": attrCreated, "#cr": attrCredit, "#project": attrProject}
	values := map[string]types.AttributeValue{
		":now": attrS(formatTime(s.opts.Now())), ":b": attrOptN(balance), ":project": attrS(project),
	}
	set := []string{"#created = if_not_exists(#created, :now)", "#cr = if_not_exists(#cr, :b)", "#project = :project"}
	ids := make([]string, 0, len(keyLimits))
	for id := range keyLimits {
		if err := billing.ValidateID("key id", id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, id := range ids {
		ph, v := fmt.Sprintf("#kl%d", i), fmt.Sprintf(":kl%d", i)
		names[ph], values[v] = attrKeyLimit+id, attrOptN(keyLimits[id])
		set = append(set, fmt.Sprintf("%s = if_not_exists(%s, %s)", ph, ph, v))
	}
	return s.update(ctx, PKAccount+project, SKAccount, "SET "+strings.Join(set, ", "), names, values)
}

func (s *Store) update(ctx context.Context, pk, sk, expr string, names map[string]string, values map[string]types.AttributeValue) error {
	in := &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      key(pk, sk),
		UpdateExpression:         aws.String(expr),
		ExpressionAttributeNames: names,
	}
	if len(values) > 0 {
		in.ExpressionAttributeValues = values
	}
	if _, err := s.client.UpdateItem(ctx, in); err != nil {
		return unavailable("UpdateItem", err)
	}
	return nil
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%w: dynamodb %s: %w", billing.ErrUnavailable, op, err)
}

func ptr[T any](v T) *T { return &v }
