// Package dynamostore keeps Idempotency-Key records in DynamoDB.
//
// # Data model
//
// One table with a string partition key pk and a string sort key sk, shared
// with other kinds of items (every sort key of this package starts with
// "idem#"). All the items of a record share its pk, the record's key (a hash
// of its identity):
//
//	sk = "idem#R"                          the record: state, fp, owner,
//	                                       lease_until, expires_at, req_id,
//	                                       tenant, started (once
//	                                       MarkStarted), ttl; when
//	                                       completed, the answer
//	                                       inline (ans, deflated) or the
//	                                       number of its parts (parts)
//	sk = "idem#P#<owner>#<nnnn>"           part n of an answer too large for
//	                                       the record item (d: up to 350,000
//	                                       bytes of the deflated answer)
//	sk = "idem#E#<owner>#<seq:06d>"        the batch of events of Append call
//	                                       seq (d, deflated; with the head in
//	                                       seq 0), or its number of chunks
//	                                       (parts) when it is too large
//	sk = "idem#E#<owner>#<seq:06d>#<nnnn>" chunk n of such a batch
//
// Times are N attributes in unix milliseconds (with the nanoseconds as a
// decimal fraction); ttl is in unix seconds, an hour after expires_at, for
// DynamoDB's TTL deletion, which only tidies up: expiry is decided by
// expires_at, in every condition and on every read. Parts, batches and
// chunks carry the record's ttl and are keyed by the owner token of the
// reservation that wrote them, so a reservation never reads what an earlier
// one of the same key left behind.
//
// # Calls
//
//   - Reserve: one conditional PutItem. When the key is taken, DynamoDB sends
//     the existing record back with the failure
//     (ReturnValuesOnConditionCheckFailure=ALL_OLD); a completed record with
//     its answer inline and a tombstone are answered from it with no other
//     call. An in-progress record (whose appended events live in other items),
//     an answer in parts, or no item in the failure (dynalite ignores ALL_OLD)
//     costs one Load more.
//     The condition also lets the put take over a live record that is in
//     progress, has no started attribute, whose lease_until < :now and
//     whose fp equals the new one (its owner went away before it called a
//     provider): DynamoDB serializes the conditional writes on the item, so
//     the first takeover wins, and the old owner's later writes fail their
//     owner condition (MarkStarted included, so it can never start).
//   - Load: one consistent Query of the pk (more when the items exceed a
//     1 MB page).
//   - Poll (a remote waiter): one consistent GetItem of the record item and,
//     while it is in progress, one Query of the owner's batches from the
//     next unseen seq on (sk BETWEEN idem#E#<owner>#<from> AND
//     idem#E#<owner>#~): what was seen is never read again.
//   - MarkStarted: one conditional UpdateItem (SET started = true).
//   - Heartbeat, Tombstone, Complete: one conditional UpdateItem; Complete of
//     an answer over 350,000 bytes deflated also writes its parts first (one
//     PutItem each).
//   - Append: one PutItem of the batch's item, on the condition
//     attribute_not_exists(sk), so that a retried Append never overwrites;
//     a retry known to be applied costs nothing.
//   - Release: one conditional DeleteItem.
//
// # Fencing
//
// Heartbeat, MarkStarted, Complete, Tombstone and Release are conditional on
// "owner = :owner AND state = :in_progress": a failed condition is
// idempotency.ErrNotOwner. Append writes an item of its own, which no
// condition on the record can guard in one call (dynalite has no
// transactions); instead the Store remembers, for each record it reserved,
// the owner, the ttl and the next seq. An owner token is used by the one
// process that reserved it, so that knowledge holds until the owner ends
// the record (Complete, Tombstone and Release forget it) or the window ends
// (a later Reserve through the Store replaces it; one through another
// instance leaves the stale owner appending to items that no reservation
// reads). With it Append refuses another owner and a seq past the next one,
// and ignores a seq already applied, with no read. An Append (or a Complete
// in parts, which needs the ttl) for a record the Store does not know (made
// by another instance, or forgotten: the memory is bounded) reads the record
// and its batches first (one Query), checks the owner and the state, and
// remembers.
//
// Every other failure (network, throttling after the SDK's retries, a
// missing table, the caller's deadline) wraps idempotency.ErrUnavailable and
// the cause.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/pkg/ddbtable"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
)

