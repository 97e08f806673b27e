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

// Defaults of Options.
const (
	DefaultGCThreshold = 8
	DefaultShards      = 16
	DefaultHoldShards  = 16
	DefaultStrayAfter  = time.Hour
	// DefaultReconcilePage is BatchGetItem's most keys.
	DefaultReconcilePage = 100
	// MaxShards bounds Options.Shards (Account reads them all in one
	// BatchGetItem of at most 100 keys).
	MaxShards = 64
)

// maxApplyAttempts bounds the step-3 rounds of one Bill when the epoch keeps
// moving; the Bill then fails (and a Bill again, or Reconcile, finishes it).
const maxApplyAttempts = 50

// maxEpochs bounds the cached epochs; forgetting one costs one failed
// UpdateItem.
const maxEpochs = 1 << 16

// Options configures a Store.
type Options struct {
	// Pepper is the server secret of billing.HashKey, for Issue.
	Pepper []byte
	// GCThreshold is the number of markers on a counter item from which a
	// Bill collects them (DefaultGCThreshold when <= 0; 1 collects on
	// every Bill).
	GCThreshold int
	// Shards is the number of spend counter items of a project
	// (DefaultShards when <= 0, at most MaxShards). Every instance and
	// every deployment on a table must use the same number: a request's
	// shard is a function of its id and of Shards.
	Shards int
	// HoldShards is the number of partitions of due pointers that
	// Reconcile queries (DefaultHoldShards when <= 0). The same on every
	// instance; it may grow, never shrink.
	HoldShards int
	// ReconcilePage is the most due pointers Reconcile reads in one Query
	// page and settles before it reads the next (DefaultReconcilePage when
	// <= 0): one BatchGetItem of their entries.
	ReconcilePage int
	// StrayAfter is how long past its deadline a due pointer whose entry
	// was never written is kept (a writer slower than that would leave an
	// entry nobody finds); DefaultStrayAfter when <= 0.
	StrayAfter time.Duration
	// Now is the clock (feedback and key times, the deadline of a Price
	// or Bill without a hold); default time.Now.
	Now func() time.Time
}

// Store is a billing.Ledger, billing.KeyStore and billing.Reconciler on a
// DynamoDB table. It is safe for concurrent use.
type Store struct {
	client *dynamodb.Client
	table  string
	opts   Options

	mu     sync.Mutex
	epochs map[string]int64 // counter item pk -> the highest epoch observed
}

var (
	_ billing.Ledger     = (*Store)(nil)
	_ billing.KeyStore   = (*Store)(nil)
	_ billing.Reconciler = (*Store)(nil)
)

// New returns a Store on table (which ddbtable.EnsureTable creates, or
// the SAM template).
func New(client *dynamodb.Client, table string, opts Options) *Store {
	if opts.GCThreshold <= 0 {
		opts.GCThreshold = DefaultGCThreshold
	}
	if opts.Shards <= 0 {
		opts.Shards = DefaultShards
	}
	opts.Shards = min(opts.Shards, MaxShards)
	if opts.HoldShards <= 0 {
		opts.HoldShards = DefaultHoldShards
	}
	if opts.ReconcilePage <= 0 {
		opts.ReconcilePage = DefaultReconcilePage
	}
	if opts.StrayAfter <= 0 {
		opts.StrayAfter = DefaultStrayAfter
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{client: client, table: table, opts: opts, epochs: map[string]int64{}}
}

// counter is an item that counts spend exactly once: spent, epoch and the
// markers of the requests it counted.
type counter struct{ pk, sk string }

func shardCounter(project string, i int) counter {
	return counter{fmt.Sprintf("%s%02d#%s", PKSpend, i, project), SKSpend}
}

func keyCounter(project, keyID string) counter { return counter{PKKeyAccount + keyID, project} }

// counters are the items a bill of e counts on: its project shard and its
// key.
func (s *Store) counters(e billing.Entry) [2]counter {
	return [2]counter{shardCounter(e.Project, shardOf(e.RequestID, s.opts.Shards)), keyCounter(e.Project, e.KeyID)}
}

// holdPK is the due pointer partition of a request.
func (s *Store) holdPK(requestID string) string {
	return fmt.Sprintf("%s%02d", PKHold, shardOf(requestID, s.opts.HoldShards))
}

func holdSK(deadline time.Time, requestID string) string {
	return formatTime(clampTime(deadline)) + "#" + requestID
}

func (s *Store) epoch(c counter) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epochs[c.pk+"\x00"+c.sk]
}

