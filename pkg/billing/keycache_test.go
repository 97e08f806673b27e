package billing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lookupStore is a KeyStore that knows one hash, counts its Lookups by
// hash, and holds each Lookup until gate is closed (nil: at once).
type lookupStore struct {
	KeyStore
	known string
	gate  chan struct{}
	mu    sync.Mutex
	calls map[string]int
	total atomic.Int64
}

func (s *lookupStore) Lookup(ctx context.Context, hash string) (KeyRecord, error) {
	s.mu.Lock()
	s.calls[hash]++
	s.mu.Unlock()
	s.total.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	if hash == s.known {
		return KeyRecord{Hash: hash, Project: "proj", KeyID: "key_1"}, nil
	}
	return KeyRecord{}, ErrUnknownKey
}

// Unknown keys, many more than the cache holds, neither push a known key
// out nor cost more than one store read each.
func TestKeyCacheUnknownKeysKeepKnownOnes(t *testing.T) {
	ctx := t.Context()
	store := &lookupStore{known: "known", calls: map[string]int{}}
	c := NewKeyCache(store, KeyCacheOptions{})
	if _, err := c.Lookup(ctx, "known"); err != nil {
		t.Fatal(err)
	}
	const unknown = 250_000 // past both the default 100,000 and the misses' 10,000
	for i := range unknown {
		if _, err := c.Lookup(ctx, fmt.Sprintf("unknown-%d", i)); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("unknown key %d: %v", i, err)
		}
	}
	if _, err := c.Lookup(ctx, "known"); err != nil {
		t.Fatal(err)
	}
	if n := store.calls["known"]; n != 1 {
		t.Errorf("the known key was read %d times from the store after %d unknown keys, want once (served from the cache)", n, unknown)
	}
	if n := store.total.Load(); n != unknown+1 {
		t.Errorf("%d store reads, want %d: one per key", n, unknown+1)
	}
	c.mu.Lock()
	hits, misses := len(c.hits), len(c.misses)
	c.mu.Unlock()
	if hits != 1 || misses > c.opts.MaxMisses {
		t.Errorf("the cache holds %d found keys and %d unknown ones; want 1 and at most %d", hits, misses, c.opts.MaxMisses)
	}
}

// Concurrent Lookups of one hash that is not cached make one store read.
func TestKeyCacheOneReadPerHash(t *testing.T) {
	for _, hash := range []string{"known", "unknown"} {
		t.Run(hash, func(t *testing.T) {
			store := &lookupStore{known: "known", calls: map[string]int{}, gate: make(chan struct{})}
			c := NewKeyCache(store, KeyCacheOptions{})
			const n = 20
			errs := make(chan error, n)
			for range n {
				go func() {
					_, err := c.Lookup(context.Background(), hash)
					errs <- err
				}()
			}
			// Once the first read is under way and every other Lookup has
			// joined it, the store answers.
			for {
				c.mu.Lock()
				f := c.flights[hash]
				joined := f != nil && f.waiters == n-1
				c.mu.Unlock()
				if joined {
					break
				}
				waitBriefly()
			}
			close(store.gate)
			for range n {
				if err := <-errs; (hash == "known") != (err == nil) {
					t.Errorf("Lookup(%s): %v", hash, err)
				}
			}
			if got := store.total.Load(); got != 1 {
				t.Errorf("%d concurrent Lookups of one hash made %d store reads, want 1", n, got)
			}
		})
	}
}

// A waiter whose reader's caller left reads the store itself rather than
// failing with the other caller's cancellation.
func TestKeyCacheReaderLeaves(t *testing.T) {
	store := &lookupStore{known: "known", calls: map[string]int{}, gate: make(chan struct{})}
	c := NewKeyCache(cancelAware{store}, KeyCacheOptions{})
	readerCtx, leave := context.WithCancel(context.Background())
	readerErr := make(chan error, 1)
	go func() {
		_, err := c.Lookup(readerCtx, "known")
		readerErr <- err
	}()
	waiterErr := make(chan error, 1)
	for {
		c.mu.Lock()
		started := c.flights["known"] != nil
		c.mu.Unlock()
		if started {
			break
		}
		waitBriefly()
	}
	go func() {
		_, err := c.Lookup(context.Background(), "known")
		waiterErr <- err
	}()
	for {
		c.mu.Lock()
		f := c.flights["known"]
		joined := f != nil && f.waiters == 1
		c.mu.Unlock()
		if joined {
			break
		}
		waitBriefly()
	}
	leave()
	if err := <-readerErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the reader whose caller left: %v, want context.Canceled", err)
	}
	close(store.gate)
	if err := <-waiterErr; err != nil {
		t.Errorf("the waiter: %v, want the key found", err)
	}
}

// cancelAware returns its caller's cancellation as soon as it happens.
type cancelAware struct{ *lookupStore }

func (s cancelAware) Lookup(ctx context.Context, hash string) (KeyRecord, error) {
	done := make(chan struct{})
	var rec KeyRecord
	var err error
	go func() {
		rec, err = s.lookupStore.Lookup(context.Background(), hash)
		close(done)
	}()
	select {
	case <-done:
		return rec, err
	case <-ctx.Done():
		return KeyRecord{}, ctx.Err()
	}
}

// waitBriefly lets the goroutines a test waits for run.
func waitBriefly() { time.Sleep(time.Millisecond) }
