package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Keep stores body under key for the idempotency window, in the same store
// and under the same limits as the answers (a Responses turn kept for
// previous_response_id): a record completed at once. Keys are unique (a
// response id): keeping one again changes nothing. tenant is the project,
// for the memory store's fair shares. ctx bounds the whole Keep: the caller
// gives it the deadline it can wait (a Responses answer waits for its
// turn's Keep before its last bytes).
//
// Keep reports a body kept only when Kept can read it:
//
//   - a body over max_response_bytes is ErrTooLarge, and nothing is written;
//   - a store with no room for it is ErrFull (with ErrUnavailable): the
//     memory store refuses the reservation, or completes the record
//     without the body when the body cannot get its room within the
//     tenant's share; for a store in this process, Keep reads the record
//     back (no cost) to tell;
//   - any other failure is ErrUnavailable. A write that failed may still
//     have landed (its acknowledgement lost): a failed Keep never means
//     "kept", but in that one case Kept may find the body all the same.
//     A reservation that landed without its completion reads as not kept
//     (Kept: ErrNotFound) for the whole window.
//
// Every Keep of a key reserves with the same owner token (keepOwner), so
// that a caller that calls Keep again after a failure halfway (its
// reservation landed, its answer lost, or its Complete failed) finds the
// record its own and completes it.
func (s *Service) Keep(ctx context.Context, key, tenant string, body []byte) error {
	if int64(len(body)) > s.cfg.MaxResponseBytes {
		return ErrTooLarge
	}
	now := s.now()
	owner := keepOwner(key)
	rec := &Record{
		Key: key, Fingerprint: "kept", State: StateInProgress, Owner: owner, Started: true,
		LeaseUntil: now.Add(s.cfg.Lease), ExpiresAt: now.Add(s.cfg.Window), Tenant: tenant,
	}
	existing, err := s.store.Reserve(ctx, rec, now)
	switch {
	case err != nil:
		return unavailable(err)
	case existing != nil && existing.State == StateCompleted && existing.Answer != nil:
		return nil // kept already (an earlier attempt whose answer was lost)
	case existing != nil && (existing.Owner != owner || existing.State != StateInProgress):
		return unavailable(fmt.Errorf("the kept record is in state %s under another owner, or without its body", existing.State))
	}
	err = s.store.Complete(ctx, key, owner, &Answer{Head: Head{Status: 200}, Body: body})
	if errors.Is(err, ErrNotOwner) {
		// An earlier attempt's Complete may have landed meanwhile.
		if got, lerr := s.store.Load(ctx, key, now); lerr == nil && got.State == StateCompleted && got.Owner == owner && got.Answer != nil {
			return nil
		}
	}
	if err != nil {
		return unavailable(err)
	}
	if s.inProcess {
		// The memory store completes a record without its answer when the
		// answer cannot get its room.
		if got, err := s.store.Load(ctx, key, now); err != nil || got.Answer == nil {
			return unavailable(ErrFull)
		}
	}
	return nil
}

// keepOwner is the owner token of every Keep of key.
func keepOwner(key string) string {
	h := sha256.Sum256([]byte("idempotency keep\x00" + key))
	return hex.EncodeToString(h[:16])
}

// Kept returns what Keep stored under key, or ErrNotFound (never kept, its
// window ended, or the memory store dropped it to make room).
func (s *Service) Kept(ctx context.Context, key string) ([]byte, error) {
	rec, err := s.load(ctx, key, s.now())
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, ErrNotFound
	case err != nil:
		return nil, unavailable(err)
	case rec.State != StateCompleted || rec.Answer == nil || rec.Fingerprint != "kept":
		return nil, ErrNotFound
	}
	return rec.Answer.Body, nil
}

// ErrTooLarge: the blob is larger than max_response_bytes; nothing is kept.
var ErrTooLarge = errors.New("idempotency: larger than max_response_bytes")