// observe records an epoch read from a counter item.
func (s *Store) observe(c counter, item map[string]types.AttributeValue) int64 {
	e, _, _ := num(item, attrEpoch)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.epochs) >= maxEpochs {
		clear(s.epochs)
	}
	k := c.pk + "\x00" + c.sk
	if e > s.epochs[k] {
		s.epochs[k] = e
	}
	return e
}

// epochCondition is the condition "the item's epoch is e" (an absent
// epoch is 0), with its names and values added.
func epochCondition(e int64, names map[string]string, values map[string]types.AttributeValue) string {
	names["#ep"] = attrEpoch
	if e == 0 {
		return "attribute_not_exists(#ep)"
	}
	values[":ep"] = attrN(e)
	return "#ep = :ep"
}

// Account implements billing.Ledger: one consistent BatchGetItem of the
// account item, the project's spend shards and the key's item.
func (s *Store) Account(ctx context.Context, project, keyID string) (billing.Account, error) {
	if err := billing.ValidateID("project", project); err != nil {
		return billing.Account{}, err
	}
	out := billing.Account{Project: project, KeyID: keyID}
	keys := []map[string]types.AttributeValue{key(PKAccount+project, SKAccount)}
	shards := make([]counter, s.opts.Shards)
	for i := range shards {
		shards[i] = shardCounter(project, i)
		keys = append(keys, key(shards[i].pk, shards[i].sk))
	}
	kc := keyCounter(project, keyID)
	if keyID != "" {
		keys = append(keys, key(kc.pk, kc.sk))
	}
	now := periodAttrs(s.opts.Now())
	items, err := s.batchGet(ctx, keys, "#pk, #sk, #cr, #sp, #ep, #lim, #p0, #p1, #p2, #rpm, #tpm, #bn, #bp",
		map[string]string{"#pk": AttrPK, "#sk": AttrSK, "#cr": attrCredit, "#sp": attrSpent, "#ep": attrEpoch, "#lim": attrLimit,
			"#p0": now[0], "#p1": now[1], "#p2": now[2], "#rpm": attrRPM, "#tpm": attrTPM, "#bn": attrBudgetNanos, "#bp": attrBudgetPeriod})
	if err != nil {
		return billing.Account{}, err
	}
	var errs []error
	acct := items[PKAccount+project+"\x00"+SKAccount]
	credit, err := optNum(acct, attrCredit)
	errs = append(errs, err)
	out.ProjectRates, err = decodeRates(acct)
	errs = append(errs, err)
	for _, c := range shards {
		item := items[c.pk+"\x00"+c.sk]
		s.observe(c, item)
		n, _, err := num(item, attrSpent)
		errs = append(errs, err)
		out.SpentNanos += n
		for p, name := range now {
			n, _, err := num(item, name)
			errs = append(errs, err)
			out.PeriodSpent[p] += n
		}
	}
	if keyID != "" {
		item := items[kc.pk+"\x00"+kc.sk]
		s.observe(kc, item)
		var err1, err2 error
		out.KeySpentNanos, _, err1 = num(item, attrSpent)
		out.KeyLimitNanos, err2 = optNum(item, attrLimit)
		errs = append(errs, err1, err2)
		for p, name := range now {
			n, _, err := num(item, name)
			errs = append(errs, err)
			out.KeyPeriodSpent[p] = n
		}
	}
	if err := errors.Join(errs...); err != nil {
		return billing.Account{}, fmt.Errorf("dynamoledger: account %s: %w", project, err)
	}
	out.BalanceNanos = billing.Balance(credit, out.SpentNanos)
	return out, nil
}

