package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
)

// TestDuplicateKeyHeaders: a request that carries its key twice, in two
// Authorization headers or two x-api-key headers, is served when both are
// the same key and refused (401 invalid_api_key, in the endpoint's
// envelope) when they are two keys, whichever comes first and even when
// both are valid keys of the project.
func TestDuplicateKeyHeaders(t *testing.T) {
	g := newGateway(t, setup{})
	for _, e := range []struct {
		method, path, body string
		anthropic          bool
	}{
		{"POST", "/api/v1/chat/completions", chatBody(""), false},
		{"POST", "/api/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true},
		{"GET", "/api/v1/models", "", false},
		{"GET", "/api/v1/usage", "", false},
	} {
		for _, c := range []struct {
			name   string
			header []string
			ok     bool
		}{
			{"two bearers, the same key", []string{"Authorization", "Bearer " + testKey, "Authorization", "Bearer " + testKey}, true},
			{"two x-api-keys, the same key", []string{"X-Api-Key", testKey, "X-Api-Key", testKey}, true},
			{"two bearers, two valid keys", []string{"Authorization", "Bearer " + testKey, "Authorization", "Bearer " + otherKey}, false},
			{"two bearers, an unknown key second", []string{"Authorization", "Bearer " + testKey, "Authorization", "Bearer sk-nope"}, false},
			{"two bearers, an unknown key first", []string{"Authorization", "Bearer sk-nope", "Authorization", "Bearer " + testKey}, false},
			{"two x-api-keys, two valid keys", []string{"X-Api-Key", otherKey, "X-Api-Key", testKey}, false},
			{"bearer twice and another x-api-key", []string{"Authorization", "Bearer " + testKey, "Authorization", "Bearer " + testKey, "X-Api-Key", otherKey}, false},
		} {
			what := e.method + " " + e.path + " with " + c.name
			a := send(t, e.method, g.url+e.path, e.body, c.header...)
			if c.ok {
				if a.status != http.StatusOK {
					t.Errorf("%s: %d %s", what, a.status, a.body)
				}
				continue
			}
			if e.anthropic {
				expectAnthropicError(t, what, a, 401, "authentication_error", "invalid_api_key")
				continue
			}
			var oe apiError
			json.Unmarshal([]byte(a.body), &oe)
			if a.status != 401 || oe.Error.Code != "invalid_api_key" || oe.Error.Type != "authentication_error" {
				t.Errorf("%s: %d %s, want 401 invalid_api_key", what, a.status, a.body)
			}
		}
	}
}

// readCounter is a key store that counts its Lookups by hash.
type readCounter struct {
	billing.KeyStore
	mu    sync.Mutex
	reads map[string]int
}

func (s *readCounter) Lookup(ctx context.Context, hash string) (billing.KeyRecord, error) {
	s.mu.Lock()
	s.reads[hash]++
	s.mu.Unlock()
	return s.KeyStore.Lookup(ctx, hash)
}

func (s *readCounter) count(hash string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[hash]
}

// TestUnknownKeysKeepKnownKeysCached: requests with made-up keys, more
// than the key cache holds, leave an issued key in the cache (its next
// request reads no store), and one unknown key sent again within the
// cache's memory of misses costs no second read.
func TestUnknownKeysKeepKnownKeysCached(t *testing.T) {
	ctx := context.Background()
	pepper := []byte("pepper")
	l := memledger.New(memledger.Options{Pepper: pepper})
	store := &readCounter{KeyStore: l, reads: map[string]int{}}
	const cacheSize = 100
	keys := billing.NewKeyCache(store, billing.KeyCacheOptions{MaxEntries: cacheSize})
	g := newGateway(t, setup{accounts: httpapi.Accounts{Ledger: l, Keys: keys, Pepper: pepper}})
	if a := mustCall(t, g.url, chatBody("")); a.status != 200 { // seeds project proj
		t.Fatalf("%d %s", a.status, a.body)
	}
	raw, _, err := keys.Issue(ctx, "proj")
	if err != nil {
		t.Fatal(err)
	}
	models := func(key string) int {
		t.Helper()
		return send(t, http.MethodGet, g.url+"/api/v1/models", "", "Authorization", "Bearer "+key).status
	}
	hash := billing.HashKey(pepper, raw)
	if s := models(raw); s != 200 || store.count(hash) != 1 {
		t.Fatalf("the issued key: %d after %d store reads", s, store.count(hash))
	}
	for i := range 3 * cacheSize {
		if s := models(fmt.Sprintf("sk-made-up-%d", i)); s != 401 {
			t.Fatalf("made-up key %d: %d, want 401", i, s)
		}
	}
	if s := models(raw); s != 200 {
		t.Fatalf("the issued key after the made-up ones: %d", s)
	}
	if n := store.count(hash); n != 1 {
		t.Errorf("the issued key was read from the store %d times, want once: %d made-up keys pushed it out of the cache", n, 3*cacheSize)
	}
	made := billing.HashKey(pepper, "sk-made-up-again")
	for range 2 {
		models("sk-made-up-again")
	}
	if n := store.count(made); n != 1 {
		t.Errorf("an unknown key sent twice was read %d times, want once", n)
	}
}

// TestCountTokensRateLimited: count_tokens counts against the project's
// rpm as a generation does (one request each, reported in the x-ratelimit
// and anthropic-ratelimit headers): past it, a count is refused with 429
// rate_limited in Anthropic's envelope before any upstream call, and so is
// a generation; nothing is billed for the counts.
func TestCountTokensRateLimited(t *testing.T) {
	g := newClaudeGateway(t, "", "    rpm: 3\n")
	ledger := memledger.New(memledger.Options{})
	g.now, g.accounts = withinOneMinute(), httpapi.Accounts{Ledger: ledger, Keys: ledger}
	url := g.instance(t, nil) // on a clock that stays within one minute, and a ledger to read
	for i := range 2 {
		a := countTokens(t, url, countBody+"}")
		if a.status != 200 || a.header.Get("X-Gateway-Provider") != "claude" || a.header.Get("x-ratelimit-limit-requests") != "3" ||
			a.header.Get("x-ratelimit-remaining-requests") != fmt.Sprint(2-i) || a.header.Get("anthropic-ratelimit-requests-remaining") != fmt.Sprint(2-i) {
			t.Fatalf("count %d: %d %s %v", i, a.status, a.body, a.header)
		}
	}
	m := callPath(t, url+"/api/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", testKey)
	if m.status != 200 || m.header.Get("x-ratelimit-remaining-requests") != "0" {
		t.Fatalf("the generation after two counts: %d %s %v", m.status, m.body, m.header)
	}
	a := countTokens(t, url, countBody+"}")
	expectAnthropicError(t, "a count past the rpm", a, 429, "rate_limit_error", "rate_limited")
	if a.header.Get("Retry-After") == "" || a.header.Get("X-Gateway-Admission-Refused") != "true" || a.header.Get("x-ratelimit-remaining-requests") != "0" {
		t.Errorf("a count past the rpm: headers %v", a.header)
	}
	if n := len(g.claude.CountTokensRequests()); n != 2 {
		t.Errorf("%d upstream count_tokens calls, want 2 (none for the refused count)", n)
	}
	if b := mustCall(t, url, chatBody("")); b.status != 429 || b.code != "rate_limited" {
		t.Errorf("a generation after the counts used up the rpm: %d %s", b.status, b.body)
	}
	g.settle(t)
	tot, err := ledger.Totals(context.Background(), "proj", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil || tot.Total.Requests != 1 {
		t.Errorf("the ledger holds %d requests (%v), want 1: the generation's, none for the counts", tot.Total.Requests, err)
	}
}

// usageError checks a 400 invalid_request naming param.
func usageError(t *testing.T, what string, a answer, param string) {
	t.Helper()
	var e apiError
	json.Unmarshal([]byte(a.body), &e)
	if a.status != 400 || e.Error.Code != "invalid_request" || e.Error.Param == nil || *e.Error.Param != param {
		t.Errorf("%s: %d %s, want 400 invalid_request naming %s", what, a.status, a.body, param)
	}
}

// TestUsageBounded: GET /api/v1/usage reads at most 366 days and at most
// limit ledger entries a call (default and at most 10,000), paging through
// the rest with next_cursor, whose pages sum to the range's totals; a
// range, limit or cursor out of bounds is 400 invalid_request naming it.
func TestUsageBounded(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, acc := b.new(t)
			g := newGateway(t, setup{store: store, accounts: acc})
			for i := range 3 {
				if a := mustCall(t, g.url, chatBody(fmt.Sprintf(`"n":%d`, i))); a.status != 200 {
					t.Fatalf("request %d: %d %s", i, a.status, a.body)
				}
			}
			g.settle(t)
			usage := func(query string) answer {
				t.Helper()
				return send(t, http.MethodGet, g.url+"/api/v1/usage"+query, "", "Authorization", "Bearer "+testKey)
			}
			type page struct {
				From, To   time.Time
				Total      struct{ Requests int64 }
				ByKey      map[string]struct{ Requests int64 } `json:"by_key"`
				HasMore    bool                                `json:"has_more"`
				NextCursor *string                             `json:"next_cursor"`
			}
			read := func(a answer) page {
				t.Helper()
				var p page
				if err := json.Unmarshal([]byte(a.body), &p); a.status != 200 || err != nil {
					t.Fatalf("usage: %d %s", a.status, a.body)
				}
				return p
			}

			whole := read(usage(""))
			if whole.Total.Requests != 3 || whole.HasMore || whole.NextCursor != nil {
				t.Fatalf("usage in one page: %+v, want 3 requests and no more", whole)
			}
			var sum int64
			first := read(usage("?limit=1"))
			p, pages := first, 1
			for {
				if p.Total.Requests > 1 || !p.From.Equal(first.From) || !p.To.Equal(first.To) {
					t.Errorf("page %d: %+v, want at most one request over the first page's range", pages, p)
				}
				sum += p.Total.Requests
				if !p.HasMore {
					break
				}
				if p.NextCursor == nil || pages > 3+16 {
					t.Fatalf("page %d: has_more without a cursor, or too many pages: %+v", pages, p)
				}
				// The cursor carries the range: the default to (now) does
				// not move under it.
				p, pages = read(usage("?limit=1&cursor="+*p.NextCursor)), pages+1
			}
			if sum != 3 || pages < 3 {
				t.Errorf("%d pages of at most one request summed to %d; want 3 requests over 3 pages or more", pages, sum)
			}

			now := time.Now().UTC()
			at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
			usageError(t, "a range of 367 days", usage("?from="+at(-367*24*time.Hour)+"&to="+at(0)), "from")
			if a := usage("?from=" + at(-366*24*time.Hour) + "&to=" + at(0)); a.status != 200 {
				t.Errorf("a range of 366 days: %d %s", a.status, a.body)
			}
			for _, l := range []string{"0", "10001", "-1", "ten"} {
				usageError(t, "limit "+l, usage("?limit="+l), "limit")
			}
			if a := usage("?limit=10000"); a.status != 200 {
				t.Errorf("limit 10000: %d %s", a.status, a.body)
			}
			usageError(t, "a cursor made up", usage("?cursor=bm90LWEtY3Vyc29y"), "cursor")
			if first.NextCursor == nil {
				t.Fatalf("the first page of one request of three has no next_cursor: %+v", first)
			}
			c := *first.NextCursor
			usageError(t, "a cursor with another from", usage("?cursor="+c+"&from="+at(-time.Hour)), "cursor")
			if a := usage("?cursor=" + c + "&from=" + first.From.Format(time.RFC3339Nano) + "&to=" + first.To.Format(time.RFC3339Nano)); a.status != 200 {
				t.Errorf("a cursor with its own from and to: %d %s", a.status, a.body)
			}
		})
	}
}

