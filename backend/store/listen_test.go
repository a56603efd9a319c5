package store

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
// next read (a cache hit) returns it, with no waiting in between. Both kinds
// of barrier: the empty query of servers from 15 (this server) and the
// NOTIFY of earlier ones.
func TestReadBarrierAcrossReplicas(t *testing.T) {
	for _, notify := range []bool{false, true} {
		t.Run(map[bool]string{false: "empty query", true: "NOTIFY"}[notify], func(t *testing.T) {
			a, b := twoReplicas(t)
			ctx := context.Background()
			if notify {
				pid := b.remote.pid.Load()
				b.remote.notifyBarrier.Store(true)
				b.remote.reconnect()
				eventually(t, "B to listen again", func() bool { return b.Listening() && b.remote.pid.Load() != pid })
			}
			b.remote.mu.Lock()
			q := string(b.remote.query)
			b.remote.mu.Unlock()
			if strings.Contains(q, "NOTIFY") != notify {
				t.Fatalf("B's barrier is %q", q)
			}
			newRecord(t, a, "r1")
			if _, err := b.GetRecord(ctx, "r1"); err != nil {
				t.Fatal(err)
			}
			eventually(t, "B to cache r1", func() bool { _, ok := b.cache.peek("r1"); return ok })
			for i := range 300 {
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
			if _, ok := b.cache.peek("r1"); !ok {
				t.Fatal("B no longer caches r1: the reads above went to the database, not through the barrier")
			}
		})
	}
}

func TestBarrierQueryByServerVersion(t *testing.T) {
	for v, notify := range map[string]bool{
		"15.18 (Debian 15.18-0+deb12u1)": false, "16beta1": false, "17.2": false,
		"14.9": true, "9.6.24": true, "": true, "unknown": true,
	} {
		if got := strings.Contains(string(barrierQuery(v, "ch", false)), "NOTIFY ch"); got != notify {
			t.Errorf("server_version %q: NOTIFY barrier %v, want %v", v, got, notify)
		}
	}
	if !strings.Contains(string(barrierQuery("17.2", "ch", true)), "NOTIFY ch") {
		t.Error("a forced NOTIFY barrier was not one")
	}
	if q := queryMessage(""); string(q) != "Q\x00\x00\x00\x05\x00" {
		t.Errorf("empty query message %q", q)
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
	if _, err := b.GetRecord(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B to cache r1", func() bool { _, ok := b.cache.peek("r1"); return ok })

	res, err := a.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ?`, int64(b.remote.pid.Load()))
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

// The server process behind B's listening connection frozen (SIGSTOP): a
// read waiting for its barrier is failed over to the database within the
// barrier timeout and answers the latest write; B reconnects on a new
// connection and its barrier works again once the old process is thawed.
func TestFrozenListenerFailsReadsOver(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	newRecord(t, a, "r1")
	if _, err := b.GetRecord(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B to cache r1", func() bool { _, ok := b.cache.peek("r1"); return ok })
	pid := int(b.remote.pid.Load())
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("freezing B's listening server process %d: %v", pid, err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer thaw()
	w := touch(t, a, "r1", "while frozen")
	t0 := time.Now()
	got, err := b.GetRecord(ctx, "r1")
	waited := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != w.Version {
		t.Fatalf("B read v%d with its listener frozen, want v%d (read from the database)", got.Version, w.Version)
	}
	if limit := barrierTimeout + time.Second; waited > limit {
		t.Fatalf("the read waited %s for a frozen listener, want at most %s", waited, limit)
	}
	thaw()
	eventually(t, "B to listen again on a new connection", func() bool {
		return b.Listening() && int(b.remote.pid.Load()) != pid
	})
	if err := b.remote.barrier(ctx); err != nil {
		t.Fatalf("barrier after reconnecting: %v", err)
	}
}