// Attribute names. The SAM template's key schema and TTL attribute must use
// AttrPK, AttrSK and AttrTTL.
const (
	AttrPK          = ddbtable.AttrPK  // S, partition key: the record's key
	AttrSK          = ddbtable.AttrSK  // S, sort key
	AttrTTL         = ddbtable.AttrTTL // N, unix seconds: DynamoDB's TTL attribute
	AttrState       = "state"          // S: in_progress, completed, tombstone
	AttrFingerprint = "fp"             // S
	AttrOwner       = "owner"          // S: the owner token
	AttrLeaseUntil  = "lease_until"    // N, unix ms
	AttrExpiresAt   = "expires_at"     // N, unix ms
	AttrRequestID   = "req_id"         // S
	AttrTenant      = "tenant"         // S: the project
	AttrStarted     = "started"        // BOOL: set by MarkStarted
	AttrAnswer      = "ans"            // B: the deflated answer, inline
	AttrParts       = "parts"          // N: the number of parts (or chunks)
	AttrData        = "d"              // B: a part, a chunk or a batch of events
)

// Sort keys.
const (
	SKPrefix      = "idem#"   // every sort key of this package
	SKRecord      = "idem#R"  // the record
	SKPartPrefix  = "idem#P#" // + owner + "#" + %04d
	SKEventPrefix = "idem#E#" // + owner + "#" + %06d [+ "#" + %04d]
)

// MaxInline is the largest deflated answer, batch or part kept in one item
// (DynamoDB's limit is 400 KB per item, names and other attributes
// included).
const MaxInline = 350_000

// maxParts bounds the parts of one answer (%04d): 3.5 GB.
const maxParts = 10_000

// partWriters bounds the parts written at once.
const partWriters = 4

// reserveAttempts bounds the Reserve rounds when the record changes between
// the failed put and the read (released, or expired).
const reserveAttempts = 4

// Store is an idempotency.Store on a DynamoDB table. It is safe for
// concurrent use.
type Store struct {
	client *dynamodb.Client
	table  string

	mu     sync.Mutex
	owners map[string]ownerInfo // key -> the reservation this Store made or checked
}

// ownerInfo is what the Store knows of a reservation it made (or read):
// who owns it, its ttl and the next Append seq, so that Append needs no
// read. An owner token is used by the process that reserved it, so what its
// Store remembers stays true until the owner ends the record (Complete,
// Tombstone, Release: forgotten then) or the window ends (a later
// reservation replaces the entry; on another instance, it leaves the old
// owner's Appends in items nobody reads).
type ownerInfo struct {
	owner     string
	ttl       int64
	expiresAt time.Time
	next      int // the next Append seq
}

// maxOwners bounds the remembered reservations; forgetting one only costs a
// Query on the next Append.
const maxOwners = 1 << 16

var _ idempotency.Store = (*Store)(nil)

// New returns a Store on table (which EnsureTable creates, or the SAM
// template).
func New(client *dynamodb.Client, table string) *Store {
	return &Store{client: client, table: table, owners: map[string]ownerInfo{}}
}

