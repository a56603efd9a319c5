package store

// Coherence across replicas (PostgreSQL).
//
// Every committed write of a sandboxes row or a task environment notifies a
// channel (trigger of migration 00007). Each replica's listener holds one
// connection that LISTENs to those channels and, per notification, raises
// the record's floor in the cache (cache.go) and then calls the callbacks
// registered with OnRemoteChange / OnRemoteTaskEnvChange (wake-ups: long
// polls, admission, the reconciler).
//
// Invalidation alone would leave a window: replica A acknowledges a write,
// the client reads on replica B before B has received the notification, and
// B answers from its older cached copy. A read barrier closes it. PostgreSQL
// delivers notifications to a listener in commit order, so once B has
// received a token it sent itself (NOTIFY on a channel of its own) after a
// read began, it has received every notification committed before that
// read began, and the cache holds nothing older than them. The token is
// sent on the listening connection itself, so it comes back in the reply to
// that NOTIFY (one round trip, no other server process involved), behind
// every notification committed before it. Concurrent readers share one
// barrier (group-commit style: readers join the round not yet sent), so the
// cost is one NOTIFY per batch of reads, not per read.

// When the listening connection fails, notifications may have been missed:
// the cache is emptied and switched off (reads go to the database), the
// resync callbacks run (every waiter re-reads), and the listener reconnects
// with backoff; once it listens again the cache is emptied once more and
// switched back on, and the resync callbacks run again.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Channels of migration 00007's triggers.
const (
	recordsChannel  = "dreadnode_records"
	taskEnvsChannel = "dreadnode_task_envs"
)

const (
	// barrierTimeout bounds a read's wait for its barrier; past it the read
	// goes to the database and the listener is reconnected (it is stuck).
	barrierTimeout = 2 * time.Second
	// heartbeatEvery is how often an idle listener proves it still receives
	// (a silently cut connection otherwise looks like a quiet database).
	heartbeatEvery = 5 * time.Second
	maxBackoff     = 5 * time.Second
)

// RemoteChange is a committed change of a sandbox record, as notified.
type RemoteChange struct {
	ID      string
	Version int64
	Phase   sandbox.Phase
}

var errListenerDown = errors.New("not listening for changes")

// listener keeps this replica's view coherent with the other replicas'
// writes. Nil on SQLite.
type listener struct {
	db     *DB
	cfg    *pgx.ConnConfig
	log    *slog.Logger
	syncCh string // this replica's barrier channel
	pids   *pidSet
	// noBarrier serves cached reads without a barrier (SetReadBarrier).
	noBarrier atomic.Bool

	cbMu      sync.RWMutex
	onRecord  []func(RemoteChange)
	onTaskEnv []func(id string)
	onResync  []func()

	mu        sync.Mutex
	up        bool
	seq       uint64
	open      *round             // the round readers join; not sent yet
	sent      []*round           // sent, waiting for their tokens, in order
	interrupt context.CancelFunc // ends the receiver's current wait (a round opened)
	restart   context.CancelFunc // ends the current session

	cancel context.CancelFunc
	done   chan struct{}
}

// round is one barrier: closed done once its token came back (err nil) or
// it cannot (err set).
type round struct {
	n    uint64
	done chan struct{}
	err  error
}

func newListener(db *DB, cfg *pgx.ConnConfig, pids *pidSet) *listener {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &listener{db: db, cfg: cfg, log: slog.Default(), pids: pids, syncCh: "dreadnode_sync_" + hex.EncodeToString(b[:]),
		done: make(chan struct{})}
}

