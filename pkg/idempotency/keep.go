package idempotency

import (
	"context"
	"errors"
)

// Keep stores body under key for the idempotency window, in the same store
// and under the same limits as the answers (a Responses turn kept for
// previous_response_id "follows the same limit"): a record completed at
// once. Keys are unique (a response id): keeping one again changes
// nothing. tenant is the project, for the memory store's fair shares.
func (s *Service) Keep(ctx context.Context, key, tenant string, body []byte) error {
	now := s.now()
	owner := newToken()
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
	case existing != nil:
		// An earlier attempt reserved it and died before completing: its
		// lease keeps it until it lapses; the caller retries.
		return unavailable(errors.New("the kept record is still being written"))
	}
	if err := s.store.Complete(ctx, key, owner, &Answer{Head: Head{Status: 200}, Body: body}); err != nil {
		return unavailable(err)
	}
	return nil
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
