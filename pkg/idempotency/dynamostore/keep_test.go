//go:build integration

package dynamostore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/testclock"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/storetest"
)

// TestKeepRetryAfterFailedAttempt: a Keep (a Responses turn kept for
// previous_response_id) whose attempt failed halfway (its Complete could not
// reach the store, or its reserving put landed with its answer lost) reads
// as not kept, and is finished by a later Keep of the same key, should its
// caller make one: every attempt for a key has the same owner token, and
// finds the record its own (with a token of its own, it would find a
// started record it could never take over).
func TestKeepRetryAfterFailedAttempt(t *testing.T) {
	cases := []struct {
		name string
		op   string
		x    fault
	}{
		{"complete_cut", "UpdateItem", cut},            // Reserve landed, Complete failed
		{"reserve_answer_lost", "PutItem", dropAnswer}, // Reserve landed, its answer lost
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			c := testclock.New(storetest.Base())
			f := newFaults()
			svc := idempotency.New(faultyStore(t, f), idempotency.Config{Lease: 30 * time.Second}, c.Now, nil)
			key := storetest.Key()
			body := []byte(`{"response":{"id":"resp_1"},"messages":[]}`)

			f.set(tc.op, tc.x, true) // one failure, then the store is healthy
			if err := svc.Keep(ctx, key, "proj", body); !errors.Is(err, idempotency.ErrUnavailable) {
				t.Fatalf("first Keep with %s %v: %v, want ErrUnavailable", tc.op, tc.x, err)
			}
			if _, err := svc.Kept(ctx, key); !errors.Is(err, idempotency.ErrNotFound) {
				t.Errorf("Kept after the failed attempt: %v, want ErrNotFound", err)
			}
			// Give the failed attempt's lease all the time it needs to lapse.
			c.Advance(10 * time.Minute)
			for i := range 3 {
				if err := svc.Keep(ctx, key, "proj", body); err != nil {
					t.Errorf("Keep retry %d, %v after the failed attempt (its lease long lapsed): %v", i+1, 10*time.Minute, err)
				}
			}
			got, err := svc.Kept(ctx, key)
			if err != nil || string(got) != string(body) {
				t.Fatalf("Kept after the retries: %q, %v; want the turn kept", got, err)
			}
		})
	}
}