// Reserve implements idempotency.Store.
func (s *Store) Reserve(ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	if rec.Key == "" || rec.Owner == "" {
		return nil, errors.New("dynamostore: Reserve needs a key and an owner")
	}
	item := map[string]types.AttributeValue{
		AttrPK:         attrS(rec.Key),
		AttrSK:         attrS(SKRecord),
		AttrState:      attrS(string(rec.State)),
		AttrOwner:      attrS(rec.Owner),
		AttrLeaseUntil: attrN(formatTime(rec.LeaseUntil)),
		AttrExpiresAt:  attrN(formatTime(rec.ExpiresAt)),
		AttrTTL:        attrN(strconv.FormatInt(ttlFor(rec.ExpiresAt), 10)),
	}
	// Empty strings are left out (the attribute reads back as "").
	if rec.Fingerprint != "" {
		item[AttrFingerprint] = attrS(rec.Fingerprint)
	}
	if rec.RequestID != "" {
		item[AttrRequestID] = attrS(rec.RequestID)
	}
	if rec.Tenant != "" {
		item[AttrTenant] = attrS(rec.Tenant)
	}
	if rec.Started {
		item[AttrStarted] = &types.AttributeValueMemberBOOL{Value: true}
	}
	// A record is live while now <= expires_at. A live one is taken over
	// when it is in progress, never started, its lease lapsed and it holds
	// the same request.
	cond := "attribute_not_exists(#pk) OR #exp < :now"
	names := map[string]string{"#pk": AttrPK, "#exp": AttrExpiresAt}
	values := map[string]types.AttributeValue{":now": attrN(formatTime(now))}
	if rec.Fingerprint != "" {
		cond += " OR (#state = :in_progress AND attribute_not_exists(#started) AND #lease < :now AND #fp = :fp)"
		names["#state"], names["#started"], names["#lease"], names["#fp"] = AttrState, AttrStarted, AttrLeaseUntil, AttrFingerprint
		values[":in_progress"] = attrS(string(idempotency.StateInProgress))
		values[":fp"] = attrS(rec.Fingerprint)
	}
	in := &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	created := func() (*idempotency.Record, error) {
		if rec.State == idempotency.StateInProgress {
			s.remember(rec.Key, ownerInfo{owner: rec.Owner, ttl: ttlFor(rec.ExpiresAt), expiresAt: rec.ExpiresAt})
		}
		return nil, nil
	}
	for range reserveAttempts {
		_, err := s.client.PutItem(ctx, in)
		if err == nil {
			return created()
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return nil, unavailable("PutItem", err)
		}
		// Real DynamoDB sends the record that failed the condition.
		got, ok := recordFromOldItem(ccf.Item, now)
		if !ok {
			got, err = s.Load(ctx, rec.Key, now)
			if errors.Is(err, idempotency.ErrNotFound) {
				continue // released or expired since the put: try again
			}
			if err != nil {
				return nil, err
			}
		}
		if got.Owner == rec.Owner {
			// Our own record: the SDK retried a put whose answer was
			// lost. Owner tokens are unique to a reservation.
			return created()
		}
		if rec.Fingerprint != "" && got.State == idempotency.StateInProgress && !got.Started &&
			got.LeaseUntil.Before(now) && got.Fingerprint == rec.Fingerprint {
			continue // it changed into one to take over since the put: try again
		}
		return got, nil
	}
	return nil, fmt.Errorf("%w: dynamostore: the record of the key kept changing during Reserve", idempotency.ErrUnavailable)
}

// recordFromOldItem decodes the record item that came back with a failed
// reserving put (ALL_OLD), when it holds the whole record: a tombstone, or a
// completed record with its answer inline or dropped. An in-progress record
// (whose events are other items), an answer in parts, no item (dynalite), an
// item that does not decode, or a record that is over as of now: ok is false
// and the caller reads the record.
func recordFromOldItem(item map[string]types.AttributeValue, now time.Time) (*idempotency.Record, bool) {
	if len(item) == 0 {
		return nil, false
	}
	rec, parts, err := decodeRecord(item)
	if err != nil || rec.ExpiresAt.Before(now) {
		return nil, false
	}
	switch {
	case rec.State == idempotency.StateTombstone:
		return rec, true
	case rec.State == idempotency.StateCompleted && parts == 0:
		return rec, true
	}
	return nil, false
}

// Load implements idempotency.Store.
func (s *Store) Load(ctx context.Context, key string, now time.Time) (*idempotency.Record, error) {
	if key == "" {
		return nil, idempotency.ErrNotFound
	}
	items, pages, err := s.items(ctx, key)
	if err != nil {
		return nil, err
	}
	rec, err := assemble(key, items, now)
	if err != nil && !errors.Is(err, idempotency.ErrNotFound) && pages > 1 {
		// A Query of several pages is no snapshot: the owner may have
		// written its parts (which sort before the record item) and
		// completed the record between two pages, so that the record
		// names parts this read passed over. Read it again, once.
		if items, _, err = s.items(ctx, key); err != nil {
			return nil, err
		}
		return assemble(key, items, now)
	}
	return rec, err
}

