package store

import (
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
	e := &keyEntry{auth: KeyAuth{ID: k.ID, OrgID: k.OrgID, Scope: k.Scope, Prefix: k.Prefix},
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
