package billing

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// RawKeyPrefix starts every issued key.
const RawKeyPrefix = "sk-bg-"

// rawKeyChars is the number of random base62 characters of an issued key
// (about 190 bits).
const rawKeyChars = 32

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// HashKey is how a key is stored and looked up: hex(HMAC-SHA256(pepper,
// key)). The pepper is a server secret kept out of the store, so that the
// store alone (a backup, a leaked table) does not let anyone test guesses.
// Changing the pepper orphans every stored key.
func HashKey(pepper []byte, key string) string {
	pool := hmacPool(pepper)
	m := pool.Get().(*keyHMAC)
	m.h.Reset()
	// The key goes in through a buffer of the pooled state's: []byte(key)
	// given to the hash.Hash interface would be a copy on the heap.
	for len(key) > 0 {
		n := copy(m.in[:], key)
		m.h.Write(m.in[:n])
		key = key[n:]
	}
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], m.h.Sum(m.sum[:0]))
	pool.Put(m)
	return string(out[:])
}

// keyHMAC is a pooled HMAC-SHA256 state with the buffers HashKey writes
// through, so that a hash allocates only its result.
type keyHMAC struct {
	h   hash.Hash
	in  [256]byte
	sum [sha256.Size]byte
}

// hmacs pools the HMAC-SHA256 states of the last pepper used (a process has
// one): a key is hashed on every request, and a new HMAC is five more
// allocations and two more block compressions (its pads) than a reset one.
var hmacs atomic.Pointer[pepperPool]

type pepperPool struct {
	pepper string
	pool   sync.Pool
}

func hmacPool(pepper []byte) *sync.Pool {
	if p := hmacs.Load(); p != nil && p.pepper == string(pepper) {
		return &p.pool
	}
	p := &pepperPool{pepper: string(pepper)} // a copy: the caller may reuse its slice
	p.pool.New = func() any { return &keyHMAC{h: hmac.New(sha256.New, []byte(p.pepper))} }
	hmacs.Store(p)
	return &p.pool
}

// ConfigKeyID is the key id of a key written in the config file: "cfg_"
// and 16 hex digits of an HMAC of the key (with a domain separator, so it
// is not a prefix of HashKey), stable across restarts and instances, and
// revealing nothing of a weak configured key without the pepper. A new
// pepper gives config keys new ids (and so fresh key spend).
func ConfigKeyID(pepper []byte, key string) string {
	return "cfg_" + HashKey(pepper, "buzzgate key id\x00"+key)[:16]
}

// NewRawKey returns a fresh key: RawKeyPrefix and 32 random base62
// characters.
func NewRawKey() string {
	var b strings.Builder
	b.Grow(len(RawKeyPrefix) + rawKeyChars)
	b.WriteString(RawKeyPrefix)
	buf := make([]byte, 64)
	for b.Len() < len(RawKeyPrefix)+rawKeyChars {
		_, _ = rand.Read(buf) // never fails (crypto/rand panics instead)
		for _, c := range buf {
			// 248 = 4*62: rejection keeps the characters uniform.
			if c < 248 && b.Len() < len(RawKeyPrefix)+rawKeyChars {
				b.WriteByte(base62[c%62])
			}
		}
	}
	return b.String()
}

// NewKeyID returns a fresh key id for an issued key: "key_" and 16 random
// hex digits.
func NewKeyID() string {
	var buf [8]byte
	_, _ = rand.Read(buf[:])
	return "key_" + hex.EncodeToString(buf[:])
}

// KeyRecord is a stored API key (never the raw key).
type KeyRecord struct {
	// Hash is HashKey(pepper, raw key).
	Hash      string
	Project   string
	KeyID     string
	Revoked   bool
	CreatedAt time.Time
	// Rates are the key's own rate limits and budget (an issued key's;
	// a config key's come from the config).
	Rates Rates
}

// Rates are an issued key's or an admin-created project's rpm and tpm (0:
// none) and its budget (nil: none), as the config's keys and projects have
// them.
type Rates struct {
	RPM, TPM int64
	Budget   *catalog.Budget
}