// items reads every item of key (consistently), in pages of the Query.
func (s *Store) items(ctx context.Context, key string) (items []map[string]types.AttributeValue, pages int, err error) {
	return s.query(ctx, key, "begins_with(#sk, :prefix)", map[string]types.AttributeValue{":prefix": attrS(SKPrefix)})
}

// query reads the items of key whose sort key meets skCond (a condition on
// #sk, with its values), consistently, in pages of the Query.
func (s *Store) query(ctx context.Context, key, skCond string, values map[string]types.AttributeValue) (items []map[string]types.AttributeValue, pages int, err error) {
	values[":pk"] = attrS(key)
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND " + skCond),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK},
		ExpressionAttributeValues: values,
	}
	for {
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return nil, pages, unavailable("Query", err)
		}
		pages++
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, pages, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// assemble builds the record from the items of its pk.
func assemble(key string, items []map[string]types.AttributeValue, now time.Time) (*idempotency.Record, error) {
	var recItem map[string]types.AttributeValue
	for _, it := range items {
		if str(it, AttrSK) == SKRecord {
			recItem = it
			break
		}
	}
	if recItem == nil {
		return nil, idempotency.ErrNotFound
	}
	rec, parts, err := decodeRecord(recItem)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: record %q: %w", key, err)
	}
	if rec.ExpiresAt.Before(now) {
		return nil, idempotency.ErrNotFound
	}
	owner := rec.Owner
	switch rec.State {
	case idempotency.StateCompleted:
		if parts == 0 {
			return rec, nil
		}
		data, err := joinChunks(items, SKPartPrefix+owner+"#", owner, parts)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: record %q: answer: %w", key, err)
		}
		b, err := unpackBlob(data)
		if err == nil {
			rec.Answer, err = b.answer()
		}
		if err != nil {
			return nil, fmt.Errorf("dynamostore: record %q: answer: %w", key, err)
		}
	case idempotency.StateInProgress:
		if err := addEvents(rec, items); err != nil {
			return nil, fmt.Errorf("dynamostore: record %q: events: %w", key, err)
		}
	}
	return rec, nil
}

// eventBatches finds the batches owner appended, by seq.
func eventBatches(items []map[string]types.AttributeValue, owner string) map[int]map[string]types.AttributeValue {
	prefix := SKEventPrefix + owner + "#"
	batches := map[int]map[string]types.AttributeValue{}
	for _, it := range items {
		rest, ok := strings.CutPrefix(str(it, AttrSK), prefix)
		if !ok || len(rest) != 6 || str(it, AttrOwner) != owner {
			continue
		}
		seq, err := strconv.Atoi(rest)
		if err != nil || seq < 0 {
			continue
		}
		batches[seq] = it
	}
	return batches
}

// addEvents adds the batches the record's owner appended, in order (Append
// refuses gaps).
func addEvents(rec *idempotency.Record, items []map[string]types.AttributeValue) error {
	_, err := addEventsFrom(rec, items, 0)
	return err
}

// addEventsFrom adds the batches from seq from on and returns the seq after
// the last one added.
func addEventsFrom(rec *idempotency.Record, items []map[string]types.AttributeValue, from int) (int, error) {
	prefix := SKEventPrefix + rec.Owner + "#"
	batches := eventBatches(items, rec.Owner)
	for seq := from; ; seq++ {
		it, ok := batches[seq]
		if !ok {
			return seq, nil
		}
		data, err := itemData(it, items, fmt.Sprintf("%s%06d#", prefix, seq), rec.Owner)
		if err != nil {
			return 0, fmt.Errorf("batch %d: %w", seq, err)
		}
		b, err := unpackBlob(data)
		if err != nil {
			return 0, fmt.Errorf("batch %d: %w", seq, err)
		}
		if seq == 0 && b.head != nil {
			rec.Head = b.head
		}
		rec.Events = append(rec.Events, b.events...)
	}
}

