package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/storetest"
)

// The suite is checked against memstore (which must pass it, see memstore's
// tests) and against broken stores: each mutant below is memstore with one
// known bug, and the suite must fail on it, in each of the named subtests.

const mutantEnv = "BUZZGATE_STORETEST_MUTANT"

// mutant wraps a memstore, with some methods replaced.
type mutant struct {
	*memstore.Store
	reserve  func(m *mutant, ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error)
	load     func(m *mutant, ctx context.Context, key string, now time.Time) (*idempotency.Record, error)
	append   func(m *mutant, ctx context.Context, key, owner string, seq int, head *idempotency.Head, events []idempotency.Event) error
	complete func(m *mutant, ctx context.Context, key, owner string, ans *idempotency.Answer) error
	release  func(m *mutant, ctx context.Context, key, owner string) error
	started  func(m *mutant, ctx context.Context, key, owner string) error
	poll     func(m *mutant, ctx context.Context, key, owner string, from int, now time.Time) (*idempotency.Record, int, error)

	mu    sync.Mutex
	calls map[string]int
}

func (m *mutant) Reserve(ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	if m.reserve != nil {
		return m.reserve(m, ctx, rec, now)
	}
	return m.Store.Reserve(ctx, rec, now)
}

func (m *mutant) Load(ctx context.Context, key string, now time.Time) (*idempotency.Record, error) {
	if m.load != nil {
		return m.load(m, ctx, key, now)
	}
	return m.Store.Load(ctx, key, now)
}

func (m *mutant) Append(ctx context.Context, key, owner string, seq int, head *idempotency.Head, events []idempotency.Event) error {
	if m.append != nil {
		return m.append(m, ctx, key, owner, seq, head, events)
	}
	return m.Store.Append(ctx, key, owner, seq, head, events)
}

func (m *mutant) Complete(ctx context.Context, key, owner string, ans *idempotency.Answer) error {
	if m.complete != nil {
		return m.complete(m, ctx, key, owner, ans)
	}
	return m.Store.Complete(ctx, key, owner, ans)
}

func (m *mutant) Release(ctx context.Context, key, owner string) error {
	if m.release != nil {
		return m.release(m, ctx, key, owner)
	}
	return m.Store.Release(ctx, key, owner)
}

func (m *mutant) MarkStarted(ctx context.Context, key, owner string) error {
	if m.started != nil {
		return m.started(m, ctx, key, owner)
	}
	return m.Store.MarkStarted(ctx, key, owner)
}

func (m *mutant) Poll(ctx context.Context, key, owner string, from int, now time.Time) (*idempotency.Record, int, error) {
	if m.poll != nil {
		return m.poll(m, ctx, key, owner, from, now)
	}
	return m.Store.Poll(ctx, key, owner, from, now)
}

// takeOverIf is a Reserve that takes over a lapsed in-progress record when
// ok says so, instead of the store's own rule.
func takeOverIf(ok func(old, rec *idempotency.Record) bool) func(m *mutant, ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	return func(m *mutant, ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
		old, err := m.Store.Load(ctx, rec.Key, now)
		if err == nil && old.Owner != rec.Owner {
			if old.State == idempotency.StateInProgress && old.LeaseUntil.Before(now) && ok(old, rec) {
				_ = m.Store.Release(ctx, rec.Key, old.Owner)
				return m.Store.Reserve(ctx, rec, now)
			}
			return old, nil
		}
		return m.Store.Reserve(ctx, rec, now)
	}
}

// currentOwner is what an unconditional write would use: whoever owns the
// record now.
func (m *mutant) currentOwner(ctx context.Context, key, owner string) string {
	if rec, err := m.Store.Load(ctx, key, time.Time{}); err == nil {
		return rec.Owner
	}
	return owner
}

