// Package memledger is the in-memory billing.Ledger, billing.Reconciler and
// billing.KeyStore: the embedded default for `make run` and for tests. One
// mutex guards everything, so Bill is atomic: the entry, both spends and
// the hold change together or not at all, and exactly-once needs nothing
// more. A hold lives in memory too: if the process dies, its holds and
// priced entries die with the spend they would have changed (a local
// store, not a production one). Nothing is persisted
// and nothing is shared between processes; the ledger grows with every bill
// (a local store, not a production one), by about 140 bytes, kept without
// pointers (see rec) so that the collector's work does not grow with it.
package memledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

// Options configures a Store.
type Options struct {
	// Pepper is the server secret of billing.HashKey, for Issue.
	Pepper []byte
	// Now is the clock (feedback and key times); default time.Now.
	Now func() time.Time
}

// Store is a billing.Ledger and a billing.KeyStore in memory.
type Store struct {
	opts Options

	mu        sync.Mutex
	accounts  map[string]*account
	entries   map[string]int    // request id -> its index in recs
	recs      []rec             // the billed entries, in billing order
	byProject map[string][]int  // project -> indices in recs, in billing order
	names     []string          // the strings recs point at (projects, keys, models, providers)
	nameIDs   map[string]uint32 // name -> its index in names
	feedback  map[string]map[string]billing.Feedback
	keys      map[string]billing.KeyRecord // hash -> record
	keyIDs    map[string]string            // key id -> hash
	holds     map[string]*held             // request id -> hold, until billed or closed
}

// held is a hold, priced or not.
type held struct {
	h billing.Hold
	// priced points at entry once the hold is priced (nil before): the
	// entry is kept in the hold, not allocated apart.
	priced *billing.Entry
	entry  billing.Entry
}

type account struct {
	created   bool
	creditSet bool   // credit was seeded or set (nil then means unlimited)
	credit    *int64 // total credit; remaining = credit - spent
	spent     int64
	periods   periodSpend
	rates     billing.Rates
	keys      map[string]*keyAccount
}

type keyAccount struct {
	spent    int64
	periods  periodSpend
	limitSet bool
	limit    *int64
}

// periodSpend is a spend per period label (billing.Period.Label), only the
// current ones kept: a bill counts in the periods of its entry's At.
type periodSpend map[string]int64

func (p *periodSpend) add(at time.Time, cost int64) {
	if *p == nil {
		*p = periodSpend{}
	}
	for _, l := range billing.Labels(at) {
		(*p)[l] += cost
	}
}

// current is the spend in the periods that hold now; the labels of other
// periods are dropped (a late bill of an earlier period counts in none
// that is checked).
func (p periodSpend) current(now time.Time) (out [billing.NumPeriods]int64) {
	labels := billing.Labels(now)
	for q, l := range labels {
		out[q] = p[l]
	}
	if len(p) > len(labels) {
		for l := range p {
			if !slices.Contains(labels[:], l) {
				delete(p, l)
			}
		}
	}
	return out
}

var (
	_ billing.Ledger     = (*Store)(nil)
	_ billing.KeyStore   = (*Store)(nil)
	_ billing.Reconciler = (*Store)(nil)
)

// InProcess reports that the store's calls never wait on a network or a
// disk: the gateway gives them no deadline of their own (a context and a
// timer per call would be a tenth of its allocations under load).
func (s *Store) InProcess() bool { return true }

// New returns an empty Store.
func New(opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{
		opts:      opts,
		accounts:  map[string]*account{},
		entries:   map[string]int{},
		byProject: map[string][]int{},
		nameIDs:   map[string]uint32{},
		feedback:  map[string]map[string]billing.Feedback{},
		keys:      map[string]billing.KeyRecord{},
		keyIDs:    map[string]string{},
		holds:     map[string]*held{},
	}
}

// begin opens a call whose arguments were checked (invalid is the check's
// error): a done context is billing.ErrUnavailable, and on nil s.mu is held
// for the caller to unlock.
func (s *Store) begin(ctx context.Context, invalid error) error {
	if invalid != nil {
		return invalid
	}
	if err := ctx.Err(); err != nil {
		return billing.Unavailable(err)
	}
	s.mu.Lock()
	return nil
}

