package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// keyWatches are the callbacks of what is open with each key (streams),
// by the key's hash. A revocation this replica sees (its own RevokeAPIKey,
// or another replica's through the listener's notification) calls them at
// once: no stream asks the database anything per event.
type keyWatches struct {
	mu   sync.Mutex
	next uint64
	m    map[string]map[uint64]func()
}

func (w *keyWatches) add(hash string, f func()) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]map[uint64]func(){}
	}
	if w.m[hash] == nil {
		w.m[hash] = map[uint64]func(){}
	}
	w.next++
	w.m[hash][w.next] = f
	return w.next
}

func (w *keyWatches) remove(hash string, id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if fs := w.m[hash]; fs != nil {
		delete(fs, id)
		if len(fs) == 0 {
			delete(w.m, hash)
		}
	}
}

// fire calls, once, every callback watching hash.
func (w *keyWatches) fire(hash string) {
	w.mu.Lock()
	fs := w.m[hash]
	delete(w.m, hash)
	w.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (w *keyWatches) hashes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.m))
	for h := range w.m {
		out = append(out, h)
	}
	return out
}

// WatchKey calls revoked once when the key of hash (KeyAuth.Hash) is
// revoked, here or on another replica (within the listener's notification
// delay), until stop is called. A key already revoked calls it at once.
// Expiry is the caller's to watch (KeyAuth.ExpiresAt): it needs no news.
func (db *DB) WatchKey(ctx context.Context, hash string, revoked func()) (stop func()) {
	id := db.keyWatch.add(hash, revoked)
	stop = func() { db.keyWatch.remove(hash, id) }
	// Registered first, then checked: a revocation after the check fires
	// the callback; one before it is seen by the check.
	if gone, err := db.keyRevoked(ctx, hash); err == nil && gone {
		db.keyWatch.fire(hash)
	}
	return stop
}

// keyRevoked answers from the cache when it holds the key, else from the
// database (a key the cache dropped, or a cache not trusted while the
// listener is down).
func (db *DB) keyRevoked(ctx context.Context, hash string) (bool, error) {
	if e, ok := db.keys.get(hash); ok {
		return e.revoked, nil
	}
	var revokedAt sql.NullInt64
	err := db.r.QueryRowContext(ctx, `SELECT revoked_at FROM api_keys WHERE hash = ?`, hash).Scan(&revokedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil // deleted with its org
	}
	return revokedAt.Valid, err
}

// recheckWatchedKeys fires the watches of keys revoked while revocations
// could not reach this replica (the listener was down): it runs when the
// listener is back.
func (db *DB) recheckWatchedKeys(ctx context.Context) {
	for _, h := range db.keyWatch.hashes() {
		var revokedAt sql.NullInt64
		err := db.r.QueryRowContext(ctx, `SELECT revoked_at FROM api_keys WHERE hash = ?`, h).Scan(&revokedAt)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && revokedAt.Valid) {
			db.keyWatch.fire(h)
		}
	}
}