// TestUsageAdmitted: GET /api/v1/usage takes an admission slot (429
// capacity when none is free) and counts against the project's rpm (429
// rate_limited past it), as a generation does.
func TestUsageAdmitted(t *testing.T) {
	t.Run("rpm", func(t *testing.T) {
		g := newGateway(t, setup{now: withinOneMinute(), projectYAML: "    rpm: 2\n"})
		for i := range 2 {
			a := send(t, http.MethodGet, g.url+"/api/v1/usage", "", "Authorization", "Bearer "+testKey)
			if a.status != 200 || a.header.Get("x-ratelimit-remaining-requests") != fmt.Sprint(1-i) {
				t.Fatalf("usage %d: %d %s %v", i, a.status, a.body, a.header)
			}
		}
		a := send(t, http.MethodGet, g.url+"/api/v1/usage", "", "Authorization", "Bearer "+testKey)
		var e apiError
		json.Unmarshal([]byte(a.body), &e)
		if a.status != 429 || e.Error.Code != "rate_limited" || a.header.Get("X-Gateway-Admission-Refused") != "true" || a.header.Get("Retry-After") == "" {
			t.Errorf("usage past the rpm: %d %s %v", a.status, a.body, a.header)
		}
		if b := mustCall(t, g.url, chatBody("")); b.status != 429 || b.code != "rate_limited" {
			t.Errorf("a generation after usage used up the rpm: %d %s", b.status, b.body)
		}
	})
	t.Run("capacity", func(t *testing.T) {
		g := newGateway(t, setup{providers: 1, extraYAML: "server: {max_in_flight: 1}\n"})
		release := holdFirstCall(t, g.ups[0])
		done := make(chan answer, 1)
		go func() { done <- call(context.Background(), g.url, chatBody("")) }()
		for g.ups[0].Calls() == 0 { // the generation holds the one slot
			time.Sleep(time.Millisecond)
		}
		a := send(t, http.MethodGet, g.url+"/api/v1/usage", "", "Authorization", "Bearer "+testKey)
		var e apiError
		json.Unmarshal([]byte(a.body), &e)
		if a.status != 429 || e.Error.Code != "capacity" || a.header.Get("X-Gateway-Admission-Refused") != "true" {
			t.Errorf("usage at capacity: %d %s %v", a.status, a.body, a.header)
		}
		release()
		if b := <-done; b.status != 200 {
			t.Errorf("the generation: %d %s", b.status, b.body)
		}
	})
}
