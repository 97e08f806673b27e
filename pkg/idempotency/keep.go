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
// previous_response_id "follows the same limit"): a record completed at
// once. Keys are unique (a response id): keeping one again changes
// nothing. tenant is the project, for the memory store's fair shares.
//
// Every attempt for a key reserves with the same owner token (keepOwner),
// so that an attempt that failed halfway (its reservation landed, its
// answer lost or its Complete failed) leaves a record the next attempt
// recognises as its own and completes: with a token of its own, the next
// attempt found a started record it could never take over, and the turn
// was lost for the whole window.
func (s *Service) Keep(ctx context.Context, key, tenant string, body []byte) error {
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
	case existing != nil && existing.State == StateCompleted:
		return nil // kept already (an earlier attempt whose answer was lost)
	case existing != nil && (existing.Owner != owner || existing.State != StateInProgress):
		return unavailable(fmt.Errorf("the kept record is in state %s under another owner", existing.State))
	}
	err = s.store.Complete(ctx, key, owner, &Answer{Head: Head{Status: 200}, Body: body})
	if errors.Is(err, ErrNotOwner) {
		// An earlier attempt's Complete may have landed meanwhile.
		if got, lerr := s.store.Load(ctx, key, now); lerr == nil && got.State == StateCompleted && got.Owner == owner {
			return nil
		}
	}
	if err != nil {
		return unavailable(err)
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