// KeyStore keeps API keys by their hash. The spend limit of a key is not
// here but in the Ledger, next to the key's spend (SetKeyLimit),
// so that the 402 decision reads one place. It is safe for concurrent use.
// Every implementation passes billingtest.RunKeyStore.
type KeyStore interface {
	// Lookup finds a key by its hash: ErrUnknownKey when there is none, its
	// record and ErrKeyRevoked when it is revoked.
	Lookup(ctx context.Context, hash string) (KeyRecord, error)
	// Issue creates a key for an existing project (ErrUnknownProject
	// otherwise) and returns the raw key, which is shown once and never
	// stored.
	Issue(ctx context.Context, project string) (raw string, rec KeyRecord, err error)
	// Revoke revokes a key by its id (ErrUnknownKey when there is none).
	// Revoking twice is fine.
	Revoke(ctx context.Context, keyID string) error
	// CreateProject creates a project with a prepaid balance (nil:
	// unlimited); ErrProjectExists when it exists (created, or seeded by
	// Ledger.Seed).
	CreateProject(ctx context.Context, id string, balanceNanos *int64) error
	// ImportKey stores a key known by its hash (a key of the config file,
	// with id ConfigKeyID): a no-op when the store holds it already for the
	// same project and id (revoked or not: a revoked config key stays
	// revoked), ErrKeyConflict when it holds it for another.
	ImportKey(ctx context.Context, project, hash, keyID string) error
	// ProjectExists reports whether the project was created
	// (CreateProject) or seeded (Ledger.Seed).
	ProjectExists(ctx context.Context, project string) (bool, error)
	// KeyProject returns the project a key id belongs to (revoked or not),
	// ErrUnknownKey when there is no key of that id.
	KeyProject(ctx context.Context, keyID string) (project string, err error)
	// SetKeyRates sets a key's rate limits and budget by its id
	// (ErrUnknownKey when there is none); Lookup returns them.
	SetKeyRates(ctx context.Context, keyID string, r Rates) error
	// SetProjectRates sets a project's rate limits and budget
	// (ErrUnknownProject when it was neither created nor seeded);
	// Ledger.Account returns them.
	SetProjectRates(ctx context.Context, project string, r Rates) error
}

