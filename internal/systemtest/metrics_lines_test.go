package systemtest_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// emfLines parses the EMF output into one map per line.
func emfLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// requestLines keeps the per-request lines (those with Requests).
func requestLines(ls []map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range ls {
		if _, ok := l["Requests"]; ok {
			out = append(out, l)
		}
	}
	return out
}

// completeFailsOnce is a working store whose first Complete cannot reach
// the store (a DynamoDB timeout, throttling): the finisher retries it.
type completeFailsOnce struct {
	idempotency.Store
	failed atomic.Bool
}

func (s *completeFailsOnce) Complete(ctx context.Context, key, owner string, ans *idempotency.Answer) error {
	if s.failed.CompareAndSwap(false, true) {
		return errDown
	}
	return s.Store.Complete(ctx, key, owner, ans)
}

// TestStoreErrorAfterAnswerIsCounted: docs/architecture.md#store-failures: when the store cannot be reached, a warning in the log AND a
// metric. A keyed request whose completing write fails reaches the store
// no better than one whose Reserve fails; the template's
// IdempotencyStoreErrorsAlarm ("Any failure to reach the idempotency
// table") reads IdempotencyStoreErrors only.
func TestStoreErrorAfterAnswerIsCounted(t *testing.T) {
	emf := &syncBuffer{}
	store := &completeFailsOnce{Store: memstore.New(1 << 30)}
	g := newGateway(t, setup{store: store, metrics: emf})
	a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
	if a.status != 200 {
		t.Fatalf("keyed request: %d %s", a.status, a.body)
	}
	g.settle(t)
	if !store.failed.Load() {
		t.Fatal("Complete was never called")
	}
	if !strings.Contains(g.logs.String(), "finishing step failed") {
		t.Errorf("no warning in the log for the failed Complete:\n%s", g.logs.String())
	}
	var storeErrors float64
	for _, l := range emfLines(t, emf.String()) {
		v, _ := l["IdempotencyStoreErrors"].(float64)
		storeErrors += v
	}
	if storeErrors == 0 {
		t.Errorf("the idempotency store failed (Complete: %v), logged as a warning, but IdempotencyStoreErrors sums to 0 in every EMF line:\n%s", errDown, emf.String())
	}
}

// TestMetricLinesOfReplaysHoldNoSecrets: the keyed first call, its replay, a
// conflict and a 502 that leaves a tombstone and its retry, streamed and
// not, each with the right counters, and no secret in any line.
func TestMetricLinesOfReplaysHoldNoSecrets(t *testing.T) {
	for _, stream := range []string{"false", "true"} {
		t.Run("stream="+stream, func(t *testing.T) {
			emf := &syncBuffer{}
			g := newGateway(t, setup{metrics: emf})
			body := chatBody(`"stream":` + stream)
			k := "idem-SECRET-" + key(t)
			first := mustCall(t, g.url, body, "Idempotency-Key", k)
			g.settle(t)
			again := mustCall(t, g.url, body, "Idempotency-Key", k)
			g.settle(t)
			conflict := mustCall(t, g.url, chatBody(`"stream":`+stream+`,"temperature":1`), "Idempotency-Key", k)
			g.settle(t)
			g.ups[0].SetDefault(providertest.Response{Status: 500})
			g.ups[1].SetDefault(providertest.Response{Status: 500})
			k2 := k + "-fail"
			failed := mustCall(t, g.url, body, "Idempotency-Key", k2)
			g.settle(t)
			tomb := mustCall(t, g.url, body, "Idempotency-Key", k2)
			g.settle(t)
			if first.status != 200 || again.status != 200 || conflict.status != 409 || failed.status != 502 || tomb.status != 409 {
				t.Fatalf("statuses %d %d %d %d %d", first.status, again.status, conflict.status, failed.status, tomb.status)
			}
			out := emf.String()
			for _, secret := range []string{k, testKey, "Say hello", "upstream-secret-0"} {
				if strings.Contains(out, secret) {
					t.Errorf("EMF output holds %q", secret)
				}
			}
			ls := requestLines(emfLines(t, out))
			if len(ls) != 5 {
				t.Fatalf("%d request lines, want 5:\n%s", len(ls), out)
			}
			type want struct {
				replays, conflicts, unavailable, e5xx float64
				cost                                  bool
			}
			for i, w := range []want{{0, 0, 0, 0, true}, {1, 0, 0, 0, false}, {0, 1, 0, 0, false}, {0, 0, 0, 1, false}, {0, 0, 1, 0, false}} {
				l := ls[i]
				_, hasCost := l["Cost"]
				if l["Replays"] != w.replays || l["IdempotencyConflicts"] != w.conflicts || l["ReplayUnavailable"] != w.unavailable || l["Errors5xx"] != w.e5xx || hasCost != w.cost {
					t.Errorf("line %d: Replays %v Conflicts %v ReplayUnavailable %v Errors5xx %v Cost %v; want %+v", i, l["Replays"], l["IdempotencyConflicts"], l["ReplayUnavailable"], l["Errors5xx"], l["Cost"], w)
				}
			}
		})
	}
}