// start connects once (so a replica that cannot listen fails to open) and
// then keeps listening in the background until stop.
func (l *listener) start(ctx context.Context) error {
	c, err := l.connect(ctx)
	if err != nil {
		return fmt.Errorf("listening for other replicas' changes: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(runCtx, c)
	return nil
}

func (l *listener) stop() {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(cctx, l.cfg)
	if err != nil {
		return nil, err
	}
	// A barrier token is a transaction of its own (pg_notify commits with
	// it); with synchronous_commit on, each one waited for its commit
	// record to reach the disk, the bulk of a barrier's round trip. The
	// token writes nothing that must survive a crash, and its notification
	// still queues behind every one committed before it (commit order does
	// not depend on the flush).
	if _, err := c.Exec(cctx, "SET synchronous_commit TO off"); err != nil {
		_ = c.Close(ctx)
		return nil, err
	}
	for _, ch := range []string{recordsChannel, taskEnvsChannel, l.syncCh} {
		if _, err := c.Exec(cctx, "LISTEN "+ch); err != nil {
			_ = c.Close(ctx)
			return nil, err
		}
	}
	return c, nil
}

func (l *listener) run(ctx context.Context, c *pgx.Conn) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	for {
		if c != nil {
			err := l.serve(ctx, c)
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = c.Close(cctx)
			cancel()
			c = nil
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("lost the PostgreSQL connection that receives other replicas' changes; reading from the database until it is back", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		var err error
		if c, err = l.connect(ctx); err != nil {
			l.log.Warn("reconnecting to PostgreSQL for other replicas' changes failed; retrying", "err", err, "in", backoff)
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = 100 * time.Millisecond
		l.log.Info("receiving other replicas' changes again")
	}
}

// serve runs one connection until it fails or ctx ends.
func (l *listener) serve(ctx context.Context, c *pgx.Conn) error {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); l.heartbeat(sctx) }()

	// Listening from here on: what was cached before may have missed
	// changes, so start afresh, and have every waiter re-read.
	l.db.cache.reset(false)
	l.mu.Lock()
	l.up, l.restart = true, cancel
	l.mu.Unlock()
	l.resync()

	err := l.receive(sctx, c)

	l.db.cache.reset(true)
	l.mu.Lock()
	l.up, l.restart, l.interrupt = false, nil, nil
	l.failRoundsLocked(errListenerDown)
	l.mu.Unlock()
	cancel()
	wg.Wait()
	l.resync()
	return err
}

// receive applies notifications, in commit order, and sends the barrier
// tokens, until the connection fails or ctx ends.
func (l *listener) receive(ctx context.Context, c *pgx.Conn) error {
	for {
		// What pgx received during the last command (the token among it).
		for {
			n, _ := c.WaitForNotification(doneCtx) // returns only what is buffered
			if n == nil {
				break
			}
			l.apply(n)
		}
		l.mu.Lock()
		r := l.open
		l.open = nil
		if r != nil {
			l.sent = append(l.sent, r)
		}
		l.mu.Unlock()
		if r != nil {
			ectx, cancel := context.WithTimeout(ctx, barrierTimeout)
			_, err := c.Exec(ectx, "NOTIFY "+l.syncCh+", '"+strconv.FormatUint(r.n, 10)+"'") // no arguments: the simple protocol, one message
			cancel()
			if err != nil {
				return fmt.Errorf("sending a read barrier: %w", err)
			}
			continue
		}
		// Wait for a notification, or until a reader opens a round.
		wctx, stop := context.WithCancel(ctx)
		l.mu.Lock()
		if l.open != nil {
			l.mu.Unlock()
			stop()
			continue
		}
		l.interrupt = stop
		l.mu.Unlock()
		n, err := c.WaitForNotification(wctx)
		l.mu.Lock()
		l.interrupt = nil
		l.mu.Unlock()
		stop()
		if err != nil {
			if ctx.Err() == nil && !c.IsClosed() && errors.Is(wctx.Err(), context.Canceled) {
				continue // interrupted: a round opened
			}
			return err
		}
		if n != nil {
			l.apply(n)
		}
	}
}

// doneCtx is an ended context: WaitForNotification given it returns a
// notification pgx already holds, or nothing, without reading.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// apply handles one notification.
func (l *listener) apply(n *pgconn.Notification) {
	switch n.Channel {
	case l.syncCh:
		seq, _ := strconv.ParseUint(n.Payload, 10, 64)
		l.finish(seq, nil)
	case recordsChannel:
		c, ok := parseRecordChange(n.Payload)
		if !ok {
			return
		}
		l.db.cache.committed(c.ID, c.Version)
		if !l.pids.has(n.PID) { // this replica's own writes woke their waiters already
			l.cbMu.RLock()
			for _, f := range l.onRecord {
				f(c)
			}
			l.cbMu.RUnlock()
		}
	case taskEnvsChannel:
		if !l.pids.has(n.PID) {
			l.cbMu.RLock()
			for _, f := range l.onTaskEnv {
				f(n.Payload)
			}
			l.cbMu.RUnlock()
		}
	}
}

// parseRecordChange reads "<id> <version> <phase>".
func parseRecordChange(p string) (RemoteChange, bool) {
	f := strings.Fields(p)
	if len(f) != 3 {
		return RemoteChange{}, false
	}
	v, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return RemoteChange{}, false
	}
	return RemoteChange{ID: f[0], Version: v, Phase: sandbox.Phase(f[2])}, true
}

// heartbeat runs a barrier whenever the listener has been idle for a while,
// so a connection that stopped delivering is found out and replaced.
func (l *listener) heartbeat(ctx context.Context) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = l.barrier(ctx)
		}
	}
}

// reconnect ends the current session (its connections are suspect).
func (l *listener) reconnect() {
	l.mu.Lock()
	if l.restart != nil {
		l.restart()
	}
	l.mu.Unlock()
}

