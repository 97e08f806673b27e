package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
)

// Keep stores a blob for the window; Kept reads it back until the window
// ends; keeping the same key again is harmless.
func TestKeep(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	svc := idempotency.New(memstore.New(1<<20), idempotency.Config{Window: time.Hour, Lease: time.Second}, clock, nil)
	if err := svc.Keep(ctx, "turn-1", "proj", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := svc.Keep(ctx, "turn-1", "proj", []byte(`{"a":1}`)); err != nil {
		t.Fatalf("keeping again: %v", err)
	}
	got, err := svc.Kept(ctx, "turn-1")
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("Kept: %q %v", got, err)
	}
	if _, err := svc.Kept(ctx, "turn-2"); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("an unknown key: %v", err)
	}
	now = now.Add(time.Hour + time.Second)
	if _, err := svc.Kept(ctx, "turn-1"); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("after the window: %v", err)
	}
}