// batchGet reads items (consistent), by pk + "\x00" + sk; absent items are
// absent.
func (s *Store) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, proj string, names map[string]string) (map[string]map[string]types.AttributeValue, error) {
	out := map[string]map[string]types.AttributeValue{}
	for chunk := range slices.Chunk(keys, maxBatchGet) {
		ka := types.KeysAndAttributes{Keys: chunk, ConsistentRead: aws.Bool(true)}
		if proj != "" {
			ka.ProjectionExpression, ka.ExpressionAttributeNames = aws.String(proj), names
		}
		req := map[string]types.KeysAndAttributes{s.table: ka}
		for delay := 10 * time.Millisecond; len(req) > 0; delay = min(2*delay, time.Second) {
			got, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, unavailable("BatchGetItem", err)
			}
			for _, item := range got.Responses[s.table] {
				out[str(item, AttrPK)+"\x00"+str(item, AttrSK)] = item
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

// Bill implements billing.Ledger (see the package doc for the steps and
// why they count once).
func (s *Store) Bill(ctx context.Context, e billing.Entry) error {
	_, err := s.bill(ctx, e, true)
	return err
}

// bill is Bill; applied is true when this call applied the entry (false:
// it was applied already). collect false skips the collections (a Bill
// made by a collection).
func (s *Store) bill(ctx context.Context, e billing.Entry, collect bool) (applied bool, err error) {
	if e, err = billing.PrepareEntry(e); err != nil {
		return false, err
	}
	cs := s.counters(e)
	// The epochs must be observed before the entry is seen pending (the
	// fence): take them now, before step 1.
	epochs := [2]int64{s.epoch(cs[0]), s.epoch(cs[1])}

	state, item, err := s.price(ctx, e)
	if err != nil || state == stateApplied {
		return false, err
	}
	// Steps 2 and 3 are three writes to three items, each idempotent on
	// its own: they go at once, so that a Bill made before an answer's
	// last bytes (a bounded account's) adds four round trips, not six.
	var views [2]map[string]types.AttributeValue
	var done [2]bool
	var errs [3]error
	var wg sync.WaitGroup
	if e.CostNanos > 0 {
		for i, c := range cs {
			wg.Go(func() { views[i], done[i], errs[i] = s.apply(ctx, c, e, epochs[i]) })
		}
	}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: indexItem(e, shardOf(e.RequestID, s.opts.Shards))}); err != nil {
		errs[2] = unavailable("PutItem", err)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return false, err
		}
	}
	if done[0] || done[1] {
		return false, nil // another Bill finished the entry
	}
	if err := s.markApplied(ctx, e.RequestID); err != nil {
		return false, err
	}
	// Past periods' spend leaves the counters (best effort: the next
	// bill of a new period tries again), so that an item does not grow
	// by a few attributes a day.
	for i, c := range cs {
		if stale := stalePeriods(views[i], e.At, s.opts.Now()); len(stale) > 0 {
			_ = s.removeAttrs(ctx, c, stale)
		}
	}
	// Close the hold. Best effort: Reconcile removes a pointer whose entry
	// is applied.
	_ = s.deletePointer(ctx, str(item, attrHoldPK), str(item, attrHoldSK))
	if collect {
		for i, c := range cs {
			if len(markers(views[i])) >= s.opts.GCThreshold {
				// Best effort: the Bill is complete; the markers wait for
				// the next collection when this one fails.
				_ = s.collect(ctx, c, views[i])
			}
		}
	}
	return true, nil
}

