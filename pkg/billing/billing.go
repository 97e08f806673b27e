// Package billing is buzzgate's money: prepaid project balances, per-key
// spend limits, the usage ledger (one entry per billed answer, keyed by its
// x-request-id), feedback on answers, and API keys stored hashed with a
// pepper (keys.go).
//
// # Exactly once
//
// Spend is never an unguarded increment (LESSONS.md, "Spend counted twice").
// A Ledger records an Entry once, on a write that is conditional on the
// entry's RequestID; a second Bill of the same entry (a finalizer that runs
// twice, a retry after a crash between two steps, twenty goroutines at once)
// changes nothing, and a second Bill of the same RequestID with a different
// payload is ErrLedgerCollision, never a silent drop (LESSONS.md, "Dropped
// ledger rows"). The project's spend and the key's spend grow by the entry's
// cost exactly once. How each implementation gets there is in its package
// doc (memledger: a mutex; dynamoledger: single-item conditional writes and
// an epoch fence, no transactions).
//
// Who bills: before any provider is called the request's Hold is written
// (no hold, no provider call: 503 billing_unavailable); once the answering
// provider's usage is known, Price makes its cost durable before the
// answer's last bytes go out, and Bill applies it, with the request's own
// x-request-id and accepted time (so that a Bill run again sends the same
// Entry); Unhold closes a hold that has nothing to bill. Whatever a dead
// process or an unreachable store leaves, Reconcile (Reconciler) finishes
// once the hold's deadline passed: a priced entry is billed, an unpriced
// hold is written off at zero cost. A request refused before any provider
// call (400, 401, 402, 404, 413, 429 capacity, 503 no live provider) is not
// billed at all, and neither is an Idempotency-Key replay, a waiter or a
// joiner: they serve an answer that was billed once already.
//
// # Money
//
// Amounts are int64 nano-dollars (1e-9 USD): costs such as 1.4e-05 USD are
// exact integers there (14,000), sums never drift, and int64 holds ±9.2e9
// USD. Floats (USD) exist only at the edges: USDToNanos and NanosToUSD.
//
// # Balances, limits and the overshoot bound
//
// The 402 decision (Account, then Account.Check) reads the balance without
// locking it against the Bills running at the same time, so N requests that
// pass the check together against a nearly spent balance all run and are
// all billed: the balance can go negative by at most the cost of the
// requests in flight when it ran out (the overshoot is bounded by the
// requests in flight). The spend itself is never wrong: it equals the sum of
// the ledger's entries. Once it is spent, every new request is refused.
package billing

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// Bounds of the strings a Ledger or KeyStore accepts.
const (
	MaxIDBytes      = catalog.MaxNameBytes // RequestID, Project, KeyID, Model, Provider, EndUser (the config's names fit)
	MaxLabelBytes   = 128                  // Feedback.Label
	MaxCommentBytes = 4096                 // Feedback.Comment
	MaxScore        = 1e9                  // |Feedback.Score|
)

// Entry is one billed request in the usage ledger.
type Entry struct {
	// RequestID is the request's x-request-id: the ledger's key.
	RequestID string
	Project   string
	KeyID     string
	// Model is the model the client asked for; Provider the one that
	// answered.
	Model            string
	Provider         string
	PromptTokens     int
	CompletionTokens int
	// CostNanos is the answer's cost in nano-dollars (>= 0).
	CostNanos int64
	// At is when the request was accepted; it is part of the payload, so
	// a Bill run again must carry the same At. Ledgers keep it to the
	// nanosecond, in UTC.
	At time.Time
}

// Account is what the 402 decision needs.
type Account struct {
	Project string
	// BalanceNanos is the project's remaining prepaid balance (credit minus
	// spend; negative after an overshoot); nil means unlimited.
	BalanceNanos *int64
	// SpentNanos is everything the project has been billed.
	SpentNanos int64
	KeyID      string
	// KeySpentNanos is everything the key has been billed.
	KeySpentNanos int64
	// KeyLimitNanos is the key's spend limit; nil means none.
	KeyLimitNanos *int64
	// PeriodSpent and KeyPeriodSpent are the project's and the key's spend
	// in the current UTC day, week and month (indexed by Period), at the
	// ledger's clock.
	PeriodSpent, KeyPeriodSpent [NumPeriods]int64
	// ProjectRates are the project's rates and budget set by the admin
	// tool (SetProjectRates); a config project's come from the config.
	ProjectRates Rates
}

