package billing_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
)

func TestMoney(t *testing.T) {
	for _, c := range []struct {
		usd  float64
		want int64
	}{
		{0, 0},
		{1.4e-05, 14_000},
		{0.15, 150_000_000},
		{10, 10 * billing.NanosPerUSD},
		{1e-10, 0},
		{6e-10, 1},
		{-2.5e-9, -3},
		{math.NaN(), 0},
		{1e30, math.MaxInt64},
		{-1e30, math.MinInt64},
	} {
		if got := billing.USDToNanos(c.usd); got != c.want {
			t.Errorf("USDToNanos(%v) = %d, want %d", c.usd, got, c.want)
		}
	}
	if got := billing.NanosToUSD(14_000); got != 1.4e-05 {
		t.Errorf("NanosToUSD(14000) = %v", got)
	}
	// 1000 costs of 1.4e-05 sum to exactly 0.014 in nanos, where float
	// sums drift.
	var nanos int64
	var usd float64
	for range 1000 {
		nanos += billing.USDToNanos(1.4e-05)
		usd += 1.4e-05
	}
	if nanos != 14_000_000 {
		t.Errorf("sum in nanos %d, want 14000000", nanos)
	}
	t.Logf("the same sum in float64: %.20f", usd)
	if billing.USDPtrToNanos(nil) != nil {
		t.Errorf("USDPtrToNanos(nil) is not nil")
	}
}

func TestAccountCheck(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		a    billing.Account
		want error
	}{
		{billing.Account{}, nil},
		{billing.Account{BalanceNanos: n(1)}, nil},
		{billing.Account{BalanceNanos: n(0)}, billing.ErrInsufficientBalance},
		{billing.Account{BalanceNanos: n(-5)}, billing.ErrInsufficientBalance},
		{billing.Account{KeySpentNanos: 4, KeyLimitNanos: n(5)}, nil},
		{billing.Account{KeySpentNanos: 5, KeyLimitNanos: n(5)}, billing.ErrKeyLimitReached},
		{billing.Account{KeyLimitNanos: n(0)}, billing.ErrKeyLimitReached},
		{billing.Account{BalanceNanos: n(0), KeyLimitNanos: n(0)}, billing.ErrInsufficientBalance},
	} {
		if got := c.a.Check(); !errors.Is(got, c.want) || (c.want == nil && got != nil) {
			t.Errorf("%+v: Check() = %v, want %v", c.a, got, c.want)
		}
	}
}