// acct returns the project's account, creating it; s.mu is held.
func (s *Store) acct(project string) *account {
	return made(s.accounts, project, func() *account { return &account{keys: map[string]*keyAccount{}} })
}

func (a *account) key(id string) *keyAccount {
	return made(a.keys, id, func() *keyAccount { return &keyAccount{} })
}

// made returns m[k], adding mk() under k first when there is none.
func made[V any](m map[string]*V, k string, mk func() *V) *V {
	v, ok := m[k]
	if !ok {
		v = mk()
		m[k] = v
	}
	return v
}

// Account implements billing.Ledger.
func (s *Store) Account(ctx context.Context, project, keyID string) (billing.Account, error) {
	if err := s.begin(ctx, billing.ValidateID("project", project)); err != nil {
		return billing.Account{}, err
	}
	defer s.mu.Unlock()
	out := billing.Account{Project: project, KeyID: keyID}
	a := s.accounts[project]
	if a == nil {
		return out, nil
	}
	now := s.opts.Now()
	out.SpentNanos = a.spent
	out.BalanceNanos = billing.Balance(a.credit, a.spent)
	out.PeriodSpent = a.periods.current(now)
	out.ProjectRates = cloneRates(a.rates)
	if k := a.keys[keyID]; k != nil {
		out.KeySpentNanos = k.spent
		out.KeyLimitNanos = clone(k.limit)
		out.KeyPeriodSpent = k.periods.current(now)
	}
	return out, nil
}

// Bill implements billing.Ledger.
func (s *Store) Bill(ctx context.Context, e billing.Entry) error {
	e, err := billing.PrepareEntry(e)
	if err := s.begin(ctx, err); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.bill(e)
}

// Hold implements billing.Ledger.
func (s *Store) Hold(ctx context.Context, h billing.Hold) error {
	h, err := billing.PrepareHold(h)
	if err := s.begin(ctx, err); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if old := s.holds[h.RequestID]; old != nil {
		return billing.CheckHeld(old.h, h)
	}
	if e, ok := s.entry(h.RequestID); ok {
		if !billing.HoldMatches(h, e) {
			return billing.ErrLedgerCollision
		}
		return nil // billed already: a late retry of the Hold
	}
	s.holds[h.RequestID] = &held{h: h}
	return nil
}

// Price implements billing.Ledger. Without a hold, the priced entry gets
// one due at once (Reconcile settles it).
func (s *Store) Price(ctx context.Context, e billing.Entry) error {
	e, err := billing.PrepareEntry(e)
	if err := s.begin(ctx, err); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if old, ok := s.entry(e.RequestID); ok {
		return billing.CheckBilled(old, e)
	}
	h := s.holds[e.RequestID]
	if h == nil {
		h = &held{h: billing.Hold{RequestID: e.RequestID, Project: e.Project, KeyID: e.KeyID, Model: e.Model, At: e.At, Deadline: s.opts.Now().UTC().Round(0)}}
		s.holds[e.RequestID] = h
	}
	if err := billing.CheckPriced(h.h, h.priced, e); err != nil {
		return err
	}
	h.entry = e
	h.priced = &h.entry
	return nil
}

// bill applies e once; s.mu is held.
func (s *Store) bill(e billing.Entry) error {
	if old, ok := s.entry(e.RequestID); ok {
		return billing.CheckBilled(old, e)
	}
	if h := s.holds[e.RequestID]; h != nil {
		if err := billing.CheckPriced(h.h, h.priced, e); err != nil {
			return err
		}
		delete(s.holds, e.RequestID)
	}
	i := len(s.recs)
	s.recs = append(s.recs, s.pack(e))
	s.entries[e.RequestID] = i
	s.byProject[e.Project] = append(s.byProject[e.Project], i)
	a := s.acct(e.Project)
	a.spent += e.CostNanos
	a.periods.add(e.At, e.CostNanos)
	k := a.key(e.KeyID)
	k.spent += e.CostNanos
	k.periods.add(e.At, e.CostNanos)
	return nil
}

