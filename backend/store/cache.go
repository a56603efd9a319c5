package store

import (
	"database/sql"
	"sync"
)

// recordCache keeps records read or written by this process so the hot read
// path (GET by id) does not touch SQLite. It is only a copy: entries are
// replaced solely by a higher version, so a slow reader can never put back a
// row older than one a writer already published, and writes made inside a
// transaction are published only after it commits. The store assumes it is
// the only writer of its database while serving (one backend per database).
type recordCache struct {
	mu    sync.RWMutex
	byID  map[string]*Record
	limit int
}

func newRecordCache(limit int) *recordCache {
	return &recordCache{byID: map[string]*Record{}, limit: limit}
}

func (c *recordCache) get(id string) (*Record, bool) {
	c.mu.RLock()
	r, ok := c.byID[id]
	c.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return r.Clone(), true
}

// peek returns the cached record itself; callers must not modify it.
func (c *recordCache) peek(id string) (*Record, bool) {
	c.mu.RLock()
	r, ok := c.byID[id]
	c.mu.RUnlock()
	return r, ok
}

// put stores r unless a newer version is already cached.
func (c *recordCache) put(r *Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.byID[r.ID]; ok && cur.Version >= r.Version {
		return
	}
	if len(c.byID) >= c.limit {
		for id := range c.byID { // evict an arbitrary entry; misses reload from the database
			delete(c.byID, id)
			break
		}
	}
	c.byID[r.ID] = r.Clone()
}

func (c *recordCache) drop(id string) {
	c.mu.Lock()
	delete(c.byID, id)
	c.mu.Unlock()
}

// pendingWrites holds the records written inside open transactions, keyed by
// the transaction, until DB.Tx commits (publish) or rolls back (drop).
var pendingWrites sync.Map // *sql.Tx -> *[]*Record

func notePending(tx *sql.Tx, r *Record) {
	v, _ := pendingWrites.LoadOrStore(tx, &[]*Record{})
	list := v.(*[]*Record)
	*list = append(*list, r.Clone())
}

func (db *DB) settlePending(tx *sql.Tx, committed bool) {
	v, ok := pendingWrites.LoadAndDelete(tx)
	if !ok {
		return
	}
	for _, r := range *v.(*[]*Record) {
		if committed {
			db.cache.put(r)
		} else {
			db.cache.drop(r.ID)
		}
	}
}

// ForgetRecord drops a cached record; call it after changing a sandboxes row
// with SQL of your own instead of InsertRecordTx/TransitionTx.
func (db *DB) ForgetRecord(id string) { db.cache.drop(id) }