// KeyCacheOptions configures a KeyCache.
type KeyCacheOptions struct {
	// HitTTL is how long a found key (revoked or not) is remembered.
	// Default 30s: a key revoked through another instance keeps working
	// there for up to HitTTL.
	HitTTL time.Duration
	// MissTTL is how long an unknown key is remembered. Default 5s: a key
	// issued through another instance may be refused there for up to
	// MissTTL after an attempt with it.
	MissTTL time.Duration
	// MaxEntries bounds the found keys remembered; when full, the expired
	// ones are dropped, and when none has expired it starts over. Default
	// 100,000.
	MaxEntries int
	// MaxMisses bounds the unknown keys remembered, apart from the found
	// ones: unknown keys, however many, never push a found key out. When
	// full it starts over. Default 10,000.
	MaxMisses int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// KeyCache is a KeyStore that remembers Lookups in process for a short
// while, so that authenticating a request costs no store read most of the
// time. Keys that exist and unknown keys are remembered apart, each within
// its own bound, so that a stream of made-up keys cannot evict the keys
// in use; and concurrent Lookups of one hash share one store read. Issue,
// Revoke and ImportKey through the cache take effect on it at once;
// through another instance, within the TTLs (KeyCacheOptions). Store
// failures are not remembered.
type KeyCache struct {
	KeyStore
	opts KeyCacheOptions

	mu     sync.Mutex
	hits   map[string]cached
	misses map[string]time.Time // hash -> until
	// flights are the store reads under way, by hash.
	flights map[string]*flight
	// gen counts the forgets: a read that began before one does not
	// remember what it found.
	gen uint64
}

type cached struct {
	rec   KeyRecord
	err   error
	until time.Time
}

// flight is one store read that concurrent Lookups of its hash wait for.
type flight struct {
	done chan struct{}
	rec  KeyRecord
	err  error
	// waiters counts the Lookups that joined it (tests).
	waiters int
}

// NewKeyCache wraps ks.
func NewKeyCache(ks KeyStore, opts KeyCacheOptions) *KeyCache {
	if opts.HitTTL <= 0 {
		opts.HitTTL = 30 * time.Second
	}
	if opts.MissTTL <= 0 {
		opts.MissTTL = 5 * time.Second
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 100_000
	}
	if opts.MaxMisses <= 0 {
		opts.MaxMisses = 10_000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &KeyCache{KeyStore: ks, opts: opts, hits: map[string]cached{}, misses: map[string]time.Time{}, flights: map[string]*flight{}}
}

// Lookup implements KeyStore.
func (c *KeyCache) Lookup(ctx context.Context, hash string) (KeyRecord, error) {
	for {
		now := c.opts.Now()
		c.mu.Lock()
		if e, ok := c.hits[hash]; ok && now.Before(e.until) {
			c.mu.Unlock()
			return e.rec, e.err
		}
		if until, ok := c.misses[hash]; ok && now.Before(until) {
			c.mu.Unlock()
			return KeyRecord{}, ErrUnknownKey
		}
		if f := c.flights[hash]; f != nil {
			f.waiters++
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return KeyRecord{}, ctx.Err()
			}
			if isContextErr(f.err) && ctx.Err() == nil {
				continue // the reader's caller left; this one has not
			}
			return f.rec, f.err
		}
		f := &flight{done: make(chan struct{})}
		c.flights[hash] = f
		gen := c.gen
		c.mu.Unlock()

		c.read(ctx, hash, f, gen, now)
		return f.rec, f.err
	}
}

// read makes f's store read and ends f, whatever happens (its waiters
// never wait for a read that panicked).
func (c *KeyCache) read(ctx context.Context, hash string, f *flight, gen uint64, now time.Time) {
	f.err = errors.New("billing: key store lookup did not return")
	defer func() {
		c.mu.Lock()
		delete(c.flights, hash)
		if gen == c.gen {
			c.remember(hash, f.rec, f.err, now)
		}
		c.mu.Unlock()
		close(f.done)
	}()
	f.rec, f.err = c.KeyStore.Lookup(ctx, hash)
}

// remember keeps a store's answer (c.mu held): a found key among the hits,
// an unknown one among the misses, a failure nowhere.
func (c *KeyCache) remember(hash string, rec KeyRecord, err error, now time.Time) {
	switch {
	case err == nil, errors.Is(err, ErrKeyRevoked):
		if len(c.hits) >= c.opts.MaxEntries {
			for h, e := range c.hits {
				if !now.Before(e.until) {
					delete(c.hits, h)
				}
			}
			if len(c.hits) >= c.opts.MaxEntries {
				clear(c.hits)
			}
		}
		delete(c.misses, hash)
		c.hits[hash] = cached{rec: rec, err: err, until: now.Add(c.opts.HitTTL)}
	case errors.Is(err, ErrUnknownKey):
		if len(c.misses) >= c.opts.MaxMisses {
			clear(c.misses)
		}
		delete(c.hits, hash)
		c.misses[hash] = now.Add(c.opts.MissTTL)
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Issue implements KeyStore.
func (c *KeyCache) Issue(ctx context.Context, project string) (string, KeyRecord, error) {
	raw, rec, err := c.KeyStore.Issue(ctx, project)
	if err == nil {
		c.forgetHash(rec.Hash)
	}
	return raw, rec, err
}

// Revoke implements KeyStore.
func (c *KeyCache) Revoke(ctx context.Context, keyID string) error {
	err := c.KeyStore.Revoke(ctx, keyID)
	c.forget(func(_ string, e cached) bool { return e.rec.KeyID == keyID })
	return err
}

// SetProjectRates implements KeyStore.
func (c *KeyCache) SetProjectRates(ctx context.Context, project string, r Rates) error {
	return c.KeyStore.SetProjectRates(ctx, project, r)
}

// SetKeyRates implements KeyStore.
func (c *KeyCache) SetKeyRates(ctx context.Context, keyID string, r Rates) error {
	err := c.KeyStore.SetKeyRates(ctx, keyID, r)
	c.forget(func(_ string, e cached) bool { return e.rec.KeyID == keyID })
	return err
}

// ImportKey implements KeyStore.
func (c *KeyCache) ImportKey(ctx context.Context, project, hash, keyID string) error {
	err := c.KeyStore.ImportKey(ctx, project, hash, keyID)
	c.forgetHash(hash)
	return err
}

func (c *KeyCache) forget(match func(string, cached) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k, e := range c.hits {
		if match(k, e) {
			delete(c.hits, k)
		}
	}
}

// forgetHash forgets what the cache knows of one hash, found or unknown.
func (c *KeyCache) forgetHash(hash string) {
	c.forget(func(h string, _ cached) bool { return h == hash })
	c.mu.Lock()
	delete(c.misses, hash)
	c.mu.Unlock()
}