// apply is step 3 on one counter item. It returns the item as the
// successful write left it (or as a failed one found it, with the marker),
// or done when another Bill finished the entry meanwhile.
func (s *Store) apply(ctx context.Context, c counter, e billing.Entry, epoch int64) (map[string]types.AttributeValue, bool, error) {
	marker := markerName(e.RequestID)
	for attempt := 1; ; attempt++ {
		names := map[string]string{"#sp": attrSpent, "#m": marker}
		values := map[string]types.AttributeValue{":c": attrN(e.CostNanos), ":rid": attrS(e.RequestID)}
		// The spend of the entry's day, week and month count with the
		// total, under the same marker.
		add := "ADD #sp :c"
		for p, name := range periodAttrs(e.At) {
			names[fmt.Sprintf("#p%d", p)] = name
			add += fmt.Sprintf(", #p%d :c", p)
		}
		cond := "attribute_not_exists(#m) AND " + epochCondition(epoch, names, values)
		view, done, err := s.updateIf(ctx, c.pk, c.sk, add+" SET #m = :rid", cond, names, values)
		if err != nil {
			return nil, false, err
		}
		observed := s.observe(c, view)
		if _, ok := view[marker]; done || ok {
			return view, false, nil // counted (by this write, an earlier attempt or another Bill)
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
			return nil, false, fmt.Errorf("%w: dynamoledger: the counter %s kept changing during Bill", billing.ErrUnavailable, c.pk)
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

// collect removes the markers of view (a counter item) whose entries are
// applied, finishing first the ones still pending (a Bill that died after
// its step 3 here: the marker says this counter counted it, the other one
// may not have), with one UpdateItem that also raises the epoch, on the
// condition that the epoch is still view's.
func (s *Store) collect(ctx context.Context, c counter, view map[string]types.AttributeValue) error {
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
			e, err := decodeEntry(item, rid)
			if err != nil {
				return err
			}
			if _, err := s.bill(ctx, e, false); err != nil {
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
		Key:                       key(c.pk, c.sk),
		UpdateExpression:          aws.String("REMOVE " + strings.Join(remove, ", ") + " ADD #ep :one"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	switch {
	case failed(err):
		return nil // another collection went first
	case err != nil:
		return unavailable("UpdateItem", err)
	}
	s.observe(c, out.Attributes)
	return nil
}

// SetBalance implements billing.Ledger. The spend is spread over shards,
// so "credit = spent + remaining" cannot be one write: SetBalance reads the
// account item (its version) and every shard in one consistent
// BatchGetItem, then writes credit = the sum read + remaining on the
// condition that the version did not move (another SetBalance), and
// retries when it did. Each Bill is in the sum read (its shard was read
// after it counted) or is charged against the new balance (after): none is
// lost or counted twice, so the balance set is exact at the point where
// each shard was read; concurrent SetBalances are serialized by the
// version.
func (s *Store) SetBalance(ctx context.Context, project string, remaining *int64) error {
	if err := billing.ValidateID("project", project); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		keys := []map[string]types.AttributeValue{key(PKAccount+project, SKAccount)}
		for i := range s.opts.Shards {
			c := shardCounter(project, i)
			keys = append(keys, key(c.pk, c.sk))
		}
		items, err := s.batchGet(ctx, keys, "#pk, #sk, #sp, #ver", map[string]string{"#pk": AttrPK, "#sk": AttrSK, "#sp": attrSpent, "#ver": attrVersion})
		if err != nil {
			return err
		}
		var spent int64
		for i := range s.opts.Shards {
			c := shardCounter(project, i)
			n, _, err := num(items[c.pk+"\x00"+c.sk], attrSpent)
			if err != nil {
				return err
			}
			spent += n
		}
		ver, _, err := num(items[PKAccount+project+"\x00"+SKAccount], attrVersion)
		if err != nil {
			return err
		}
		names := map[string]string{"#cr": attrCredit, "#ver": attrVersion}
		values := map[string]types.AttributeValue{":cr": attrOptN(billing.Credit(spent, remaining)), ":one": attrN(1)}
		cond := "attribute_not_exists(#ver)"
		if ver != 0 {
			cond, values[":ver"] = "#ver = :ver", attrN(ver)
		}
		_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.table),
			Key:                       key(PKAccount+project, SKAccount),
			UpdateExpression:          aws.String("SET #cr = :cr ADD #ver :one"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
		})
		switch {
		case err == nil:
			return nil
		case !failed(err):
			return unavailable("UpdateItem", err)
		case attempt >= maxApplyAttempts:
			return fmt.Errorf("%w: dynamoledger: the account of %s kept changing during SetBalance", billing.ErrUnavailable, project)
		}
	}
}

// SetKeyLimit implements billing.Ledger: one UpdateItem of the key's item.
func (s *Store) SetKeyLimit(ctx context.Context, project, keyID string, limit *int64) error {
	if err := billing.ValidateProjectKey(project, keyID); err != nil {
		return err
	}
	c := keyCounter(project, keyID)
	return s.update(ctx, c.pk, c.sk, "SET #l = :l",
		map[string]string{"#l": attrLimit},
		map[string]types.AttributeValue{":l": attrOptN(limit)})
}

// Seed implements billing.Ledger: one UpdateItem of if_not_exists on the
// account item, and one per key on the key's item.
func (s *Store) Seed(ctx context.Context, project string, balance *int64, keyLimits map[string]*int64) error {
	ids, err := billing.ValidateSeed(project, keyLimits)
	if err != nil {
		return err
	}
	names := map[string]string{"#created": attrCreated, "#cr": attrCredit, "#project": attrProject}
	values := map[string]types.AttributeValue{
		":now": attrS(formatTime(s.opts.Now())), ":b": attrOptN(balance), ":project": attrS(project),
	}
	set := "SET #created = if_not_exists(#created, :now), #cr = if_not_exists(#cr, :b), #project = :project"
	if err := s.update(ctx, PKAccount+project, SKAccount, set, names, values); err != nil {
		return err
	}
	for _, id := range ids {
		c := keyCounter(project, id)
		if err := s.update(ctx, c.pk, c.sk, "SET #l = if_not_exists(#l, :l)",
			map[string]string{"#l": attrLimit},
			map[string]types.AttributeValue{":l": attrOptN(keyLimits[id])}); err != nil {
			return err
		}
	}
	return nil
}

// getEntry reads an entry item (consistent); nil when there is none.
func (s *Store) getEntry(ctx context.Context, requestID string) (map[string]types.AttributeValue, error) {
	return s.get(ctx, PKRequest+requestID, SKEntry)
}

// getEntries reads entry items by request id (consistent BatchGetItem).
func (s *Store) getEntries(ctx context.Context, rids []string) (map[string]map[string]types.AttributeValue, error) {
	rids = slices.Compact(slices.Sorted(slices.Values(rids)))
	keys := make([]map[string]types.AttributeValue, 0, len(rids))
	for _, rid := range rids {
		keys = append(keys, key(PKRequest+rid, SKEntry))
	}
	items, err := s.batchGet(ctx, keys, "", nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]types.AttributeValue, len(items))
	for _, item := range items {
		out[strings.TrimPrefix(str(item, AttrPK), PKRequest)] = item
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
	if item == nil || str(item, attrState) == stateHeld {
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
		if billing.InPeriod(e, from, to) {
			t.Add(e)
		}
	})
	return t, err
}

// TotalsPage implements billing.Ledger: the shards in turn, each in sort
// key order (time, then request id), one consistent Query per shard and
// page of at most the entries left to read. The cursor is a shard and the
// sort key of the last item read there, which must lie within the range's
// key condition (DynamoDB refuses a start key outside it).
func (s *Store) TotalsPage(ctx context.Context, project string, from, to time.Time, limit int, cur billing.TotalsCursor) (billing.Totals, billing.TotalsCursor, bool, error) {
	if err := billing.ValidateID("project", project); err != nil {
		return billing.Totals{}, billing.TotalsCursor{}, false, err
	}
	if limit < 1 {
		return billing.Totals{}, billing.TotalsCursor{}, false, fmt.Errorf("%w: limit %d, want at least 1", billing.ErrInvalid, limit)
	}
	t := billing.NewTotals()
	if !from.Before(to) {
		return t, billing.TotalsCursor{}, true, nil
	}
	lo, hi := formatTime(clampTime(from)), formatTime(clampTime(to))
	if cur.Shard < 0 || cur.Shard >= s.opts.Shards || (cur.After != "" && (cur.After < lo || cur.After > hi)) {
		return billing.Totals{}, billing.TotalsCursor{}, false, fmt.Errorf("%w: a cursor outside this range", billing.ErrInvalid)
	}
	left := limit
	for shard, after := cur.Shard, cur.After; shard < s.opts.Shards; {
		pk := fmt.Sprintf("%s%02d#%s", PKLedger, shard, project)
		in := &dynamodb.QueryInput{
			TableName:                aws.String(s.table),
			KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :from AND :to"),
			ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#sk": AttrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": attrS(pk), ":from": attrS(lo), ":to": attrS(hi),
			},
			ConsistentRead: aws.Bool(true),
			Limit:          aws.Int32(int32(min(left, 1<<30))),
		}
		if after != "" {
			in.ExclusiveStartKey = key(pk, after)
		}
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return billing.Totals{}, billing.TotalsCursor{}, false, unavailable("Query", err)
		}
		for _, item := range out.Items {
			e, err := decodeEntry(item, "")
			if err != nil {
				return billing.Totals{}, billing.TotalsCursor{}, false, err
			}
			if billing.InPeriod(e, from, to) {
				t.Add(e)
			}
		}
		left -= len(out.Items)
		if len(out.LastEvaluatedKey) == 0 {
			shard, after = shard+1, ""
		} else {
			after = str(out.LastEvaluatedKey, AttrSK)
		}
		if left <= 0 {
			return t, billing.TotalsCursor{Shard: shard, After: after}, shard == s.opts.Shards, nil
		}
	}
	return t, billing.TotalsCursor{}, true, nil
}