var mutants = map[string]struct {
	make     func(m *mutant)
	mustFail []string
}{
	// Powertools ts#5675: completion and deletion not fenced by the owner.
	"unfenced_complete": {func(m *mutant) {
		m.complete = func(m *mutant, ctx context.Context, key, owner string, ans *idempotency.Answer) error {
			return m.Store.Complete(ctx, key, m.currentOwner(ctx, key, owner), ans)
		}
	}, []string{"WrongOwner", "ReleaseFencesStaleOwner", "ReserveAfterWindow"}},
	"unfenced_release": {func(m *mutant) {
		m.release = func(m *mutant, ctx context.Context, key, owner string) error {
			return m.Store.Release(ctx, key, m.currentOwner(ctx, key, owner))
		}
	}, []string{"WrongOwner", "ReleaseFencesStaleOwner", "ReserveAfterWindow"}},
	// TTL is not expiry: a read that trusts the item's existence.
	"load_ignores_window": {func(m *mutant) {
		m.load = func(m *mutant, ctx context.Context, key string, now time.Time) (*idempotency.Record, error) {
			return m.Store.Load(ctx, key, time.Time{})
		}
	}, []string{"LoadAfterWindow", "ReserveAfterWindow"}},
	// A reservation that trusts the item's existence.
	"reserve_ignores_window": {func(m *mutant) {
		m.reserve = func(m *mutant, ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
			return m.Store.Reserve(ctx, rec, time.Time{})
		}
	}, []string{"ReserveAfterWindow", "ConcurrentReserveAfterWindow"}},
	// A window that ends at ExpiresAt rather than after it.
	"window_ends_at_expires_at": {func(m *mutant) {
		m.reserve = func(m *mutant, ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
			return m.Store.Reserve(ctx, rec, now.Add(time.Millisecond))
		}
	}, []string{"ReserveAtExpiresAtIsLive"}},
	// Check, then act: two reservations both see no record.
	"reserve_check_then_act": {func(m *mutant) {
		m.reserve = func(m *mutant, ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
			if got, err := m.Store.Load(ctx, rec.Key, now); err == nil {
				return got, nil
			}
			// Long enough that every concurrent caller has checked before
			// the first acts, even on a loaded machine: with 1 ms, a CI run
			// where the goroutines started over more than a millisecond let
			// the first one win alone and the mutant pass.
			time.Sleep(50 * time.Millisecond)
			return m.Store.Reserve(ctx, rec, rec.ExpiresAt.Add(24*time.Hour)) // overwrites
		}
	}, []string{"ConcurrentReserve", "ConcurrentReserveAfterWindow"}},
	// Reserve returns the identity only (a ReturnValues=ALL_OLD of the main
	// item, without the answer's other items).
	"reserve_identity_only": {func(m *mutant) {
		m.reserve = func(m *mutant, ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
			got, err := m.Store.Reserve(ctx, rec, now)
			if got != nil {
				got.Answer, got.Head, got.Events = nil, nil, nil
			}
			return got, err
		}
	}, []string{"ReserveReturnsWholeRecord", "LargeAppend"}},
	// A retried Append applied twice.
	"append_not_deduplicated": {func(m *mutant) {
		m.append = func(m *mutant, ctx context.Context, key, owner string, seq int, head *idempotency.Head, events []idempotency.Event) error {
			m.mu.Lock()
			n := m.calls[key+owner]
			m.calls[key+owner]++
			m.mu.Unlock()
			return m.Store.Append(ctx, key, owner, n, head, events)
		}
	}, []string{"AppendRetryIgnored", "ConcurrentAppendRetries"}},
	// A key stuck for its window: a reservation that never started is not
	// taken over.
	"no_takeover": {func(m *mutant) {
		m.reserve = takeOverIf(func(old, rec *idempotency.Record) bool { return false })
	}, []string{"TakeOverLapsedUnstarted"}},
	// A takeover that re-runs a request that started (Powertools py#8049).
	"takeover_of_started": {func(m *mutant) {
		m.reserve = takeOverIf(func(old, rec *idempotency.Record) bool { return old.Fingerprint == rec.Fingerprint })
	}, []string{"NoTakeOverStarted"}},
	// A takeover by another request under the same key.
	"takeover_any_fingerprint": {func(m *mutant) {
		m.reserve = takeOverIf(func(old, rec *idempotency.Record) bool { return !old.Started })
	}, []string{"NoTakeOverOtherFingerprint"}},
	// MarkStarted not fenced by the owner.
	"unfenced_mark_started": {func(m *mutant) {
		m.started = func(m *mutant, ctx context.Context, key, owner string) error {
			return m.Store.MarkStarted(ctx, key, m.currentOwner(ctx, key, owner))
		}
	}, []string{"WrongOwner", "ReleaseFencesStaleOwner", "TakeOverLapsedUnstarted"}},
	// MarkStarted that does not stick.
	"mark_started_lost": {func(m *mutant) {
		m.started = func(m *mutant, ctx context.Context, key, owner string) error { return nil }
	}, []string{"MarkStarted", "NoTakeOverStarted"}},
	// Poll that ignores what the waiter saw (re-reads everything).
	"poll_reads_all": {func(m *mutant) {
		m.poll = func(m *mutant, ctx context.Context, key, owner string, from int, now time.Time) (*idempotency.Record, int, error) {
			rec, next, err := m.Store.Poll(ctx, key, owner, 0, now)
			return rec, next, err
		}
	}, []string{"Poll"}},
	// The tenant not kept.
	"tenant_lost": {func(m *mutant) {
		m.reserve = func(m *mutant, ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
			c := storetest.Clone(rec)
			c.Tenant = ""
			return m.Store.Reserve(ctx, c, now)
		}
	}, []string{"ReserveCreates"}},
	// Items over 400 KB: the answer is cut.
	"large_body_cut": {func(m *mutant) {
		m.complete = func(m *mutant, ctx context.Context, key, owner string, ans *idempotency.Answer) error {
			a := storetest.CloneAnswer(ans)
			if len(a.Body) > 400<<10 {
				a.Body = a.Body[:400<<10]
			}
			if len(a.Events) > 1000 {
				a.Events = a.Events[:1000]
			}
			return m.Store.Complete(ctx, key, owner, a)
		}
	}, []string{"LargeAnswers"}},
	// The usage flag lost (or text-only bytes).
	"usage_flag_lost": {func(m *mutant) {
		m.complete = func(m *mutant, ctx context.Context, key, owner string, ans *idempotency.Answer) error {
			a := storetest.CloneAnswer(ans)
			for i := range a.Events {
				a.Events[i].Usage = false
			}
			return m.Store.Complete(ctx, key, owner, a)
		}
	}, []string{"CompleteStream", "AllByteValues"}},
	"not_utf8_safe": {func(m *mutant) {
		m.complete = func(m *mutant, ctx context.Context, key, owner string, ans *idempotency.Answer) error {
			a := storetest.CloneAnswer(ans)
			a.Body = []byte(strings.ToValidUTF8(string(a.Body), "\uFFFD"))
			return m.Store.Complete(ctx, key, owner, a)
		}
	}, []string{"AllByteValues"}},
	// A store that hands out its own slices.
	"aliasing": {func(m *mutant) {
		var saved sync.Map
		m.complete = func(m *mutant, ctx context.Context, key, owner string, ans *idempotency.Answer) error {
			err := m.Store.Complete(ctx, key, owner, ans)
			if err == nil {
				saved.Store(key, ans) // the caller's answer, kept by reference
			}
			return err
		}
		m.load = func(m *mutant, ctx context.Context, key string, now time.Time) (*idempotency.Record, error) {
			rec, err := m.Store.Load(ctx, key, now)
			if a, ok := saved.Load(key); ok && rec != nil && rec.Answer != nil {
				rec.Answer = a.(*idempotency.Answer)
			}
			return rec, err
		}
	}, []string{"NoAliasing"}},
}

