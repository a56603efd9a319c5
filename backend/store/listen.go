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
// B answers from its older cached copy. A read barrier closes it: after a
// read began, B sends a query on the listening connection itself and serves
// the cached copy only once the reply is back, since the server sends every
// notification committed before that query ahead of its reply (see
// barrierQuery for why, per server version). Concurrent readers share one
// barrier (group-commit style: readers join the round not yet sent), so the
// cost is one round trip per batch of reads, not per read.

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
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Channels of migration 00007's triggers.
const (
	recordsChannel  = "dreadnode_records"
	taskEnvsChannel = "dreadnode_task_envs"
	apiKeysChannel  = "dreadnode_api_keys" // migration 00011: a key revoked (payload: its hash)
)

const (
	// barrierTimeout bounds a barrier's round trip; past it the waiting
	// reads go to the database and the listener is reconnected (it is stuck).
	barrierTimeout = 2 * time.Second
	// heartbeatEvery is how often an idle listener proves it still receives
	// (a silently cut connection otherwise looks like a quiet database).
	heartbeatEvery = 5 * time.Second
	maxBackoff     = 5 * time.Second
)

// maxInFlight is how many barrier rounds may wait for their replies at
// once. One: reads that arrive while a round is out join the next, so each
// round carries every read of a round trip. Two cut a read's wait by up to
// half a round trip but sent more rounds than that saved (make bench,
// get-pg, alone: 24.2k vs 26.9k req/s).
const maxInFlight = 1

// barrierQuery is what a barrier sends on the listening connection; the
// round ends with the reply's ReadyForQuery.
//
// From PostgreSQL 15, an empty query. A committing backend signals every
// listener that has not yet read its notification before it acknowledges
// the commit (AtCommit_Notify), and a backend that has run a command
// delivers the notifications it was signalled for before its
// ReadyForQuery (since 15; before, only once it next waited for input). So
// the reply to a query sent after a commit was acknowledged comes behind
// that commit's notification. It costs the server no transaction id, no
// lock and no write: measured against the NOTIFY below, 27.0–28.0k vs
// 22.7–23.2k req/s (make bench, get-pg).
//
// Before 15, a NOTIFY on the replica's own channel: a session that has
// notified reads the queue before its ReadyForQuery in every version, and
// the queue is in commit order.
func barrierQuery(serverVersion, syncCh string, notify bool) []byte {
	v := strings.TrimSpace(serverVersion)
	digits := len(v) - len(strings.TrimLeft(v, "0123456789"))
	major, _ := strconv.Atoi(v[:digits]) // "15.18 (Debian …)", "16beta1"; unknown: 0
	if notify || major < 15 {
		return queryMessage("NOTIFY " + syncCh + ", 'n'") // no arguments: the simple protocol, one message
	}
	return queryMessage("")
}

// queryMessage encodes a simple-protocol Query message.
func queryMessage(sql string) []byte {
	b, _ := (&pgproto3.Query{String: sql}).Encode(nil) // fails only past 1 GiB
	return b
}

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
	syncCh string // this replica's barrier channel (servers before 15)
	pids   *pidSet
	// noBarrier serves cached reads without a barrier (SetReadBarrier).
	noBarrier atomic.Bool
	// notifyBarrier makes the next sessions send NOTIFY barriers whatever
	// the server's version (tests).
	notifyBarrier atomic.Bool

	cbMu      sync.RWMutex
	onRecord  []func(RemoteChange)
	onTaskEnv []func(id string)
	onResync  []func()

	mu       sync.Mutex
	up       bool
	seq      uint64
	open     *round             // the round readers join; not sent yet
	sent     []*round           // sent, waiting for their replies, in order
	conn     net.Conn           // the current session's socket, barriers are written to
	query    []byte             // the current session's barrierQuery
	restart  context.CancelFunc // ends the current session
	answered time.Time          // when the last round came back
	stalled  error              // why watch ended the current session
	pid      atomic.Uint32      // the current session's server process

	cancel context.CancelFunc
	done   chan struct{}
}

// round is one barrier: closed done once its reply came back (err nil) or
// it cannot (err set).
type round struct {
	n    uint64
	at   time.Time // when sent
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
	// A NOTIFY barrier (servers before 15) is a transaction of its own;
	// with synchronous_commit on, each one waited for its commit record to
	// reach the disk, the bulk of a barrier's round trip. It writes nothing
	// that must survive a crash, and its notification still queues behind
	// every one committed before it (commit order does not depend on the
	// flush).
	if _, err := c.Exec(cctx, "SET synchronous_commit TO off"); err != nil {
		_ = c.Close(ctx)
		return nil, err
	}
	for _, ch := range []string{recordsChannel, taskEnvsChannel, apiKeysChannel, l.syncCh} {
		if _, err := c.Exec(cctx, "LISTEN "+ch); err != nil {
			_ = c.Close(ctx)
			return nil, err
		}
	}
	return c, nil
}

func (l *listener) run(ctx context.Context, c *pgx.Conn) {
	defer close(l.done)
	pause := &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, Multiplier: 2, MaxInterval: maxBackoff}
	for {
		if c != nil {
			err := l.serve(ctx, c)
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = c.Close(cctx) // a no-op once taken over; serve closed the socket
			cancel()
			c = nil
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("lost the PostgreSQL connection that receives other replicas' changes; reading from the database until it is back", "err", err)
		}
		wait := pause.NextBackOff()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		var err error
		if c, err = l.connect(ctx); err != nil {
			l.log.Warn("reconnecting to PostgreSQL for other replicas' changes failed; retrying", "err", err, "in", wait)
			continue
		}
		pause.Reset()
		l.log.Info("receiving other replicas' changes again")
	}
}