// Period is a budget's calendar period, in UTC.
type Period int

// The periods: a day, an ISO week (Monday to Sunday), a month.
const (
	Day Period = iota
	Week
	Month
	NumPeriods
)

// ParsePeriod reads a budget period's name: day, week or month.
func ParsePeriod(name string) (Period, bool) {
	switch name {
	case "day":
		return Day, true
	case "week":
		return Week, true
	case "month":
		return Month, true
	}
	return 0, false
}

func (p Period) String() string {
	return [...]string{"day", "week", "month"}[p]
}

// Label names the period of p that holds t (UTC): 2026-12-03, 2026-W49,
// 2026-12. A bill counts in the periods of its entry's At.
func (p Period) Label(t time.Time) string {
	t = t.UTC()
	switch p {
	case Day:
		return t.Format("2006-01-02")
	case Week:
		y, w := t.ISOWeek()
		return fmt.Sprintf("%04d-W%02d", y, w)
	}
	return t.Format("2006-01")
}

// Labels are the labels of the day, week and month that hold t, as Label
// gives them, from a one-day cache: a bill and a balance check need them
// every time, and they change once a day.
func Labels(t time.Time) [NumPeriods]string {
	day := t.Unix()
	if day < 0 {
		day -= 86399
	}
	day /= 86400
	if c := labelCache.Load(); c != nil && c.day == day {
		return c.labels
	}
	var l [NumPeriods]string
	for p := range NumPeriods {
		l[p] = p.Label(t)
	}
	labelCache.Store(&dayLabels{day: day, labels: l})
	return l
}

type dayLabels struct {
	day    int64
	labels [NumPeriods]string
}

var labelCache atomic.Pointer[dayLabels]

