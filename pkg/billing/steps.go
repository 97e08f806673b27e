package billing

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// The steps every Ledger and KeyStore takes whatever its storage: the
// checks that open each call and the decisions that compare a call with
// what the store already holds. An implementation keeps only how it reads
// and writes.

// PrepareEntry opens Bill and Price: e checked (ValidateEntry) and as
// ledgers store it (NormalizeEntry).
func PrepareEntry(e Entry) (Entry, error) {
	if err := ValidateEntry(e); err != nil {
		return Entry{}, err
	}
	return NormalizeEntry(e), nil
}

// PrepareHold opens Hold: h checked (ValidateHold) and as ledgers store it
// (NormalizeHold).
func PrepareHold(h Hold) (Hold, error) {
	if err := ValidateHold(h); err != nil {
		return Hold{}, err
	}
	return NormalizeHold(h), nil
}

// ValidateUnhold checks the arguments of Unhold.
func ValidateUnhold(project, requestID string) error {
	return errors.Join(ValidateID("project", project), ValidateID("request id", requestID))
}

// ValidateProjectKey checks a project and a key id (SetKeyLimit).
func ValidateProjectKey(project, keyID string) error {
	if err := ValidateID("project", project); err != nil {
		return err
	}
	return ValidateID("key id", keyID)
}

// ValidateImportKey checks the arguments of ImportKey.
func ValidateImportKey(project, hash, keyID string) error {
	if err := ValidateProjectKey(project, keyID); err != nil {
		return err
	}
	return ValidateID("key hash", hash)
}

// ValidateSeed checks the arguments of Seed and returns the key ids of
// keyLimits in order (a store that writes them one by one writes them in
// the same order every time).
func ValidateSeed(project string, keyLimits map[string]*int64) ([]string, error) {
	if err := ValidateID("project", project); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(keyLimits))
	for id := range keyLimits {
		if err := ValidateID("key id", id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// CheckBilled decides a Bill or a Price of a request whose entry the store
// holds already (billed, or priced): nil when e is the same bill (there is
// nothing more to do), ErrLedgerCollision when it is another.
func CheckBilled(old, e Entry) error {
	if !SamePayload(old, e) {
		return ErrLedgerCollision
	}
	return nil
}

// CheckPriced decides a Bill or a Price of a request the store holds a
// hold of (h, and its priced entry when it has one): nil when e bills the
// held request at its price, ErrLedgerCollision otherwise.
func CheckPriced(h Hold, priced *Entry, e Entry) error {
	if !HoldMatches(h, e) || (priced != nil && !SamePayload(*priced, e)) {
		return ErrLedgerCollision
	}
	return nil
}

// CheckHeld decides a Hold of a request the store holds a hold of already:
// nil when it is the same request (a retry), ErrLedgerCollision otherwise.
func CheckHeld(old, h Hold) error {
	if !SameHold(old, h) {
		return ErrLedgerCollision
	}
	return nil
}

// CheckImported decides an ImportKey of a key the store holds already (rec):
// nil when it is the same project's key under the same id,
// ErrKeyConflict otherwise.
func CheckImported(rec KeyRecord, project, keyID string) error {
	if rec.Project != project || rec.KeyID != keyID {
		return ErrKeyConflict
	}
	return nil
}

// Balance is what remains of a credit (nil: unlimited) once spent is
// spent: negative after an overshoot.
func Balance(credit *int64, spent int64) *int64 {
	if credit == nil {
		return nil
	}
	b := *credit - spent
	return &b
}

// Credit is the credit that leaves remaining (nil: unlimited) once spent
// is spent: what SetBalance stores.
func Credit(spent int64, remaining *int64) *int64 {
	if remaining == nil {
		return nil
	}
	c := spent + *remaining
	return &c
}

// InPeriod reports whether e counts in Totals over [from, to).
func InPeriod(e Entry, from, to time.Time) bool {
	return !e.At.Before(from) && e.At.Before(to)
}

// FeedbackTime is the time of a Feedback call: f.UpdatedAt when it is set,
// else now(), in UTC without its monotonic reading.
func FeedbackTime(f Feedback, now func() time.Time) time.Time {
	t := f.UpdatedAt
	if t.IsZero() {
		t = now()
	}
	return t.UTC().Round(0)
}

// SortFeedbacks puts the feedback on a request in the order Feedbacks
// returns it: by EndUser.
func SortFeedbacks(fs []Feedback) {
	slices.SortFunc(fs, func(a, b Feedback) int { return cmp.Compare(a.EndUser, b.EndUser) })
}

// NewKey makes the key Issue stores for project: a fresh raw key (shown
// once) and its record, hashed with pepper, created at now. The store
// checks that neither the hash nor the id is taken.
func NewKey(pepper []byte, project string, now time.Time) (raw string, rec KeyRecord) {
	raw = NewRawKey()
	return raw, KeyRecord{Hash: HashKey(pepper, raw), Project: project, KeyID: NewKeyID(), CreatedAt: now.UTC().Round(0)}
}

// Unavailable wraps a failure to reach the store in ErrUnavailable, with
// the cause.
func Unavailable(cause error) error {
	return fmt.Errorf("%w: %w", ErrUnavailable, cause)
}

// ValidateRates checks a key's rates and budget before they are set.
func ValidateRates(r Rates) error {
	if r.RPM < 0 || r.TPM < 0 {
		return invalid("key rates: rpm and tpm must be >= 0")
	}
	if b := r.Budget; b != nil {
		if _, ok := ParsePeriod(b.Period); !ok || math.IsNaN(b.Amount) || math.IsInf(b.Amount, 0) || b.Amount < 0 {
			return invalid("key budget: want an amount >= 0 and a period of day, week or month")
		}
	}
	return nil
}