// serve runs one connection until it fails or ctx ends.
//
// The connection is taken over from pgx once it listens: pgx allows one
// operation at a time, so a barrier sent while the receiver waited for a
// notification had to interrupt that wait first (a cancelled context, a
// read deadline, a new wait), a cost paid for nearly every round. Taken
// over, one goroutine reads every message the server sends (notifications,
// and the replies that end barrier rounds) while barriers are written to
// the socket directly by whichever goroutine opens a round.
func (l *listener) serve(ctx context.Context, c *pgx.Conn) error {
	syncCtx, cancelSync := context.WithTimeout(ctx, barrierTimeout) // SyncConn pings a server that sent more
	err := c.PgConn().SyncConn(syncCtx)
	cancelSync()
	if err != nil {
		return err
	}
	hc, err := c.PgConn().Hijack()
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	stopClosing := context.AfterFunc(sctx, func() { _ = hc.Conn.Close() }) // ends receive
	defer stopClosing()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); l.watch(sctx) }()

	// Listening from here on: what was cached before may have missed
	// changes, so start afresh, and have every waiter re-read.
	// (Notifications pgx received before the take-over are of commits
	// before this reset: nothing cached after it can predate them.)
	l.db.cache.reset(false)
	l.db.keys.reset()
	// Revocations made while nothing listened reached no stream: look.
	wg.Add(1)
	go func() { defer wg.Done(); l.db.recheckWatchedKeys(sctx) }()
	l.mu.Lock()
	l.up, l.conn, l.restart, l.answered = true, hc.Conn, cancel, time.Now()
	l.query = barrierQuery(hc.ParameterStatuses["server_version"], l.syncCh, l.notifyBarrier.Load())
	l.mu.Unlock()
	l.pid.Store(hc.PID)
	l.resync()

	err = l.receive(hc.Frontend)

	l.db.cache.reset(true)
	l.db.keys.reset()
	l.mu.Lock()
	l.up, l.conn, l.restart = false, nil, nil
	l.failRoundsLocked(errListenerDown)
	if l.stalled != nil {
		err, l.stalled = l.stalled, nil
	}
	l.mu.Unlock()
	cancel()
	_ = hc.Conn.Close()
	wg.Wait()
	l.resync()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// receive applies notifications, in commit order, and ends barrier rounds
// as their replies come back, until the connection fails.
func (l *listener) receive(fe *pgproto3.Frontend) error {
	for {
		msg, err := fe.Receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.NotificationResponse:
			l.apply(m.PID, m.Channel, m.Payload)
		case *pgproto3.ReadyForQuery:
			l.roundDone()
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("read barrier: %w", pgconn.ErrorResponseToPgError(m))
		}
	}
}

// apply handles one notification.
func (l *listener) apply(pid uint32, channel, payload string) {
	switch channel {
	case recordsChannel:
		c, ok := parseRecordChange(payload)
		if !ok {
			return
		}
		l.db.cache.committed(c.ID, c.Version)
		if !l.pids.has(pid) { // this replica's own writes woke their waiters already
			l.cbMu.RLock()
			for _, f := range l.onRecord {
				f(c)
			}
			l.cbMu.RUnlock()
		}
	case apiKeysChannel:
		l.db.keys.drop(payload)
		l.db.keyWatch.fire(payload) // what is open with it on this replica ends too
	case taskEnvsChannel:
		if !l.pids.has(pid) {
			l.cbMu.RLock()
			for _, f := range l.onTaskEnv {
				f(payload)
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

// watch ends a session that stopped answering: a barrier out for longer
// than barrierTimeout fails every waiting read over to the database and
// reconnects. An idle listener sends a barrier every heartbeatEvery, so a
// silently cut connection is found out even when nobody reads.
// (One watchdog per session rather than a timer per read: reads stay cheap.)
func (l *listener) watch(ctx context.Context) {
	t := time.NewTicker(barrierTimeout / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		l.mu.Lock()
		if len(l.sent) > 0 && now.Sub(l.sent[0].at) > barrierTimeout {
			l.stalled = fmt.Errorf("PostgreSQL has not answered read barrier %d for %s", l.sent[0].n, now.Sub(l.sent[0].at).Round(time.Millisecond))
			if l.restart != nil {
				l.restart()
			}
			l.mu.Unlock()
			return
		}
		if len(l.sent) == 0 && l.open == nil && now.Sub(l.answered) > heartbeatEvery {
			l.openLocked()
		}
		l.mu.Unlock()
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
	r := l.openLocked()
	l.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openLocked returns the round a read joins now: the open one, or a new
// one, sent at once unless maxInFlight rounds are out already.
func (l *listener) openLocked() *round {
	r := l.open
	if r == nil {
		l.seq++
		r = &round{n: l.seq, done: make(chan struct{})}
		l.open = r
		l.sendLocked()
	}
	return r
}

// sendLocked sends the open round's barrier unless maxInFlight rounds
// already wait for their replies (the round then goes when one returns).
func (l *listener) sendLocked() {
	if l.open == nil || len(l.sent) >= maxInFlight || l.conn == nil {
		return
	}
	r := l.open
	r.at = time.Now()
	l.open = nil
	l.sent = append(l.sent, r)
	if _, err := l.conn.Write(l.query); err != nil && l.restart != nil {
		l.restart() // receive fails, and with it every round
	}
}

// roundDone ends the oldest round in flight: its reply came back, behind
// every notification committed before it was sent.
func (l *listener) roundDone() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.sent) == 0 {
		return
	}
	r := l.sent[0]
	l.sent = l.sent[1:]
	close(r.done)
	l.answered = time.Now()
	l.sendLocked()
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
