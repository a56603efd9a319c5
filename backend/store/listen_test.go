package store

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// twoReplicas opens two stores on one new PostgreSQL database, as two
// backend replicas would.
func twoReplicas(t *testing.T) (a, b *DB) {
	t.Helper()
	url := pgtest.Database(t)
	open := func() *DB {
		db, err := Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	return open(), open()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func touch(t *testing.T, db *DB, id, diag string) *Record {
	t.Helper()
	r, err := db.Transition(context.Background(), id, "", "", func(r *Record) error { r.Diagnostic = diag; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A transition on replica A replaces replica B's cached copy, and B's
// callbacks hear of it (with the new phase); A's own callbacks do not.
func TestRemoteChangeReachesOtherReplica(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	var mu sync.Mutex
	var seenB []RemoteChange
	var seenA atomic.Int64
	b.OnRemoteChange(func(c RemoteChange) { mu.Lock(); seenB = append(seenB, c); mu.Unlock() })
	a.OnRemoteChange(func(RemoteChange) { seenA.Add(1) })

	newRecord(t, a, "r1")
	if r, err := b.GetRecord(ctx, "r1"); err != nil || r.Version != 1 {
		t.Fatalf("B reads %+v, %v", r, err)
	}
	eventually(t, "B to cache r1", func() bool { _, ok := b.cache.peek("r1"); return ok })
	r, err := a.Transition(ctx, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "B's cached copy of r1 to be dropped", func() bool {
		c, ok := b.cache.peek("r1")
		return !ok || c.Version == r.Version
	})
	eventually(t, "B's callback", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seenB) == 2 && seenB[1] == RemoteChange{ID: "r1", Version: 2, Phase: sandbox.PhaseCreating}
	})
	if got, _ := b.GetRecord(ctx, "r1"); got.Phase != sandbox.PhaseCreating || got.Version != 2 {
		t.Fatalf("B reads %s v%d after A's transition, want creating v2", got.Phase, got.Version)
	}
	if n := seenA.Load(); n != 0 {
		t.Fatalf("A was called back %d times for its own writes", n)
	}
}

// Read-after-write across replicas: once A's Transition returned, B's very
// next read (a cache hit) returns it, with no waiting in between.
func TestReadBarrierAcrossReplicas(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	newRecord(t, a, "r1")
	b.GetRecord(ctx, "r1")
	eventually(t, "B to cache r1", func() bool { _, ok := b.cache.peek("r1"); return ok })
	for i := range 200 {
		w := touch(t, a, "r1", strconv.Itoa(i))
		got, err := b.GetRecord(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != w.Version || got.Diagnostic != strconv.Itoa(i) {
			t.Fatalf("write %d: B read v%d %q after A acknowledged v%d", i, got.Version, got.Diagnostic, w.Version)
		}
		// Also through the hot path the API serves.
		p, err := b.PeekOrgRecord(ctx, w.OrgID, "r1")
		if err != nil || p.Version != w.Version {
			t.Fatalf("write %d: B peeked v%d (%v) after A acknowledged v%d", i, p.Version, err, w.Version)
		}
	}
}

// Concurrent readers share barriers: many reads cost few NOTIFY round trips.
func TestReadBarrierIsShared(t *testing.T) {
	_, b := twoReplicas(t)
	newRecord(t, b, "r1")
	// The barrier completes (a failing one would send every read to the
	// database, which would hide its absence from the tests above).
	for range 20 {
		if err := b.remote.barrier(context.Background()); err != nil {
			t.Fatalf("read barrier: %v", err)
		}
	}
	b.remote.mu.Lock()
	start := b.remote.seq
	b.remote.mu.Unlock()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := b.GetRecord(context.Background(), "r1"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.remote.mu.Lock()
	rounds := b.remote.seq - start
	b.remote.mu.Unlock()
	if rounds >= 32*50 {
		t.Fatalf("%d barriers for %d reads: not shared", rounds, 32*50)
	}
	t.Logf("%d barriers for %d reads", rounds, 32*50)
}

// A reader that read a row before another replica's commit cannot put that
// older copy into the cache after the commit's notification.
func TestCacheFloorRefusesOlderCopy(t *testing.T) {
	c := newRecordCache(10)
	c.committed("r1", 3)
	c.put(&Record{ID: "r1", Version: 2})
	if _, ok := c.peek("r1"); ok {
		t.Fatal("an older copy was cached after a newer version was committed")
	}
	c.put(&Record{ID: "r1", Version: 3})
	if r, ok := c.peek("r1"); !ok || r.Version != 3 {
		t.Fatal("the committed version was refused")
	}
	ep := c.at()
	c.reset(true)
	c.putAt(&Record{ID: "r2", Version: 1}, ep)
	c.put(&Record{ID: "r2", Version: 1})
	if _, ok := c.peek("r2"); ok {
		t.Fatal("the cache kept a record while off")
	}
	c.reset(false)
	c.putAt(&Record{ID: "r2", Version: 1}, ep)
	if _, ok := c.peek("r2"); ok {
		t.Fatal("a read begun before a reset was cached after it")
	}
}

// The listening connection killed: B empties its cache, resyncs its
// waiters, reads from the database meanwhile, reconnects, and then hears
// of later changes again.
func TestListenerReconnects(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	var resyncs atomic.Int64
	var heard atomic.Int64
	b.OnResync(func() { resyncs.Add(1) })
	b.OnRemoteChange(func(c RemoteChange) {
		if c.ID == "r1" {
			heard.Add(1)
		}
	})
	newRecord(t, a, "r1")
	b.GetRecord(ctx, "r1")
	eventually(t, "B to cache r1", func() bool { _, ok := b.cache.peek("r1"); return ok })

	res, err := a.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = ?`, "LISTEN "+b.remote.syncCh)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("terminated %d listening connections, want 1", n)
	}
	eventually(t, "B to resync after losing and regaining its listener", func() bool { return resyncs.Load() >= 2 && b.Listening() })
	if _, ok := b.cache.peek("r1"); ok {
		t.Fatal("B kept its cache across the lost connection")
	}
	before := heard.Load()
	w := touch(t, a, "r1", "after")
	eventually(t, "B to hear of a change after reconnecting", func() bool { return heard.Load() > before })
	if got, _ := b.GetRecord(ctx, "r1"); got.Version != w.Version {
		t.Fatalf("B reads v%d, want v%d", got.Version, w.Version)
	}
}