// Start is when the period of p that holds t began; End when it ends.
func (p Period) Start(t time.Time) time.Time {
	t = t.UTC()
	d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch p {
	case Week:
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case Month:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return d
}

// End is when the period of p that holds t ends (the next one's Start).
func (p Period) End(t time.Time) time.Time {
	s := p.Start(t)
	switch p {
	case Week:
		return s.AddDate(0, 0, 7)
	case Month:
		return s.AddDate(0, 1, 0)
	}
	return s.AddDate(0, 0, 1)
}

// Check is the 402 decision: ErrInsufficientBalance when the balance is
// spent (<= 0), ErrKeyLimitReached when the key's spend has reached its
// limit, nil otherwise.
func (a Account) Check() error {
	if a.BalanceNanos != nil && *a.BalanceNanos <= 0 {
		return ErrInsufficientBalance
	}
	if a.KeyLimitNanos != nil && a.KeySpentNanos >= *a.KeyLimitNanos {
		return ErrKeyLimitReached
	}
	return nil
}

// Usage sums ledger entries.
type Usage struct {
	Requests         int64
	PromptTokens     int64
	CompletionTokens int64
	CostNanos        int64
}

// Add adds e to u.
func (u *Usage) Add(e Entry) {
	u.Requests++
	u.PromptTokens += int64(e.PromptTokens)
	u.CompletionTokens += int64(e.CompletionTokens)
	u.CostNanos += e.CostNanos
}

// Totals is the usage of a project over a time range.
type Totals struct {
	Total   Usage
	ByModel map[string]Usage
	ByKey   map[string]Usage
}

// NewTotals returns empty Totals (non-nil maps).
func NewTotals() Totals {
	return Totals{ByModel: map[string]Usage{}, ByKey: map[string]Usage{}}
}

// Add counts e in t.
func (t *Totals) Add(e Entry) {
	t.Total.Add(e)
	m := t.ByModel[e.Model]
	m.Add(e)
	t.ByModel[e.Model] = m
	k := t.ByKey[e.KeyID]
	k.Add(e)
	t.ByKey[e.KeyID] = k
}

// TotalsCursor is where a page of TotalsPage ends, in a ledger's own
// order: its partition (Shard) and, within it, the sort key of the last
// entry read (After; "" when the partition is to be read from its start).
type TotalsCursor struct {
	Shard int
	After string
}

// Feedback is an end user's feedback on an answer. (RequestID, EndUser) is
// its natural key: a second Feedback with the same pair replaces the first
// (CreatedAt stays the first one's).
type Feedback struct {
	RequestID string
	EndUser   string // may be empty: the project's own feedback
	// Score is optional (nil: none), within ±MaxScore.
	Score   *float64
	Label   string
	Comment string
	// CreatedAt and UpdatedAt are set by the ledger (Feedbacks returns
	// them); in a Feedback call UpdatedAt, when not zero, is the time of
	// the update (tests), otherwise the ledger's clock.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Ledger keeps balances, key spend, the usage ledger and feedback. It is
// safe for concurrent use. Every implementation passes billingtest.Run.
type Ledger interface {
	// Account returns the project's remaining balance and spend, and the
	// key's spend and limit, for the 402 decision (Account.Check). A
	// project or key the ledger has never seen is unlimited with nothing
	// spent.
	Account(ctx context.Context, project, keyID string) (Account, error)
	// Bill records e exactly once: the entry is written conditionally on
	// its RequestID, and the project's spend and the key's spend grow by
	// e.CostNanos exactly once, however often Bill is called for the same
	// entry, concurrently or after a failure at any step. An error means
	// the bill may be incomplete: call Bill again with the same entry (or
	// leave it to Reconcile, once it is priced). A RequestID already billed
	// (or priced, or held) as another request is ErrLedgerCollision. Once
	// the entry is applied, Bill closes the request's hold.
	Bill(ctx context.Context, e Entry) error
	// Entry returns the ledger entry of a request, or ErrNotFound.
	Entry(ctx context.Context, requestID string) (Entry, error)
	// Totals sums the ledger entries of a project with At in [from, to),
	// in total, by model and by key.
	Totals(ctx context.Context, project string, from, to time.Time) (Totals, error)
	// TotalsPage is Totals over one page of the range: at most limit
	// (>= 1) ledger entries, read in the ledger's own order from after
	// cursor (the zero TotalsCursor: from the start). next is where the
	// following page starts; done reports that the range has no entry
	// left. The sum of a range's pages is its Totals. A cursor this ledger
	// could not have returned for this project and range is ErrInvalid.
	TotalsPage(ctx context.Context, project string, from, to time.Time, limit int, cursor TotalsCursor) (t Totals, next TotalsCursor, done bool, err error)
	// Feedback upserts feedback on (RequestID, EndUser).
	Feedback(ctx context.Context, f Feedback) error
	// Feedbacks returns the feedback on a request, by EndUser.
	Feedbacks(ctx context.Context, requestID string) ([]Feedback, error)

	// SetBalance sets the project's remaining prepaid balance (nil:
	// unlimited), atomically against concurrent Bills: the credit becomes
	// the spend so far plus remainingNanos.
	SetBalance(ctx context.Context, project string, remainingNanos *int64) error
	// SetKeyLimit sets the key's spend limit (nil: none).
	SetKeyLimit(ctx context.Context, project, keyID string, limitNanos *int64) error
	// Seed applies a configured account: it marks the project as existing
	// and sets its balance (nil: unlimited) and each key's limit (nil:
	// none) only where the ledger has none yet. So the config seeds an
	// account the first time, and from then on the ledger is the truth
	// (SetBalance and SetKeyLimit change it; a changed config does not).
	Seed(ctx context.Context, project string, balanceNanos *int64, keyLimits map[string]*int64) error

	// Hold records the hold of a request before any provider is called,
	// idempotent on RequestID: the same request again is nil, another one
	// ErrLedgerCollision. An error means no provider may be called (503
	// billing_unavailable).
	Hold(ctx context.Context, h Hold) error
	// Price makes the answer's cost durable, usually with one write (the
	// entry, not yet applied), before the answer's last bytes go out.
	// Idempotent like Bill. Bill finishes it; so does Reconcile after the
	// hold's deadline. Bill alone (without Price, or without Hold) works
	// too.
	Price(ctx context.Context, e Entry) error
	// Unhold removes the hold of a request that ended with nothing to bill.
	// A hold already priced or billed is left alone (nil), and so is an
	// unknown one. Idempotent.
	Unhold(ctx context.Context, project, requestID string) error
}

// Hold is the promise, written before any provider is called, that the
// request will be billed or closed: no hold, no provider call. Reconcile
// finds every hold past its Deadline.
type Hold struct {
	RequestID, Project, KeyID, Model string
	// At is when the request was accepted: the Entry's At.
	At time.Time
	// Deadline is when Reconcile may settle the hold (the request's own
	// Bill gets until then).
	Deadline time.Time
}

// SameHold reports whether two holds of one RequestID are the same request
// (the collision check of Hold; the Deadline is not compared, so a retried
// Hold with a later deadline is the same hold).
func SameHold(a, b Hold) bool {
	return a.RequestID == b.RequestID && a.Project == b.Project && a.KeyID == b.KeyID &&
		a.Model == b.Model && a.At.Equal(b.At)
}

// HoldMatches reports whether e is the bill of the request that h holds.
func HoldMatches(h Hold, e Entry) bool {
	return h.RequestID == e.RequestID && h.Project == e.Project && h.KeyID == e.KeyID &&
		h.Model == e.Model && h.At.Equal(e.At)
}

// Reconciler settles what requests left behind; both ledgers implement it.
type Reconciler interface {
	// Reconcile finds, across all projects, every hold whose Deadline is
	// before now: a priced one (Price, or a Bill that did not finish) is
	// settled (Bill), an unpriced one is written off at zero cost (the
	// hold is removed and no entry is written, so a late Bill of that
	// request still bills normally). Without apply it only reports. It is
	// safe to run concurrently with Bills and with itself: nothing is
	// counted twice. A hold it cannot settle is skipped and reported, and
	// the run goes on; it stops early only when the store cannot be
	// reached or ctx ends, and then returns what it did so far with the
	// error. It settles as it reads: a long backlog is drained page by
	// page, not read whole first.
	Reconcile(ctx context.Context, now time.Time, apply bool) (Reconciliation, error)
}

// Reconciliation is what a Reconcile found (and, with apply, did).
type Reconciliation struct {
	// Settled are the priced entries applied (without apply: to apply).
	Settled []Entry
	// WrittenOff are the holds past their deadline that never got a price.
	WrittenOff []Hold
	// Skipped are the holds this run could not settle or write off (an
	// entry it cannot read, a bill refused, the store failing on that one
	// item): left as they are for the next run.
	Skipped []Skip
}

// Skip is a hold a Reconcile left, and why.
type Skip struct {
	RequestID string
	// Project is the hold's, when its entry could be read ("" if not).
	Project string
	Reason  string
}

// NanosPerUSD is the number of nano-dollars in a dollar.
const NanosPerUSD = 1_000_000_000

// USDToNanos converts dollars to nano-dollars, rounding to the nearest; NaN
// is 0 and values beyond int64 saturate.
func USDToNanos(usd float64) int64 {
	n := math.Round(usd * NanosPerUSD)
	switch {
	case math.IsNaN(n):
		return 0
	case n >= math.MaxInt64:
		return math.MaxInt64
	case n <= math.MinInt64:
		return math.MinInt64
	}
	return int64(n)
}

// NanosToUSD converts nano-dollars to dollars.
func NanosToUSD(nanos int64) float64 { return float64(nanos) / NanosPerUSD }

// USDPtrToNanos converts an optional amount (nil stays nil: unlimited).
func USDPtrToNanos(usd *float64) *int64 {
	if usd == nil {
		return nil
	}
	n := USDToNanos(*usd)
	return &n
}

// ValidateEntry checks an entry before it is billed.
func ValidateEntry(e Entry) error {
	switch {
	case e.RequestID == "":
		return invalid("entry: empty RequestID")
	case e.Project == "":
		return invalid("entry: empty Project")
	case e.KeyID == "":
		return invalid("entry: empty KeyID")
	case e.CostNanos < 0:
		return invalid("entry: negative CostNanos")
	case e.PromptTokens < 0 || e.CompletionTokens < 0:
		return invalid("entry: negative token count")
	case e.At.IsZero():
		return invalid("entry: zero At")
	case e.At.UTC().Year() < 1 || e.At.UTC().Year() > 9999:
		return invalid("entry: At out of range")
	}
	// An array, not a map: a ledger checks an entry three times a request.
	for _, f := range [...]struct{ name, s string }{{"RequestID", e.RequestID}, {"Project", e.Project}, {"KeyID", e.KeyID}, {"Model", e.Model}, {"Provider", e.Provider}} {
		if len(f.s) > MaxIDBytes {
			return invalid(fmt.Sprintf("entry: %s over %d bytes", f.name, MaxIDBytes))
		}
	}
	return nil
}

// NormalizeEntry returns e as ledgers store it: At in UTC, without its
// monotonic reading.
func NormalizeEntry(e Entry) Entry {
	e.At = e.At.UTC().Round(0)
	return e
}

// SamePayload reports whether two entries of one RequestID are the same
// bill (the collision check).
func SamePayload(a, b Entry) bool {
	a, b = NormalizeEntry(a), NormalizeEntry(b)
	return a.RequestID == b.RequestID && a.Project == b.Project && a.KeyID == b.KeyID &&
		a.Model == b.Model && a.Provider == b.Provider &&
		a.PromptTokens == b.PromptTokens && a.CompletionTokens == b.CompletionTokens &&
		a.CostNanos == b.CostNanos && a.At.Equal(b.At)
}

// ValidateHold checks a hold before it is recorded.
func ValidateHold(h Hold) error {
	e := Entry{RequestID: h.RequestID, Project: h.Project, KeyID: h.KeyID, Model: h.Model, At: h.At}
	if err := ValidateEntry(e); err != nil {
		return invalid("hold" + strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": entry"))
	}
	if h.Deadline.IsZero() || h.Deadline.UTC().Year() < 1 || h.Deadline.UTC().Year() > 9999 {
		return invalid("hold: Deadline zero or out of range")
	}
	return nil
}

// NormalizeHold returns h as ledgers store it: times in UTC, without their
// monotonic reading.
func NormalizeHold(h Hold) Hold {
	h.At, h.Deadline = h.At.UTC().Round(0), h.Deadline.UTC().Round(0)
	return h
}

// ValidateFeedback checks feedback before it is stored.
func ValidateFeedback(f Feedback) error {
	switch {
	case f.RequestID == "":
		return invalid("feedback: empty RequestID")
	case len(f.RequestID) > MaxIDBytes || len(f.EndUser) > MaxIDBytes:
		return invalid(fmt.Sprintf("feedback: RequestID or EndUser over %d bytes", MaxIDBytes))
	case len(f.Label) > MaxLabelBytes:
		return invalid(fmt.Sprintf("feedback: Label over %d bytes", MaxLabelBytes))
	case len(f.Comment) > MaxCommentBytes:
		return invalid(fmt.Sprintf("feedback: Comment over %d bytes", MaxCommentBytes))
	case f.Score != nil && !(math.Abs(*f.Score) <= MaxScore):
		return invalid("feedback: Score is not a finite number within ±1e9")
	}
	return nil
}

// ValidateID checks a project or key id.
func ValidateID(what, id string) error {
	if id == "" {
		return invalid(what + ": empty")
	}
	if len(id) > MaxIDBytes {
		return invalid(fmt.Sprintf("%s: over %d bytes", what, MaxIDBytes))
	}
	return nil
}