// queryIndex reads the index items of a project in [from, to]: one
// consistent Query per shard and 1 MB page.
func (s *Store) queryIndex(ctx context.Context, project string, from, to time.Time, f func(billing.Entry)) error {
	from, to = clampTime(from), clampTime(to)
	for i := range s.opts.Shards {
		in := &dynamodb.QueryInput{
			TableName:                aws.String(s.table),
			KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :from AND :to"),
			ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#sk": AttrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk":   attrS(fmt.Sprintf("%s%02d#%s", PKLedger, i, project)),
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
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	return nil
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

// Feedback implements billing.Ledger: one UpdateItem on (request id, end
// user), which keeps the first created time.
func (s *Store) Feedback(ctx context.Context, f billing.Feedback) error {
	if err := billing.ValidateFeedback(f); err != nil {
		return err
	}
	now := billing.FeedbackTime(f, s.opts.Now)
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
	billing.SortFeedbacks(out)
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
	return billing.Unavailable(fmt.Errorf("dynamodb %s: %w", op, err))
}

// failed reports whether err is a write's failed condition.
func failed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// written maps the error of a conditional write: nil, ifFailed when its
// condition failed, else ErrUnavailable with the cause.
func written(op string, err, ifFailed error) error {
	switch {
	case err == nil:
		return nil
	case failed(err):
		return ifFailed
	}
	return unavailable(op, err)
}

// updateIf is a conditional UpdateItem of (pk, sk): it returns the item as
// the write left it and done, or, when the condition failed, the item the
// write found (see found).
func (s *Store) updateIf(ctx context.Context, pk, sk, expr, cond string, names map[string]string, values map[string]types.AttributeValue) (item map[string]types.AttributeValue, done bool, err error) {
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 key(pk, sk),
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return out.Attributes, true, nil
	}
	item, err = s.found(ctx, "UpdateItem", err, pk, sk)
	return item, false, err
}

// found is the item a conditional write on (pk, sk) found when its
// condition failed (err): the one DynamoDB sent back with the failure
// (ReturnValuesOnConditionCheckFailure ALL_OLD), else the item read again
// (nil: there is none). Any other error is ErrUnavailable.
func (s *Store) found(ctx context.Context, op string, err error, pk, sk string) (map[string]types.AttributeValue, error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, unavailable(op, err)
	}
	if len(ccf.Item) > 0 {
		return ccf.Item, nil
	}
	return s.get(ctx, pk, sk)
}

// attrPeriodPrefix begins the name of a counter's spend in one period:
// per#2026-12-03, per#2026-W49, per#2026-12 (billing.Period.Label).
const attrPeriodPrefix = "per#"

// periodAttrs are the attributes of the spend in the day, week and month
// that hold t.
func periodAttrs(t time.Time) [billing.NumPeriods]string {
	var out [billing.NumPeriods]string
	for p, l := range billing.Labels(t) {
		out[p] = attrPeriodPrefix + l
	}
	return out
}

// stalePeriods are the period attributes of a counter item that are
// neither of the periods of at (a bill's) nor of now.
func stalePeriods(item map[string]types.AttributeValue, at, now time.Time) []string {
	a, n := periodAttrs(at), periodAttrs(now)
	keep := append(a[:], n[:]...)
	var stale []string
	for name := range item {
		if strings.HasPrefix(name, attrPeriodPrefix) && !slices.Contains(keep, name) {
			stale = append(stale, name)
		}
	}
	slices.Sort(stale)
	return stale
}

// removeAttrs removes attributes from a counter item, unconditionally.
func (s *Store) removeAttrs(ctx context.Context, c counter, attrs []string) error {
	names := map[string]string{"#pk": AttrPK}
	expr := "REMOVE "
	for i, a := range attrs {
		n := fmt.Sprintf("#r%d", i)
		names[n] = a
		if i > 0 {
			expr += ", "
		}
		expr += n
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(c.pk, c.sk),
		UpdateExpression: aws.String(expr), ExpressionAttributeNames: names,
		ConditionExpression: aws.String("attribute_exists(#pk)"),
	})
	if err != nil {
		return unavailable("UpdateItem", err)
	}
	return nil
}