// itemData is the d attribute of an item, or the concatenation of its
// chunks (chunkPrefix + %04d) when it has parts.
func itemData(it map[string]types.AttributeValue, items []map[string]types.AttributeValue, chunkPrefix, owner string) ([]byte, error) {
	if n, ok, err := num(it, AttrParts); err != nil {
		return nil, err
	} else if ok {
		return joinChunks(items, chunkPrefix, owner, int(n))
	}
	d, ok := it[AttrData].(*types.AttributeValueMemberB)
	if !ok {
		return nil, fmt.Errorf("%w: no %s", errCorrupt, AttrData)
	}
	return d.Value, nil
}

// joinChunks concatenates the n items prefix+%04d of owner.
func joinChunks(items []map[string]types.AttributeValue, prefix, owner string, n int) ([]byte, error) {
	if n <= 0 || n > maxParts {
		return nil, fmt.Errorf("%w: %d parts", errCorrupt, n)
	}
	chunks := make([][]byte, n)
	size := 0
	for _, it := range items {
		rest, ok := strings.CutPrefix(str(it, AttrSK), prefix)
		if !ok || len(rest) != 4 || str(it, AttrOwner) != owner {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil || i < 0 || i >= n {
			continue
		}
		d, ok := it[AttrData].(*types.AttributeValueMemberB)
		if !ok {
			return nil, fmt.Errorf("%w: part %d has no %s", errCorrupt, i, AttrData)
		}
		chunks[i] = d.Value
		size += len(d.Value)
	}
	out := make([]byte, 0, size)
	for i, c := range chunks {
		if c == nil {
			return nil, fmt.Errorf("%w: part %d of %d is missing", errCorrupt, i, n)
		}
		out = append(out, c...)
	}
	return out, nil
}

// decodeRecord decodes a record item, with the answer when it is inline;
// parts is its number of parts otherwise (0: inline, or no answer).
func decodeRecord(item map[string]types.AttributeValue) (rec *idempotency.Record, parts int, err error) {
	rec = &idempotency.Record{
		Key:         str(item, AttrPK),
		Fingerprint: str(item, AttrFingerprint),
		State:       idempotency.State(str(item, AttrState)),
		Owner:       str(item, AttrOwner),
		RequestID:   str(item, AttrRequestID),
		Tenant:      str(item, AttrTenant),
	}
	if b, ok := item[AttrStarted].(*types.AttributeValueMemberBOOL); ok {
		rec.Started = b.Value
	}
	if rec.Key == "" || rec.Owner == "" || str(item, AttrSK) != SKRecord {
		return nil, 0, fmt.Errorf("%w: not a record item", errCorrupt)
	}
	switch rec.State {
	case idempotency.StateInProgress, idempotency.StateCompleted, idempotency.StateTombstone:
	default:
		return nil, 0, fmt.Errorf("%w: state %q", errCorrupt, rec.State)
	}
	if rec.LeaseUntil, err = timeAttr(item, AttrLeaseUntil); err != nil {
		return nil, 0, err
	}
	if rec.ExpiresAt, err = timeAttr(item, AttrExpiresAt); err != nil {
		return nil, 0, err
	}
	if rec.State != idempotency.StateCompleted {
		return rec, 0, nil
	}
	if a, ok := item[AttrAnswer].(*types.AttributeValueMemberB); ok {
		b, err := unpackBlob(a.Value)
		if err != nil {
			return nil, 0, err
		}
		if rec.Answer, err = b.answer(); err != nil {
			return nil, 0, err
		}
		return rec, 0, nil
	}
	n, ok, err := num(item, AttrParts)
	if err != nil {
		return nil, 0, err
	}
	if ok {
		if n <= 0 || n > maxParts {
			return nil, 0, fmt.Errorf("%w: %d parts", errCorrupt, n)
		}
		return rec, int(n), nil
	}
	return rec, 0, nil // completed, answer dropped
}

// Poll implements idempotency.Store: one consistent GetItem of the record
// item, and while it is in progress one Query of the owner's batches from
// seq from on (a Load instead when the answer is in parts).
func (s *Store) Poll(ctx context.Context, key, owner string, from int, now time.Time) (*idempotency.Record, int, error) {
	if key == "" {
		return nil, 0, idempotency.ErrNotFound
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            recordKey(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, 0, unavailable("GetItem", err)
	}
	if len(out.Item) == 0 {
		return nil, 0, idempotency.ErrNotFound
	}
	rec, parts, err := decodeRecord(out.Item)
	if err != nil {
		return nil, 0, fmt.Errorf("dynamostore: record %q: %w", key, err)
	}
	if rec.ExpiresAt.Before(now) {
		return nil, 0, idempotency.ErrNotFound
	}
	switch {
	case parts > 0:
		rec, err := s.Load(ctx, key, now)
		return rec, 0, err
	case rec.State != idempotency.StateInProgress:
		return rec, 0, nil
	}
	if rec.Owner != owner {
		from = 0
	}
	prefix := SKEventPrefix + rec.Owner + "#"
	items, _, err := s.query(ctx, key, "#sk BETWEEN :lo AND :hi", map[string]types.AttributeValue{
		":lo": attrS(fmt.Sprintf("%s%06d", prefix, from)),
		":hi": attrS(prefix + "~"), // after every digit and '#'
	})
	if err != nil {
		return nil, 0, err
	}
	next, err := addEventsFrom(rec, items, from)
	if err != nil {
		return nil, 0, fmt.Errorf("dynamostore: record %q: events: %w", key, err)
	}
	return rec, next, nil
}

// MarkStarted implements idempotency.Store: one conditional UpdateItem.
func (s *Store) MarkStarted(ctx context.Context, key, owner string) error {
	return s.updateOwned(ctx, key, owner, "SET #started = :true", map[string]string{"#started": AttrStarted},
		map[string]types.AttributeValue{":true": &types.AttributeValueMemberBOOL{Value: true}})
}

// Heartbeat implements idempotency.Store.
func (s *Store) Heartbeat(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	err := s.updateOwned(ctx, key, owner, "SET #lease = :lease", map[string]string{"#lease": AttrLeaseUntil},
		map[string]types.AttributeValue{":lease": attrN(formatTime(leaseUntil))})
	if errors.Is(err, idempotency.ErrNotOwner) {
		s.forget(key, owner)
	}
	return err
}

// Append implements idempotency.Store.
func (s *Store) Append(ctx context.Context, key, owner string, seq int, head *idempotency.Head, events []idempotency.Event) error {
	if seq < 0 || seq > 999_999 {
		return fmt.Errorf("dynamostore: Append seq %d out of range", seq)
	}
	info, err := s.ownership(ctx, key, owner)
	if err != nil {
		return err
	}
	switch {
	case seq < info.next:
		return nil // applied already: a retry
	case seq > info.next:
		return fmt.Errorf("dynamostore: Append seq %d, but the next one is %d", seq, info.next)
	}
	b := blob{events: events}
	if seq == 0 {
		b.head = head
	}
	data := packBlob(b)
	sk := fmt.Sprintf("%s%s#%06d", SKEventPrefix, owner, seq)
	item := map[string]types.AttributeValue{
		AttrPK:    attrS(key),
		AttrSK:    attrS(sk),
		AttrOwner: attrS(owner),
		AttrTTL:   attrN(strconv.FormatInt(info.ttl, 10)),
	}
	if len(data) <= MaxInline {
		item[AttrData] = &types.AttributeValueMemberB{Value: data}
	} else {
		n, err := s.putChunks(ctx, key, sk+"#", owner, info.ttl, data)
		if err != nil {
			return err
		}
		item[AttrParts] = attrN(strconv.Itoa(n))
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#sk)"),
		ExpressionAttributeNames: map[string]string{"#sk": AttrSK},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) { // ccf: this seq is stored already (a retry)
		return unavailable("PutItem", err)
	}
	s.mu.Lock()
	if info, ok := s.owners[key]; ok && info.owner == owner && info.next == seq {
		info.next++
		s.owners[key] = info
	}
	s.mu.Unlock()
	return nil
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, key, owner string, ans *idempotency.Answer) error {
	update := "SET #state = :completed REMOVE #ans, #parts"
	names := map[string]string{"#ans": AttrAnswer, "#parts": AttrParts}
	values := map[string]types.AttributeValue{":completed": attrS(string(idempotency.StateCompleted))}
	if ans != nil {
		data := packBlob(answerBlob(ans))
		if len(data) <= MaxInline {
			update = "SET #state = :completed, #ans = :ans REMOVE #parts"
			values[":ans"] = &types.AttributeValueMemberB{Value: data}
		} else {
			info, err := s.ownership(ctx, key, owner)
			if err != nil {
				return err
			}
			n, err := s.putChunks(ctx, key, SKPartPrefix+owner+"#", owner, info.ttl, data)
			if err != nil {
				return err
			}
			update = "SET #state = :completed, #parts = :parts REMOVE #ans"
			values[":parts"] = attrN(strconv.Itoa(n))
		}
	}
	err := s.updateOwned(ctx, key, owner, update, names, values)
	if err == nil || errors.Is(err, idempotency.ErrNotOwner) {
		s.forget(key, owner)
	}
	return err
}

// Tombstone implements idempotency.Store.
func (s *Store) Tombstone(ctx context.Context, key, owner string) error {
	err := s.updateOwned(ctx, key, owner, "SET #state = :tombstone", nil,
		map[string]types.AttributeValue{":tombstone": attrS(string(idempotency.StateTombstone))})
	if err == nil || errors.Is(err, idempotency.ErrNotOwner) {
		s.forget(key, owner)
	}
	return err
}

// Release implements idempotency.Store: it deletes an in-progress record of
// owner. The batches the owner appended stay until their ttl; no later
// reservation reads them.
func (s *Store) Release(ctx context.Context, key, owner string) error {
	if key == "" || owner == "" {
		return idempotency.ErrNotOwner
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      recordKey(key),
		ConditionExpression:      aws.String("#owner = :owner AND #state = :in_progress"),
		ExpressionAttributeNames: map[string]string{"#owner": AttrOwner, "#state": AttrState},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":owner":       attrS(owner),
			":in_progress": attrS(string(idempotency.StateInProgress)),
		},
	})
	err = ownedErr("DeleteItem", err)
	if err == nil || errors.Is(err, idempotency.ErrNotOwner) {
		s.forget(key, owner)
	}
	return err
}