// barrier returns once every change committed before it was called has
// reached the cache, or an error (the caller then reads the database).
func (l *listener) barrier(ctx context.Context) error {
	l.mu.Lock()
	if !l.up {
		l.mu.Unlock()
		return errListenerDown
	}
	if l.open == nil {
		l.seq++
		l.open = &round{n: l.seq, done: make(chan struct{})}
		if l.interrupt != nil {
			l.interrupt() // the receiver is waiting: have it send the token
		}
	}
	r := l.open
	l.mu.Unlock()
	t := time.NewTimer(barrierTimeout)
	defer t.Stop()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		l.log.Warn("a change notification took over 2s to come back; reconnecting the listener", "barrier", r.n)
		l.reconnect()
		return errListenerDown
	}
}

// finish completes the rounds up to n: their tokens came back in order (or
// round n's could not be sent: err).
func (l *listener) finish(n uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.sent) > 0 && l.sent[0].n <= n {
		r := l.sent[0]
		l.sent = l.sent[1:]
		r.err = err
		close(r.done)
	}
}

func (l *listener) failRoundsLocked(err error) {
	for _, r := range l.sent {
		r.err = err
		close(r.done)
	}
	if l.open != nil {
		l.open.err = err
		close(l.open.done)
	}
	l.sent, l.open = nil, nil
}

func (l *listener) resync() {
	l.cbMu.RLock()
	defer l.cbMu.RUnlock()
	for _, f := range l.onResync {
		f()
	}
}

// pidSet holds the server process ids of this replica's pooled connections:
// a notification from one of them is this replica's own write.
type pidSet struct {
	mu sync.RWMutex
	m  map[uint32]struct{}
}

func newPIDSet() *pidSet { return &pidSet{m: map[uint32]struct{}{}} }

func (p *pidSet) add(pid uint32) {
	p.mu.Lock()
	p.m[pid] = struct{}{}
	p.mu.Unlock()
}

func (p *pidSet) remove(pid uint32) {
	p.mu.Lock()
	delete(p.m, pid)
	p.mu.Unlock()
}

func (p *pidSet) has(pid uint32) bool {
	if p == nil {
		return false
	}
	p.mu.RLock()
	_, ok := p.m[pid]
	p.mu.RUnlock()
	return ok
}

// OnRemoteChange registers f to be called, on PostgreSQL, for every sandbox
// record change another replica commits, after this replica's cache has
// dropped any older copy. f runs on the listener's goroutine: it must not
// block (wake something up, do the work elsewhere). A no-op on SQLite.
func (db *DB) OnRemoteChange(f func(RemoteChange)) {
	if l := db.remote; l != nil {
		l.cbMu.Lock()
		l.onRecord = append(l.onRecord, f)
		l.cbMu.Unlock()
	}
}

// OnRemoteTaskEnvChange is OnRemoteChange for task environments (by id).
func (db *DB) OnRemoteTaskEnvChange(f func(id string)) {
	if l := db.remote; l != nil {
		l.cbMu.Lock()
		l.onTaskEnv = append(l.onTaskEnv, f)
		l.cbMu.Unlock()
	}
}

// OnResync registers f to be called when changes of other replicas may have
// been missed (the listening connection was lost, and again once it is
// back): everything waiting on a change should re-read. Same rules as
// OnRemoteChange.
func (db *DB) OnResync(f func()) {
	if l := db.remote; l != nil {
		l.cbMu.Lock()
		l.onResync = append(l.onResync, f)
		l.cbMu.Unlock()
	}
}

// Listening reports whether this replica currently receives the other
// replicas' changes (always true on SQLite, which has no other replica).
func (db *DB) Listening() bool {
	l := db.remote
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// fresh reports whether a cached record may be served: on PostgreSQL it
// waits for a read barrier (see above); false means read the database.
func (db *DB) fresh(ctx context.Context) bool {
	if db.remote == nil || relaxed(ctx) || db.remote.noBarrier.Load() {
		return true
	}
	return db.remote.barrier(ctx) == nil
}

// SetReadBarrier turns the read barrier on (the default) or off; off, every
// read is as if Relaxed. No effect on SQLite.
func (db *DB) SetReadBarrier(on bool) {
	if db.remote != nil {
		db.remote.noBarrier.Store(!on)
	}
}

type relaxedKey struct{}

// Relaxed marks ctx for reads that may be served from this replica's cache
// without waiting for a read barrier: they may miss another replica's write
// for as long as its notification takes to arrive (typically under a
// millisecond). For background loops that act through the version-checked
// Transition anyway (the reconciler), never for answers to clients.
func Relaxed(ctx context.Context) context.Context { return context.WithValue(ctx, relaxedKey{}, true) }

func relaxed(ctx context.Context) bool {
	v, _ := ctx.Value(relaxedKey{}).(bool)
	return v
}