// TestMutant runs the suite against the mutant named by the environment;
// TestSuiteCatchesMutants runs it in a child process and expects failures.
func TestMutant(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("run by TestSuiteCatchesMutants")
	}
	mk := mutants[name].make
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		m := &mutant{Store: memstore.New(64 << 20), calls: map[string]int{}}
		mk(m)
		return m
	})
}

func TestSuiteCatchesMutants(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Skip("in a child")
	}
	if testing.Short() {
		t.Skip("slow: runs the suite once per mutant")
	}
	failRE := regexp.MustCompile(`--- FAIL: TestMutant/(\w+) `)
	for name, mut := range mutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run := "^TestMutant$/^(" + strings.Join(mut.mustFail, "|") + ")$"
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+run, "-test.count=1", "-test.timeout=5m")
			cmd.Env = append(os.Environ(), mutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store with the bug %q:\n%s", name, out)
			}
			var failed []string
			for _, m := range failRE.FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, m[1])
			}
			if len(failed) == 0 {
				t.Fatalf("the child failed without a failing subtest:\n%s", out)
			}
			for _, want := range mut.mustFail {
				if !slices.Contains(failed, want) {
					t.Errorf("bug %q: subtest %s passed; failed: %v", name, want, failed)
				}
			}
			t.Logf("bug %q caught by %v", name, failed)
		})
	}
}