// updateOwned runs an UpdateItem of the record on the condition that owner
// holds it and it is in progress.
func (s *Store) updateOwned(ctx context.Context, key, owner, update string, names map[string]string, values map[string]types.AttributeValue) error {
	if key == "" || owner == "" {
		return idempotency.ErrNotOwner
	}
	allNames := map[string]string{"#owner": AttrOwner, "#state": AttrState}
	for k, v := range names {
		allNames[k] = v
	}
	allValues := map[string]types.AttributeValue{
		":owner":       attrS(owner),
		":in_progress": attrS(string(idempotency.StateInProgress)),
	}
	for k, v := range values {
		allValues[k] = v
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       recordKey(key),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#owner = :owner AND #state = :in_progress"),
		ExpressionAttributeNames:  allNames,
		ExpressionAttributeValues: allValues,
	})
	return ownedErr("UpdateItem", err)
}

// ownership is what the Store knows of owner's reservation of key: from
// memory when this Store made it (or read it before), else from a Query of
// the key's items. ErrNotOwner when owner does not hold an in-progress
// record.
func (s *Store) ownership(ctx context.Context, key, owner string) (ownerInfo, error) {
	if key == "" || owner == "" {
		return ownerInfo{}, idempotency.ErrNotOwner
	}
	s.mu.Lock()
	info, ok := s.owners[key]
	s.mu.Unlock()
	if ok {
		if info.owner != owner {
			return ownerInfo{}, idempotency.ErrNotOwner
		}
		return info, nil
	}
	items, _, err := s.items(ctx, key)
	if err != nil {
		return ownerInfo{}, err
	}
	var rec map[string]types.AttributeValue
	for _, it := range items {
		if str(it, AttrSK) == SKRecord {
			rec = it
		}
	}
	if str(rec, AttrOwner) != owner || str(rec, AttrState) != string(idempotency.StateInProgress) {
		return ownerInfo{}, idempotency.ErrNotOwner
	}
	exp, err := timeAttr(rec, AttrExpiresAt)
	if err != nil {
		return ownerInfo{}, fmt.Errorf("dynamostore: record %q: %w", key, err)
	}
	batches := eventBatches(items, owner)
	next := 0
	for batches[next] != nil {
		next++
	}
	info = ownerInfo{owner: owner, ttl: ttlFor(exp), expiresAt: exp, next: next}
	s.mu.Lock()
	if _, ok := s.owners[key]; !ok { // else a concurrent call knows better
		s.rememberLocked(key, info)
	}
	info = s.owners[key]
	s.mu.Unlock()
	if info.owner != owner {
		return ownerInfo{}, idempotency.ErrNotOwner
	}
	return info, nil
}

