package store

import (
	"database/sql"
	"sync"
)

// recordCache keeps records read or written by this process so the hot read
// path (GET by id) does not touch the database. It is only a copy: entries
// are replaced solely by a higher version, so a slow reader can never put
// back a row older than one a writer already published, and writes made
// inside a transaction are published only after it commits.
//
// On SQLite the process is the only writer. On PostgreSQL other replicas
// write too: their commits reach the cache as notifications (listen.go),
// each of which raises the record's floor (the lowest version the cache may
// hold) and drops an older copy. The floor outlives the entry so that a
// reader that read the row before that commit cannot put its older copy
// back afterwards. While the notifications cannot be trusted (the listening
// connection is down) the cache is off: it serves and keeps nothing, and
// each reset bumps the epoch so that a put from a read begun before the
// reset is refused.
type recordCache struct {
	mu     sync.RWMutex
	byID   map[string]*Record
	floors map[string]int64
	limit  int
	epoch  uint64
	off    bool
}

func newRecordCache(limit int) *recordCache {
	return &recordCache{byID: map[string]*Record{}, floors: map[string]int64{}, limit: limit}
}

// at returns the epoch to pass to putAt for a read about to start.
func (c *recordCache) at() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.epoch
}

// peek returns the cached record itself; callers must not modify it.
func (c *recordCache) peek(id string) (*Record, bool) {
	c.mu.RLock()
	r, ok := c.byID[id]
	c.mu.RUnlock()
	return r, ok
}

// put stores r unless a newer version is already cached (or known to exist).
func (c *recordCache) put(r *Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(r)
}

// putAt is put for a record read from the database during epoch ep: it is
// refused if the cache was reset since, when notifications may have been
// missed between that read and now.
func (c *recordCache) putAt(r *Record, ep uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch == ep {
		c.putLocked(r)
	}
}

func (c *recordCache) putLocked(r *Record) {
	if c.off {
		return
	}
	if cur, ok := c.byID[r.ID]; ok && cur.Version >= r.Version {
		return
	}
	if f, ok := c.floors[r.ID]; ok {
		if r.Version < f {
			return
		}
		delete(c.floors, r.ID)
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

// committed notes that version v of record id was committed (by any
// replica): an older copy is dropped and none older may be put back.
func (c *recordCache) committed(id string, v int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.committedLocked(id, v)
}

func (c *recordCache) committedLocked(id string, v int64) {
	if cur, ok := c.byID[id]; ok {
		if cur.Version >= v {
			return // this process's own write, already published
		}
		delete(c.byID, id)
	}
	if c.floors[id] >= v {
		return
	}
	if len(c.floors) >= c.limit {
		// Floors only matter to reads in flight: forget them all and bump
		// the epoch, which refuses every put from a read begun before.
		clear(c.floors)
		c.epoch++
	}
	c.floors[id] = v
}

// reset empties the cache and refuses puts from reads begun before it; off
// keeps it empty until the next reset with off false.
func (c *recordCache) reset(off bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.byID)
	clear(c.floors)
	c.epoch++
	c.off = off
}

// pendingWrites holds the records written inside open transactions, keyed by
// the transaction, until DB.Tx commits (publish) or rolls back (drop).
var pendingWrites sync.Map // *sql.Tx -> *[]*Record

func notePending(tx *sql.Tx, r *Record) {
	v, _ := pendingWrites.LoadOrStore(tx, &[]*Record{})
	list := v.(*[]*Record)
	*list = append(*list, r.Clone())
}

func (db *DB) settlePending(tx *sql.Tx, committed bool, ep uint64) {
	v, ok := pendingWrites.LoadAndDelete(tx)
	if !ok {
		return
	}
	if committed {
		db.evWake.signal()
	}
	for _, r := range *v.(*[]*Record) {
		if committed {
			db.cache.putAt(r, ep)
		} else {
			db.cache.drop(r.ID)
		}
	}
}

// ForgetRecord drops a cached record; call it after changing a sandboxes row
// with SQL of your own instead of InsertRecordTx/TransitionTx.
func (db *DB) ForgetRecord(id string) { db.cache.drop(id) }
