package idempotency_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
)

// A retry that joined a stream and then reaches its own deadline ends the
// stream with an error event; it never returns an error after it wrote a
// 200 (the caller would write a second status line).
func TestJoinerDeadlineAfterStart(t *testing.T) {
	svc := idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil)
	ctx := context.Background()
	exec, _, err := svc.Begin(ctx, "k", "fp", "req_1")
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Fail(ctx)
	exec.Start(200, map[string]string{"Content-Type": "text/event-stream"}, true)
	exec.Event(ctx, idempotency.Event{Data: []byte(`{"a":1}`)})
	_, rec, err := svc.Begin(ctx, "k", "fp", "req_2")
	if err != nil || rec == nil {
		t.Fatalf("second Begin: %v %v", rec, err)
	}
	w := httptest.NewRecorder()
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := svc.Serve(wctx, w, rec, idempotency.Retry{Fingerprint: "fp"}); err != nil {
		t.Fatalf("Serve returned %v after it wrote a 200 stream", err)
	}
	body := w.Body.String()
	if w.Code != 200 || !strings.HasPrefix(body, "data: {\"a\":1}\n\n") || !strings.Contains(body, `"finish_reason":"error"`) {
		t.Errorf("joined stream %d %q: want the events so far and an error event", w.Code, body)
	}
}

// lossyStore applies a reservation and then reports a failure, as a write
// whose answer was lost does.
type lossyStore struct{ idempotency.Store }

func (s lossyStore) Reserve(ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	if _, err := s.Store.Reserve(ctx, rec, now); err != nil {
		return nil, err
	}
	return nil, errors.New("connection reset after the write")
}

// A reservation that failed on the way back is undone, so the key does not
// read as a dead owner's for the whole window.
func TestReserveErrorReleases(t *testing.T) {
	store := memstore.New(1 << 20)
	svc := idempotency.New(lossyStore{store}, idempotency.Config{}, nil, nil)
	_, _, err := svc.Begin(context.Background(), "k", "fp", "req_1")
	if !errors.Is(err, idempotency.ErrUnavailable) {
		t.Fatalf("Begin: %v, want ErrUnavailable", err)
	}
	if _, err := store.Load(context.Background(), "k", time.Now()); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("after a failed reservation the record is still there: %v", err)
	}
}

// deafStore loses every heartbeat.
type deafStore struct{ idempotency.Store }

func (deafStore) Heartbeat(context.Context, string, string, time.Time) error {
	return idempotency.ErrUnavailable
}

// A running owner on the same instance is followed even when its lease
// lapsed in the store (its heartbeats failed): it is alive and will answer.
func TestLocalOwnerOutlivesItsLease(t *testing.T) {
	svc := idempotency.New(deafStore{memstore.New(1 << 20)}, idempotency.Config{Lease: 30 * time.Millisecond}, nil, nil)
	ctx := context.Background()
	exec, _, err := svc.Begin(ctx, "k", "fp", "req_1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the lease lapses
	_, rec, err := svc.Begin(ctx, "k", "fp", "req_2")
	if err != nil || rec == nil {
		t.Fatal(rec, err)
	}
	done := make(chan error, 1)
	w := httptest.NewRecorder()
	go func() { done <- svc.Serve(ctx, w, rec, idempotency.Retry{Fingerprint: "fp"}) }()
	time.Sleep(20 * time.Millisecond)
	exec.Start(200, map[string]string{"Content-Type": "application/json"}, false)
	exec.Body([]byte(`{"ok":true}`))
	if err := exec.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || w.Code != 200 || w.Body.String() != `{"ok":true}` {
		t.Errorf("the retry of a live local owner: %v %d %q", err, w.Code, w.Body.String())
	}
}