func (s *Store) remember(key string, info ownerInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rememberLocked(key, info)
}

func (s *Store) rememberLocked(key string, info ownerInfo) {
	if len(s.owners) >= maxOwners {
		now := time.Now()
		for k, v := range s.owners {
			if !v.expiresAt.After(now) {
				delete(s.owners, k)
			}
		}
		if len(s.owners) >= maxOwners {
			clear(s.owners)
		}
	}
	s.owners[key] = info
}

func (s *Store) forget(key, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if info, ok := s.owners[key]; ok && info.owner == owner {
		delete(s.owners, key)
	}
}

// putChunks writes data in items prefix+%04d of at most MaxInline bytes each
// (partWriters at a time) and returns their number.
func (s *Store) putChunks(ctx context.Context, key, prefix, owner string, ttl int64, data []byte) (int, error) {
	n := (len(data) + MaxInline - 1) / MaxInline
	if n > maxParts {
		return 0, fmt.Errorf("dynamostore: %d bytes deflated is too large to store", len(data))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for range min(n, partWriters) {
		wg.Go(func() {
			for i := range next {
				chunk := data[i*MaxInline : min(len(data), (i+1)*MaxInline)]
				_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
					TableName: aws.String(s.table),
					Item: map[string]types.AttributeValue{
						AttrPK:    attrS(key),
						AttrSK:    attrS(fmt.Sprintf("%s%04d", prefix, i)),
						AttrOwner: attrS(owner),
						AttrTTL:   attrN(strconv.FormatInt(ttl, 10)),
						AttrData:  &types.AttributeValueMemberB{Value: chunk},
					},
				})
				if err != nil {
					once.Do(func() {
						first = unavailable("PutItem", err)
						cancel()
					})
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return 0, first
	}
	if err := ctx.Err(); err != nil {
		return 0, unavailable("PutItem", err)
	}
	return n, nil
}

// ownedErr maps the error of a write conditional on the owner.
func ownedErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return idempotency.ErrNotOwner
	}
	return unavailable(op, err)
}

// unavailable wraps a failure to use the table: errors.Is finds both
// idempotency.ErrUnavailable and the cause (a context error, a smithy
// OperationError, ...).
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: dynamodb %s: %w", idempotency.ErrUnavailable, op, err)
}

func recordKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: attrS(key), AttrSK: attrS(SKRecord)}
}

func attrS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func attrN(n string) types.AttributeValue { return &types.AttributeValueMemberN{Value: n} }

func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func num(item map[string]types.AttributeValue, name string) (int64, bool, error) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s %q", errCorrupt, name, v.Value)
	}
	return n, true, nil
}

func timeAttr(item map[string]types.AttributeValue, name string) (time.Time, error) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, fmt.Errorf("%w: no %s", errCorrupt, name)
	}
	return parseTime(v.Value)
}
