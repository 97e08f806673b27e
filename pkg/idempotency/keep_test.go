package idempotency_test

import (
	"context"
	"errors"
	"strings"
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

// A kept blob is an answer like any other: one over max_response_bytes is
// refused with ErrTooLarge and nothing is stored.
func TestKeepTooLarge(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(1 << 20)
	svc := idempotency.New(store, idempotency.Config{MaxResponseBytes: 100}, nil, nil)
	big := []byte(`"` + strings.Repeat("x", 99) + `"`) // 101 bytes
	if err := svc.Keep(ctx, "turn-big", "proj", big); !errors.Is(err, idempotency.ErrTooLarge) {
		t.Errorf("Keep of %d bytes with max_response_bytes 100: %v, want ErrTooLarge", len(big), err)
	}
	if _, err := svc.Kept(ctx, "turn-big"); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("Kept of the refused blob: %v, want ErrNotFound", err)
	}
	if n := store.Len(); n != 0 {
		t.Errorf("the store holds %d records after the refusal, want 0", n)
	}
	fits := big[:100]
	if err := svc.Keep(ctx, "turn-fits", "proj", fits); err != nil {
		t.Errorf("Keep of exactly max_response_bytes: %v", err)
	}
}

// A Keep the memory store cannot make room for fails with ErrFull, whether
// the store refuses the reservation or completes the record without the
// blob: Keep never reports a blob kept that Kept cannot read.
func TestKeepNoRoom(t *testing.T) {
	ctx := context.Background()
	// The blob is larger than the whole store: the reservation fits, the
	// blob does not, and the record is completed without it.
	store := memstore.New(4 << 10)
	svc := idempotency.New(store, idempotency.Config{}, nil, nil)
	if err := svc.Keep(ctx, "turn-1", "proj", []byte(strings.Repeat("x", 5<<10))); !errors.Is(err, idempotency.ErrFull) {
		t.Errorf("Keep of a blob larger than the store: %v, want ErrFull", err)
	}
	if _, err := svc.Kept(ctx, "turn-1"); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("Kept of the blob that found no room: %v", err)
	}

	// Another tenant holds its fair share: a blob of this tenant that
	// would take from it is not kept, and the other's stays.
	store = memstore.New(16 << 10)
	svc = idempotency.New(store, idempotency.Config{}, nil, nil)
	other := []byte(strings.Repeat("o", 6<<10))
	if err := svc.Keep(ctx, "other-1", "other", other); err != nil {
		t.Fatal(err)
	}
	if err := svc.Keep(ctx, "turn-2", "proj", []byte(strings.Repeat("x", 10<<10))); !errors.Is(err, idempotency.ErrFull) {
		t.Errorf("Keep past this tenant's share: %v, want ErrFull", err)
	}
	if _, err := svc.Kept(ctx, "turn-2"); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("Kept of the blob past its share: %v", err)
	}
	if got, err := svc.Kept(ctx, "other-1"); err != nil || len(got) != len(other) {
		t.Errorf("the other tenant's blob: %d bytes, %v; want it kept", len(got), err)
	}
}
