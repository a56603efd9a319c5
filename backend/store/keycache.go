package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// keyCacheTTL bounds how long a cached key is trusted without asking the
// database. Revocation does not wait for it: the revoking replica drops
// the key at once and, on PostgreSQL, the others drop it when the change
// notification arrives (well under a second). The TTL is the fallback for
// a notification lost in between.
const keyCacheTTL = 5 * time.Second

// keyCacheLimit bounds the cache; past it the cache starts afresh (keys
// are few, so this only guards against pathological use).
const keyCacheLimit = 100_000

type keyEntry struct {
	auth    KeyAuth
	revoked bool
	expires int64 // Unix ns; 0: never
	loaded  time.Time
	touched *atomic.Int64 // last_used_at as last written, Unix ns
}

func newKeyEntry(k *APIKey) *keyEntry {
	e := &keyEntry{auth: KeyAuth{ID: k.ID, OrgID: k.OrgID, Scope: k.Scope, Prefix: k.Prefix, Hash: k.hash},
		revoked: k.RevokedAt != nil, loaded: time.Now(), touched: new(atomic.Int64)}
	if k.ExpiresAt != nil {
		e.expires = k.ExpiresAt.UnixNano()
		at := *k.ExpiresAt
		e.auth.ExpiresAt = &at
	}
	if k.LastUsedAt != nil {
		e.touched.Store(k.LastUsedAt.UnixNano())
	}
	return e
}

// keyCache maps a key's hash to what it grants. Every drop bumps the
// generation, and a put is refused if the generation moved since its read
// began: a lookup that read the row before a revocation committed cannot
// put the old row back after the revocation dropped it.
type keyCache struct {
	mu  sync.RWMutex
	m   map[string]*keyEntry
	gen uint64
}

func newKeyCache() *keyCache { return &keyCache{m: map[string]*keyEntry{}} }

func (c *keyCache) get(hash string) (*keyEntry, bool) {
	c.mu.RLock()
	e, ok := c.m[hash]
	c.mu.RUnlock()
	if !ok || time.Since(e.loaded) > keyCacheTTL {
		return nil, false
	}
	return e, true
}

func (c *keyCache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

func (c *keyCache) put(hash string, e *keyEntry, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if len(c.m) >= keyCacheLimit {
		c.m = map[string]*keyEntry{}
	}
	c.m[hash] = e
}

func (c *keyCache) drop(hash string) {
	c.mu.Lock()
	delete(c.m, hash)
	c.gen++
	c.mu.Unlock()
}

// reset forgets every key (the listener may have missed revocations).
func (c *keyCache) reset() {
	c.mu.Lock()
	c.m = map[string]*keyEntry{}
	c.gen++
	c.mu.Unlock()
}

// prefixRefreshEvery bounds how often keyPrefixes reloads: a key made on
// another replica is seen by this one's filter within it.
const prefixRefreshEvery = time.Second

// keyPrefixes is the set of the prefixes (KeyPrefix) of the keys that are
// not revoked. An address over its limit of refused keys is still served a
// valid key, but a key whose prefix is no key's cannot be valid: it is
// refused without a lookup by its hash. The set costs one query per
// prefixRefreshEvery at most, however many keys are guessed.
type keyPrefixes struct {
	mu     sync.Mutex
	m      map[string]struct{}
	loaded time.Time
}

func (p *keyPrefixes) add(prefix string) {
	p.mu.Lock()
	if p.m != nil {
		p.m[prefix] = struct{}{}
	}
	p.mu.Unlock()
}

// MayBeKey reports whether key may be a valid key: false only when no key
// that was not revoked at most prefixRefreshEvery ago has its prefix (keys
// made on this replica count at once). It looks no key up by its hash; when
// the prefixes cannot be read it answers true (the caller then looks the
// key up, as it would without the filter).
func (db *DB) MayBeKey(ctx context.Context, key string) bool {
	p := &db.prefixes
	prefix := KeyPrefix(key)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m != nil && time.Since(p.loaded) < prefixRefreshEvery {
		_, ok := p.m[prefix]
		_, unrecorded := p.m[""] // a key from before migration 00011 has no prefix: any may be it
		return ok || unrecorded
	}
	db.keyLookups.Add(1)
	rows, err := db.r.QueryContext(ctx, `SELECT prefix FROM api_keys WHERE revoked_at IS NULL`)
	if err != nil {
		return true
	}
	defer rows.Close()
	m := map[string]struct{}{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return true
		}
		m[s] = struct{}{}
	}
	if rows.Err() != nil {
		return true
	}
	p.m, p.loaded = m, time.Now()
	_, ok := m[prefix]
	_, unrecorded := m[""]
	return ok || unrecorded
}
