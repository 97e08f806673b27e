// Package dynamoledger keeps balances, key spend, holds, the usage ledger,
// feedback and API keys in DynamoDB, in the gateway's one table (pk S
// HASH, sk S RANGE: ddbtable.EnsureTable), shared at once by every
// instance. It is a billing.Ledger, a billing.Reconciler and a
// billing.KeyStore.
//
// # Data model
//
// No item grows with the number of keys, requests or projects: every item
// below is bounded (the counters by GCThreshold markers).
//
//	pk req#<rid>              sk ledger        the entry: project, key_id, model,
//	                                           at, state (held | pending |
//	                                           applied), hpk/hsk (its due
//	                                           pointer); held: deadline;
//	                                           pending/applied: provider, pt, ct,
//	                                           cost (nano-USD). Its conditional
//	                                           writes make a request id one request.
//	pk hold#<NN>              sk <deadline>#<rid>   a due pointer (NN = sha256(rid)
//	                                           mod HoldShards): Reconcile's index
//	                                           of open holds, by deadline
//	pk ledger#<NN>#<project>  sk <at>#<rid>    the entry by project and time, for
//	                                           Totals (NN: the spend shard)
//	pk acct#<project>         sk acct          the account: created, credit (N,
//	                                           NULL = unlimited, absent = not
//	                                           seeded), ver (SetBalance)
//	pk spend#<NN>#<project>   sk spend         a spend counter (NN = sha256(rid)
//	                                           mod Shards): spent, epoch, markers
//	                                           m#<hash of a rid>
//	pk kacct#<key id>         sk <project>     the key's counter: spent, epoch,
//	                                           markers, and limit (N or NULL)
//	pk fb#<rid>               sk user#<end user>   feedback
//	pk key#<key hash>         sk key           an API key: project, key_id,
//	                                           revoked, created
//	pk keyid#<key id>         sk keyid         the hash and project of a key id
//
// The project's spend is the sum of its Shards counters; the remaining
// balance is credit - spend. Nothing here has a TTL: the ledger is kept.
//
// # A request's life: Hold, Price, Bill, Reconcile
//
//   - Hold: PutItem of the due pointer (sk = deadline#rid), then PutItem of
//     the entry, state held, on attribute_not_exists(pk) (an existing
//     entry of the same request is success; of another,
//     ErrLedgerCollision). The pointer goes first, so that no entry exists
//     that Reconcile cannot find: a process that dies between the two
//     leaves a pointer without entry, which Reconcile removes StrayAfter
//     past its deadline (a Hold that failed never let a provider run).
//   - Price: one UpdateItem of the entry, held -> pending with the cost, on
//     the condition that it is held for the same request. No entry (no
//     Hold, or written off meanwhile): a due pointer due now, then a
//     conditional PutItem of the entry, pending. Priced or billed already:
//     the payload is compared.
//   - Bill: step 1 is Price (so a priced entry's Bill skips to step 2), then
//     2. PutItem of the index item (unconditional: a function of the entry)
//     and, at the same time, 3. on each of its two counters (the project
//     shard of the rid, the key's item), UpdateItem ADD spent :c SET
//     m#<h> = :rid on the condition attribute_not_exists(m#<h>) AND
//     epoch = :e (skipped for a zero cost): each of the three is idempotent
//     on its own, so their order does not matter; 4. once all three
//     landed, UpdateItem of the entry: state = applied; 5. DeleteItem
//     of the due pointer (best effort: Reconcile removes the pointer of an
//     applied entry). A Bill that finds the entry applied returns.
//   - Unhold: DeleteItem of the entry on state = held (ALL_OLD gives its
//     pointer), then DeleteItem of the pointer.
//   - Reconcile(now): one consistent Query per hold partition for sk < now,
//     one consistent BatchGetItem per 100 entries; pending: Bill (steps
//     2-5); held: DeleteItem of the entry on state = held and this pointer
//     (a write-off: no entry is left, so a late Bill bills normally), then
//     of the pointer; when that condition fails because a Price landed,
//     Bill. Applied, or a pointer that is not its entry's: the pointer is
//     deleted. A process dead between any two steps of any of these leaves
//     an entry with a due pointer, or a pointer alone, and nothing else:
//     Reconcile finishes the first (exactly once, below) and removes the
//     second.
//
// # Exactly once, without transactions
//
// dynalite, which the tests run on, has no TransactWriteItems, so the
// steps are single-item conditional writes. Each counter item counts a
// request once thanks to its marker; markers must not stay forever (an item
// is at most 400 KB and a write costs one WCU per started KB), and
// removing one reopens the door: a slow Bill that read the entry as
// pending before step 4 would find no marker at step 3 and count again.
// The epoch of the counter item closes it: markers are removed only
// together with "ADD epoch 1" (collection, below), and only once their
// entries are applied; and a Bill uses, at step 3 on an item, an epoch of
// that item it observed before it last saw its entry pending. Proof, per
// counter item: say two step-3 writes U1 then U2 count request r there.
// Between them r's marker was removed by a write R, which came after r was
// marked applied, and raised the epoch. U2's biller saw r pending (before
// it was applied, so before R) after observing its epoch e, so e <= the
// epoch before R < the epoch at U2, and U2's condition fails. The two
// counters are independent items with independent epochs; the argument
// holds for each. No clocks, no leases. A step 3 that fails reads the item
// (on DynamoDB the failed write returns it: ALL_OLD; dynalite needs a
// GetItem): a marker means counted; otherwise the epoch moved, so the Bill
// reads its entry again (applied: done) and retries with the new epoch.
//
// Collection: when step 3 leaves GCThreshold markers or more on an item,
// that Bill reads their entries (BatchGetItem), finishes (Bill) the ones a
// crashed Bill left pending (the marker says this counter counted; the
// other may not have), and removes the markers with one UpdateItem that
// also adds 1 to the epoch, on the condition that the epoch did not move.
// Epochs observed (Account, step 3, collection) are cached per item; a
// stale cached epoch is safe (observed before the entry was read).
//
// SetBalance cannot write "credit = spend + remaining" in one write when the
// spend is spread over shards: it reads the account item (its version) and
// every shard in one consistent BatchGetItem and writes credit = the sum
// read + remaining, on the condition that the version did not move
// (another SetBalance), retrying when it did. What is atomic: each shard's
// read and each Bill's step 3 on it; so every Bill is either in the sum
// (counted before its shard was read) or charged against the new balance
// (after): none is lost or counted twice. Concurrent SetBalances are
// serialized by the version.
//
// # Calls and costs
//
// Item sizes: an entry about 250 bytes, a pointer 70, an index item 200, a
// counter 115 plus at most GCThreshold markers of about 75 bytes (under
// 1 KB at the default 8), the account item 80: every write is 1 WCU.
//
//   - Hold: 2 PutItems. Price: 1 UpdateItem (without a Hold: a failed
//     UpdateItem, on a missing item also a GetItem, and 2 PutItems).
//   - Bill after Price: a failed UpdateItem (the priced entry is read back:
//     ALL_OLD, on dynalite a GetItem), PutItem (index), 2 UpdateItems
//     (counters), UpdateItem (applied), DeleteItem (pointer): 5 writes and
//     1 failed write. Bill after Hold without Price: the same with a
//     successful first UpdateItem. Zero cost: no counter writes.
//   - So a request costs Hold 2 + Price 1 + Bill 5 = 8 successful writes and
//     1 failed conditional write (DynamoDB charges 1 WCU for it too): 9 WCU,
//     plus collection: every GCThreshold-th step 3 on a counter also
//     BatchGetItems its GCThreshold entries and writes one UpdateItem (2 of 8
//     per request at the default). Key spend lives on items of its
//     own, never on the account item, whose size (so WCU) would otherwise
//     grow with the keys (400 KB, so 400 WCU and then failure, near
//     14,000 keys).
//   - Account: one consistent BatchGetItem of 2 + Shards items (each 1 RCU).
//   - Reconcile: one Query per hold partition (HoldShards) and page, a
//     BatchGetItem per 100 due entries, then per entry the Bill or the
//     write-off (2 DeleteItems).
//   - Totals: one consistent Query per shard and 1 MB page. TotalsPage:
//     the same, each Query limited to the entries the page has left, so
//     a page of n entries reads at most n index items (about 200 bytes
//     each) and one more Query per empty shard it passes.
//   - SetBalance: BatchGetItem + UpdateItem. SetKeyLimit: one UpdateItem.
//     Seed: one UpdateItem plus one per key.
//   - Keys: Lookup, ProjectExists, KeyProject: one GetItem; KeyByID: two.
//
// # Bills per second per project (DynamoDB)
//
// A partition takes at most 1,000 WCU/s and 3,000 RCU/s, and one item (one
// partition key) never spreads over partitions, so the rate of a project
// is set by its hottest partition key. Per request:
//
//   - req#<rid>, keyid#, key#: one key per request or key: spread.
//   - hold#<NN>: 2 writes (Hold, Bill's delete) spread over HoldShards = 16
//     keys: at 5,000 requests/s, 625 WCU/s per key.
//   - ledger#<NN>#<project>: 1 write per request over Shards keys.
//   - spend#<NN>#<project>: per request on its shard, 1 step-3 write, 1/8
//     of a collection write, and the retries: a collection fails the step 3
//     of the Bills of the same shard between their epoch and their write
//     (window W, about 3 round trips, 15 ms); with R requests/s on a shard
//     the chance is about p = 1 - exp(-(R/8)·W), each costing one failed
//     write (1 WCU) and one more read. With Shards = 8 and 5,000 requests/s
//     a shard takes R = 625/s: p = 1 - exp(-78·0.015) = 0.69, so
//     625·(1 + 0.125 + 0.69) = 1,134 WCU/s: over. With Shards = 16 (R =
//     313/s): p = 0.44, 313·1.57 = 490 WCU/s: under half the limit. So
//     Shards = 8 sustains about 4,400 requests/s (R = 550: p = 0.64, 1.77
//     WCU each = 970 WCU/s), and 5,000/s needs Shards = 16, the default.
//     In general capacity is about Shards·1,000/(1.125 + p) requests/s; it
//     grows linearly with Shards (p falls as R per shard falls).
//   - the reads: Account reads every shard once per request (consistent,
//     1 RCU): 3,000 requests/s per project at most whatever Shards is,
//     unless the caller caches the project's account for a moment (the 402
//     check tolerates it: the overshoot bound grows by what is billed in the
//     cache's lifetime) or reads eventually consistently (0.5 RCU: 6,000/s).
//   - kacct#<key id>: one key's own counter takes every Bill of the key, so
//     one key alone is bounded like one shard: about 1,000/(1.125 + p),
//     some 550 requests/s with p = 0.7; a project at 5,000/s needs its
//     traffic on ten keys or more (the key counter is not sharded).
//
// So: the default Shards = 16 for >= 5,000 bills/s per project on DynamoDB
// (about 9,500/s before the shards are full; with the Account read cached
// or eventually consistent above 3,000/s); each doubling of Shards about
// doubles it, at the price of Shards RCU per Account and Shards Queries per
// Totals.
//
// # Crashes
//
// Every failure other than a condition (network, throttling after the
// SDK's retries, a missing table, the caller's deadline) wraps
// billing.ErrUnavailable and the cause; the caller calls the same method
// again, or leaves a priced entry to Reconcile.
package dynamoledger