// HashKey reuses HMAC states: with peppers taking turns and many
// goroutines at once, every hash is still HMAC-SHA256(pepper, key), and a
// hash with the process's pepper allocates far less than a fresh HMAC.
func TestHashKeyPooled(t *testing.T) {
	ref := func(pepper []byte, key string) string {
		m := hmac.New(sha256.New, pepper)
		m.Write([]byte(key))
		return hex.EncodeToString(m.Sum(nil))
	}
	peppers := [][]byte{[]byte("pepper-one"), []byte("pepper-two"), nil, make([]byte, 200)}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				p := peppers[(g+i)%len(peppers)]
				// Some longer than HashKey's buffer (256 bytes).
				key := fmt.Sprintf("sk-bg-%d-%d", g, i) + strings.Repeat("k", i%3*200)
				if got, want := billing.HashKey(p, key), ref(p, key); got != want {
					t.Errorf("HashKey(%q, %q) = %s, want %s", p, key, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	// The caller's pepper slice may change after the call.
	p := []byte("mutable")
	h := billing.HashKey(p, "k")
	p[0] = 'X'
	if got := billing.HashKey([]byte("mutable"), "k"); got != h || got != ref([]byte("mutable"), "k") {
		t.Errorf("after the caller changed its pepper slice: %s, want %s", got, h)
	}
	pepper := []byte("the process's pepper")
	const key = "sk-bg-0123456789abcdefghijklmnopqrstuv"
	billing.HashKey(pepper, "warm")
	pooled := testing.AllocsPerRun(100, func() { billing.HashKey(pepper, key) })
	fresh := testing.AllocsPerRun(100, func() { ref(pepper, key) })
	// 1 against 9 here; the race detector makes sync.Pool drop a quarter
	// of what is put back, hence the margin.
	if pooled > fresh-2 {
		t.Errorf("HashKey: %v allocations, a fresh HMAC %v; want fewer", pooled, fresh)
	}
}

func TestHashKey(t *testing.T) {
	p := []byte("pepper")
	h := billing.HashKey(p, "sk-demo")
	if len(h) != 64 || h != billing.HashKey(p, "sk-demo") {
		t.Fatalf("HashKey: %q", h)
	}
	// HMAC-SHA256(key "pepper", message "sk-demo"), computed with Python's hmac.
	if want := "0513e3ec2810e7ac6866caa89ba49bd7809c4c0416d9c1922279e4f38706f761"; h != want {
		t.Fatalf("HashKey(pepper, sk-demo) = %s, want %s", h, want)
	}
	if h == billing.HashKey([]byte("other"), "sk-demo") || h == billing.HashKey(p, "sk-demo2") {
		t.Fatalf("HashKey ignores its input")
	}
	id := billing.ConfigKeyID(p, "sk-demo")
	if !strings.HasPrefix(id, "cfg_") || len(id) != 20 || strings.Contains(h, id[4:]) {
		t.Fatalf("ConfigKeyID: %q (hash %s)", id, h)
	}
	seen := map[string]bool{}
	for range 1000 {
		k := billing.NewRawKey()
		if !strings.HasPrefix(k, billing.RawKeyPrefix) || len(k) != len(billing.RawKeyPrefix)+32 || seen[k] {
			t.Fatalf("NewRawKey: %q", k)
		}
		seen[k] = true
	}
	if id := billing.NewKeyID(); !strings.HasPrefix(id, "key_") || len(id) != 20 {
		t.Fatalf("NewKeyID: %q", id)
	}
}

func TestSamePayload(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	e := billing.Entry{RequestID: "r", Project: "p", KeyID: "k", CostNanos: 5, At: at}
	same := e
	same.At = at.In(time.FixedZone("X", -7200))
	if !billing.SamePayload(e, same) {
		t.Errorf("the same instant in another zone differs")
	}
	other := e
	other.PromptTokens = 1
	if billing.SamePayload(e, other) {
		t.Errorf("other tokens are the same payload")
	}
}

// counting is a KeyStore that counts Lookups.
type counting struct {
	billing.KeyStore
	mu      sync.Mutex
	lookups int
	fail    error
}

func (c *counting) Lookup(ctx context.Context, hash string) (billing.KeyRecord, error) {
	c.mu.Lock()
	c.lookups++
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return billing.KeyRecord{}, fail
	}
	return c.KeyStore.Lookup(ctx, hash)
}

func TestKeyCache(t *testing.T) {
	ctx := t.Context()
	pepper := []byte("p")
	mem := memledger.New(memledger.Options{Pepper: pepper})
	store := &counting{KeyStore: mem}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cache := billing.NewKeyCache(store, billing.KeyCacheOptions{Now: func() time.Time { return now }})
	if err := cache.CreateProject(ctx, "proj", nil); err != nil {
		t.Fatal(err)
	}
	lookup := func(hash string, want error, wantLookups int) {
		t.Helper()
		_, err := cache.Lookup(ctx, hash)
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("Lookup: %v, want %v", err, want)
		}
		if store.lookups != wantLookups {
			t.Fatalf("%d store lookups, want %d", store.lookups, wantLookups)
		}
	}

	// A miss is remembered for 5 s, unless the key is issued through the
	// cache.
	unknown := billing.HashKey(pepper, "sk-nope")
	lookup(unknown, billing.ErrUnknownKey, 1)
	lookup(unknown, billing.ErrUnknownKey, 1)
	now = now.Add(5 * time.Second)
	lookup(unknown, billing.ErrUnknownKey, 2)

	raw, rec, err := cache.Issue(ctx, "proj")
	if err != nil {
		t.Fatal(err)
	}
	hash := billing.HashKey(pepper, raw)
	lookup(hash, nil, 3)
	lookup(hash, nil, 3)

	// Revoked through the cache: at once.
	if err := cache.Revoke(ctx, rec.KeyID); err != nil {
		t.Fatal(err)
	}
	lookup(hash, billing.ErrKeyRevoked, 4)
	lookup(hash, billing.ErrKeyRevoked, 4)

	// Revoked through another instance (the store itself): within 30 s.
	raw2, rec2, err := mem.Issue(ctx, "proj")
	if err != nil {
		t.Fatal(err)
	}
	hash2 := billing.HashKey(pepper, raw2)
	lookup(hash2, nil, 5)
	if err := mem.Revoke(ctx, rec2.KeyID); err != nil {
		t.Fatal(err)
	}
	now = now.Add(29 * time.Second)
	lookup(hash2, nil, 5)
	now = now.Add(time.Second)
	lookup(hash2, billing.ErrKeyRevoked, 6)

	// Failures are not remembered.
	store.fail = billing.ErrUnavailable
	other := billing.HashKey(pepper, "sk-other")
	lookup(other, billing.ErrUnavailable, 7)
	store.fail = nil
	lookup(other, billing.ErrUnknownKey, 8)
}

// Labels gives what Label gives for each period, whatever the order of the
// times it is asked about (its cache holds one day).
func TestLabels(t *testing.T) {
	times := []time.Time{
		time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 3, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC),
		time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),                          // ISO week 53 of 2026
		time.Date(2026, 12, 31, 12, 0, 0, 0, time.FixedZone("+14", 14*3600)), // 2026-12-30 in UTC
		time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC),
		time.Date(1970, 1, 1, 1, 0, 0, 0, time.UTC),
	}
	for _, ti := range times {
		got := billing.Labels(ti)
		for p := range billing.NumPeriods {
			if got[p] != p.Label(ti) {
				t.Errorf("Labels(%v)[%s] = %q, want %q", ti, p, got[p], p.Label(ti))
			}
		}
	}
	if l := billing.Labels(times[4]); l != [billing.NumPeriods]string{"2027-01-01", "2026-W53", "2027-01"} {
		t.Errorf("Labels(%v) = %v", times[4], l)
	}
}