// Unhold implements billing.Ledger.
func (s *Store) Unhold(ctx context.Context, project, requestID string) error {
	if err := s.begin(ctx, billing.ValidateUnhold(project, requestID)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if h := s.holds[requestID]; h != nil && h.priced == nil && h.h.Project == project {
		delete(s.holds, requestID)
	}
	return nil
}

// Reconcile implements billing.Reconciler.
func (s *Store) Reconcile(ctx context.Context, now time.Time, apply bool) (billing.Reconciliation, error) {
	if err := s.begin(ctx, nil); err != nil {
		return billing.Reconciliation{}, err
	}
	defer s.mu.Unlock()
	due := make([]*held, 0)
	for _, h := range s.holds {
		if h.h.Deadline.Before(now) {
			due = append(due, h)
		}
	}
	slices.SortFunc(due, func(a, b *held) int {
		return cmp.Or(a.h.Deadline.Compare(b.h.Deadline), cmp.Compare(a.h.RequestID, b.h.RequestID))
	})
	var r billing.Reconciliation
	for _, h := range due {
		if h.priced != nil {
			if apply {
				if err := s.bill(*h.priced); err != nil {
					r.Skipped = append(r.Skipped, billing.Skip{RequestID: h.h.RequestID, Project: h.h.Project, Reason: err.Error()})
					continue
				}
			}
			r.Settled = append(r.Settled, *h.priced)
			continue
		}
		r.WrittenOff = append(r.WrittenOff, h.h)
		if apply {
			delete(s.holds, h.h.RequestID)
		}
	}
	return r, nil
}

// Entry implements billing.Ledger.
func (s *Store) Entry(ctx context.Context, requestID string) (billing.Entry, error) {
	if err := s.begin(ctx, billing.ValidateID("request id", requestID)); err != nil {
		return billing.Entry{}, err
	}
	defer s.mu.Unlock()
	e, ok := s.entry(requestID)
	if !ok {
		return billing.Entry{}, billing.ErrNotFound
	}
	return e, nil
}

// Totals implements billing.Ledger.
func (s *Store) Totals(ctx context.Context, project string, from, to time.Time) (billing.Totals, error) {
	if err := s.begin(ctx, billing.ValidateID("project", project)); err != nil {
		return billing.Totals{}, err
	}
	defer s.mu.Unlock()
	t := billing.NewTotals()
	for _, i := range s.byProject[project] {
		if e := s.unpack("", s.recs[i]); billing.InPeriod(e, from, to) {
			t.Add(e)
		}
	}
	return t, nil
}

// TotalsPage implements billing.Ledger: the project's entries in billing
// order, which only grows at its end; the cursor is the number of them
// read (After, in decimal; Shard is 0), and limit counts the entries of
// the range.
func (s *Store) TotalsPage(ctx context.Context, project string, from, to time.Time, limit int, cur billing.TotalsCursor) (billing.Totals, billing.TotalsCursor, bool, error) {
	if err := s.begin(ctx, billing.ValidateID("project", project)); err != nil {
		return billing.Totals{}, billing.TotalsCursor{}, false, err
	}
	defer s.mu.Unlock()
	if limit < 1 {
		return billing.Totals{}, billing.TotalsCursor{}, false, fmt.Errorf("%w: limit %d, want at least 1", billing.ErrInvalid, limit)
	}
	idx := s.byProject[project]
	pos := 0
	if cur.After != "" {
		n, err := strconv.Atoi(cur.After)
		if err != nil || n < 0 || n > len(idx) || strconv.Itoa(n) != cur.After {
			cur.Shard = -1
		}
		pos = n
	}
	if cur.Shard != 0 {
		return billing.Totals{}, billing.TotalsCursor{}, false, fmt.Errorf("%w: a cursor outside this range", billing.ErrInvalid)
	}
	t := billing.NewTotals()
	for ; pos < len(idx) && limit > 0; pos++ {
		if e := s.unpack("", s.recs[idx[pos]]); billing.InPeriod(e, from, to) {
			t.Add(e)
			limit--
		}
	}
	if pos == len(idx) {
		return t, billing.TotalsCursor{}, true, nil
	}
	return t, billing.TotalsCursor{After: strconv.Itoa(pos)}, false, nil
}

// Feedback implements billing.Ledger.
func (s *Store) Feedback(ctx context.Context, f billing.Feedback) error {
	if err := s.begin(ctx, billing.ValidateFeedback(f)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	now := billing.FeedbackTime(f, s.opts.Now)
	byUser := s.feedback[f.RequestID]
	if byUser == nil {
		byUser = map[string]billing.Feedback{}
		s.feedback[f.RequestID] = byUser
	}
	f.CreatedAt = now
	if old, ok := byUser[f.EndUser]; ok {
		f.CreatedAt = old.CreatedAt
	}
	f.UpdatedAt = now
	f.Score = clone(f.Score)
	byUser[f.EndUser] = f
	return nil
}

// Feedbacks implements billing.Ledger.
func (s *Store) Feedbacks(ctx context.Context, requestID string) ([]billing.Feedback, error) {
	if err := s.begin(ctx, billing.ValidateID("request id", requestID)); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []billing.Feedback
	for _, f := range s.feedback[requestID] {
		f.Score = clone(f.Score)
		out = append(out, f)
	}
	billing.SortFeedbacks(out)
	return out, nil
}

// SetBalance implements billing.Ledger.
func (s *Store) SetBalance(ctx context.Context, project string, remaining *int64) error {
	if err := s.begin(ctx, billing.ValidateID("project", project)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	a := s.acct(project)
	a.creditSet = true
	a.credit = billing.Credit(a.spent, remaining)
	return nil
}

// SetKeyLimit implements billing.Ledger.
func (s *Store) SetKeyLimit(ctx context.Context, project, keyID string, limit *int64) error {
	if err := s.begin(ctx, billing.ValidateProjectKey(project, keyID)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := s.acct(project).key(keyID)
	k.limitSet = true
	k.limit = clone(limit)
	return nil
}

// Seed implements billing.Ledger.
func (s *Store) Seed(ctx context.Context, project string, balance *int64, keyLimits map[string]*int64) error {
	ids, err := billing.ValidateSeed(project, keyLimits)
	if err := s.begin(ctx, err); err != nil {
		return err
	}
	defer s.mu.Unlock()
	a := s.acct(project)
	a.created = true
	if !a.creditSet {
		a.creditSet = true
		a.credit = clone(balance)
	}
	for _, id := range ids {
		if k := a.key(id); !k.limitSet {
			k.limitSet = true
			k.limit = clone(keyLimits[id])
		}
	}
	return nil
}

// Lookup implements billing.KeyStore.
func (s *Store) Lookup(ctx context.Context, hash string) (billing.KeyRecord, error) {
	if err := s.begin(ctx, nil); err != nil {
		return billing.KeyRecord{}, err
	}
	defer s.mu.Unlock()
	rec, ok := s.keys[hash]
	switch {
	case !ok:
		return billing.KeyRecord{}, billing.ErrUnknownKey
	case rec.Revoked:
		return rec, billing.ErrKeyRevoked
	}
	return rec, nil
}

// Issue implements billing.KeyStore.
func (s *Store) Issue(ctx context.Context, project string) (string, billing.KeyRecord, error) {
	if err := s.begin(ctx, billing.ValidateID("project", project)); err != nil {
		return "", billing.KeyRecord{}, err
	}
	defer s.mu.Unlock()
	if a := s.accounts[project]; a == nil || !a.created {
		return "", billing.KeyRecord{}, billing.ErrUnknownProject
	}
	for {
		raw, rec := billing.NewKey(s.opts.Pepper, project, s.opts.Now())
		if _, taken := s.keys[rec.Hash]; taken {
			continue
		}
		if _, taken := s.keyIDs[rec.KeyID]; taken {
			continue
		}
		s.keys[rec.Hash] = rec
		s.keyIDs[rec.KeyID] = rec.Hash
		return raw, rec, nil
	}
}

// Revoke implements billing.KeyStore.
func (s *Store) Revoke(ctx context.Context, keyID string) error {
	if err := s.begin(ctx, nil); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.updateKey(keyID, func(rec *billing.KeyRecord) { rec.Revoked = true })
}

// updateKey applies f to the record of the key keyID. s.mu is held.
func (s *Store) updateKey(keyID string, f func(rec *billing.KeyRecord)) error {
	hash, ok := s.keyIDs[keyID]
	if !ok {
		return billing.ErrUnknownKey
	}
	rec := s.keys[hash]
	f(&rec)
	s.keys[hash] = rec
	return nil
}

// SetProjectRates implements billing.KeyStore.
func (s *Store) SetProjectRates(ctx context.Context, project string, r billing.Rates) error {
	if err := s.begin(ctx, billing.ValidateRates(r)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	a := s.accounts[project]
	if a == nil || !a.created {
		return billing.ErrUnknownProject
	}
	a.rates = cloneRates(r)
	return nil
}

func cloneRates(r billing.Rates) billing.Rates {
	if r.Budget != nil {
		b := *r.Budget
		r.Budget = &b
	}
	return r
}

// SetKeyRates implements billing.KeyStore.
func (s *Store) SetKeyRates(ctx context.Context, keyID string, r billing.Rates) error {
	if err := s.begin(ctx, billing.ValidateRates(r)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.updateKey(keyID, func(rec *billing.KeyRecord) { rec.Rates = cloneRates(r) })
}

// CreateProject implements billing.KeyStore.
func (s *Store) CreateProject(ctx context.Context, id string, balance *int64) error {
	if err := s.begin(ctx, billing.ValidateID("project", id)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	a := s.acct(id)
	if a.created {
		return billing.ErrProjectExists
	}
	a.created = true
	a.creditSet = true
	a.credit = clone(balance)
	return nil
}

// ImportKey implements billing.KeyStore.
func (s *Store) ImportKey(ctx context.Context, project, hash, keyID string) error {
	if err := s.begin(ctx, billing.ValidateImportKey(project, hash, keyID)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if rec, ok := s.keys[hash]; ok {
		return billing.CheckImported(rec, project, keyID)
	}
	if other, ok := s.keyIDs[keyID]; ok && other != hash {
		return billing.ErrKeyConflict
	}
	s.keys[hash] = billing.KeyRecord{Hash: hash, Project: project, KeyID: keyID, CreatedAt: s.opts.Now().UTC().Round(0)}
	s.keyIDs[keyID] = hash
	return nil
}

// ProjectExists implements billing.KeyStore.
func (s *Store) ProjectExists(ctx context.Context, project string) (bool, error) {
	if err := s.begin(ctx, nil); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	a := s.accounts[project]
	return a != nil && a.created, nil
}

// KeyProject implements billing.KeyStore.
func (s *Store) KeyProject(ctx context.Context, keyID string) (string, error) {
	if err := s.begin(ctx, nil); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	hash, ok := s.keyIDs[keyID]
	if !ok {
		return "", billing.ErrUnknownKey
	}
	return s.keys[hash].Project, nil
}

func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// rec is a billed entry as the store keeps it: no pointers, so that the
// collector does not scan the ledger however long it grows (one
// billing.Entry holds five strings and a time). The request id is the
// key of Store.entries; the other strings are indices in Store.names, which
// holds each distinct one once.
type rec struct {
	project, key, model, provider uint32
	nsec                          int32
	sec                           int64 // At, in seconds since 1970 (UTC)
	promptTokens                  int64
	completionTokens              int64
	costNanos                     int64
}

// entry returns the billed entry of requestID; s.mu is held.
func (s *Store) entry(requestID string) (billing.Entry, bool) {
	i, ok := s.entries[requestID]
	if !ok {
		return billing.Entry{}, false
	}
	return s.unpack(requestID, s.recs[i]), true
}

// pack returns e as a rec (e normalized); s.mu is held.
func (s *Store) pack(e billing.Entry) rec {
	return rec{
		project: s.name(e.Project), key: s.name(e.KeyID), model: s.name(e.Model), provider: s.name(e.Provider),
		sec: e.At.Unix(), nsec: int32(e.At.Nanosecond()),
		promptTokens: int64(e.PromptTokens), completionTokens: int64(e.CompletionTokens), costNanos: e.CostNanos,
	}
}

// unpack returns r as the Entry of requestID; s.mu is held.
func (s *Store) unpack(requestID string, r rec) billing.Entry {
	return billing.Entry{
		RequestID: requestID, Project: s.names[r.project], KeyID: s.names[r.key],
		Model: s.names[r.model], Provider: s.names[r.provider],
		PromptTokens: int(r.promptTokens), CompletionTokens: int(r.completionTokens), CostNanos: r.costNanos,
		At: time.Unix(r.sec, int64(r.nsec)).UTC(),
	}
}

// name returns the index of v in s.names, adding it; s.mu is held.
func (s *Store) name(v string) uint32 {
	if i, ok := s.nameIDs[v]; ok {
		return i
	}
	i := uint32(len(s.names))
	s.names = append(s.names, v)
	s.nameIDs[v] = i
	return i
}
