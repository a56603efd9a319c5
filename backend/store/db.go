// Package store is the backend's database: an embedded SQLite file by
// default, or PostgreSQL (through pgx) for several replicas. It holds the sandbox records (the single source of truth for the
// reconciler), orgs and keys, and the schema of every package's tables
// (migrations/, applied by Open).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrNotFound is returned when a row does not exist.
var ErrNotFound = errors.New("not found")

// DB wraps the database's pools. On SQLite, two pools on one file: a single
// writer connection, so write transactions queue in Go instead of failing
// with SQLITE_BUSY, and a reader pool that reads concurrently under WAL. On
// PostgreSQL the server handles concurrent writers, so both are one pool
// (w == r) of pgx connections that rebind `?` placeholders (rebind.go).
type DB struct {
	w       *sql.DB
	r       *sql.DB
	path    string
	dialect Dialect
	cache   *recordCache
	// remote keeps the cache and the waiters coherent with other replicas'
	// writes (listen.go); nil on SQLite.
	remote *listener
	// stmts holds prepared list statements by SQL text (see prepared).
	stmts  sync.Map
	nstmts atomic.Int64
	// keys caches API keys (keycache.go); keyLookups counts its misses.
	keys       *keyCache
	keyLookups atomic.Int64
	// keyWatch are the streams open with each key (keywatch.go).
	keyWatch keyWatches
	// prefixes are the prefixes of the keys that may work (keycache.go).
	prefixes keyPrefixes
	// evWake wakes event streams (eventwake.go).
	evWake eventWake
	// ckStop stops SQLite's checkpoint loop (checkpoint.go); ckDone is
	// closed when it has.
	ckStop chan struct{}
	ckDone chan struct{}
}

// Open opens (creating if needed) the database named by url: a file path,
// "sqlite://path" or "file:path" for SQLite, "postgres://…" or
// "postgresql://…" for PostgreSQL (whose database must exist; the schema is
// created or migrated either way).
func Open(ctx context.Context, url string) (*DB, error) {
	path := url
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return openPostgres(ctx, url)
	case strings.HasPrefix(url, "sqlite://"):
		path = strings.TrimPrefix(url, "sqlite://")
	case strings.HasPrefix(url, "file:"):
		path = strings.TrimPrefix(url, "file:")
	}
	if path == "" {
		return nil, fmt.Errorf("DREADNODE_DATABASE_URL: empty database path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating database directory %s: %w", dir, err)
		}
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate" +
		"&_pragma=wal_autocheckpoint(" + strconv.Itoa(walBackstop) + ")" // checkpoints run beside the writer (checkpoint.go)
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(max(4, runtime.NumCPU()*2))
	db := &DB{w: w, r: r, path: path, dialect: SQLite, cache: newRecordCache(100_000), keys: newKeyCache()}
	if err := w.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	// Migrations run on the writer, the one connection that may write.
	if err := MigrateSchema(ctx, w, SQLite); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	db.ckStop, db.ckDone = make(chan struct{}), make(chan struct{})
	go checkpointLoop(r, db.ckStop, db.ckDone)
	return db, nil
}

// pgMaxConns bounds a replica's PostgreSQL connections: enough for the
// reconciler's workers and concurrent requests, small enough that several
// replicas stay well under the server's max_connections (100 by default).
const pgMaxConns = 24

// idleInTxTimeout ends a session that sits inside a transaction without
// sending anything for this long (the server's
// idle_in_transaction_session_timeout, unless the URL sets it). Our
// transactions are a few statements sent back to back; one left open is a
// replica frozen or cut off in the middle of it, and its row locks (the
// gate reads a record FOR UPDATE) would otherwise hold the record against
// every other replica, the take-over's lease claim included, for as long
// as the session lives. Below the default lease TTL, so a take-over still
// happens within it.
const idleInTxTimeout = "5s"

func openPostgres(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DREADNODE_DATABASE_URL: not a valid PostgreSQL URL: %w", err)
	}
	if _, set := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = idleInTxTimeout
	}
	shown := redactURL(url)
	pids := newPIDSet()
	pool := sql.OpenDB(rebindConnector{stdlib.GetConnector(*cfg), pids})
	pool.SetMaxOpenConns(pgMaxConns)
	pool.SetMaxIdleConns(pgMaxConns)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	db := &DB{w: pool, r: pool, path: shown, dialect: Postgres, cache: newRecordCache(100_000), keys: newKeyCache()}
	if err := pool.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", shown, err)
	}
	if err := MigrateSchema(ctx, pool, Postgres); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s: %w", shown, err)
	}
	// The cache stays off until the listener hears every change.
	db.cache.reset(true)
	l := newListener(db, cfg, pids)
	if err := l.start(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s: %w", shown, err)
	}
	db.remote = l
	// Another replica's change to a record may have written events.
	db.OnRemoteChange(func(RemoteChange) { db.evWake.signal() })
	db.OnResync(db.evWake.signal)
	return db, nil
}

// redactURL hides the password of a database URL for messages and Path.
func redactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "the PostgreSQL server"
	}
	return u.Redacted()
}

// Close closes the pools.
func (db *DB) Close() error {
	if db.remote != nil {
		db.remote.stop()
	}
	if db.ckStop != nil {
		close(db.ckStop)
		<-db.ckDone
		db.ckStop = nil
	}
	db.stmts.Range(func(_, s any) bool { s.(*sql.Stmt).Close(); return true })
	if db.r == db.w {
		return db.w.Close()
	}
	return errors.Join(db.r.Close(), db.w.Close())
}

// Path is the database file (on PostgreSQL, its URL without the password).
func (db *DB) Path() string { return db.path }

// Dialect is the database engine behind db, for the few queries that must
// differ (see the store's dialect switches).
func (db *DB) Dialect() Dialect { return db.dialect }

// Ping checks the database answers (for /readyz).
func (db *DB) Ping(ctx context.Context) error { return db.r.PingContext(ctx) }

// Reader is the pool for reads; never write through it.
func (db *DB) Reader() *sql.DB { return db.r }

// Tx runs fn in one write transaction, committed when fn returns nil.
//
// SQLite runs one writer at a time (BEGIN IMMEDIATE on the single writer
// connection), so fn sees no concurrent write. PostgreSQL runs them
// concurrently at READ COMMITTED (set explicitly, whatever the server's
// default): every read-modify-write in the store is made safe there by a
// condition in its UPDATE (version = ?, credits_micro >= ?) that affects no
// row when another transaction won, never by the read before it.
func (db *DB) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	var opts *sql.TxOptions
	if db.dialect == Postgres {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	ep := db.cache.at() // the writes are cached only if no reset happens meanwhile
	tx, err := db.w.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if db.dialect == Postgres {
		postgresTxs.Store(tx, struct{}{})
		defer postgresTxs.Delete(tx)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		db.settlePending(tx, false, ep)
		return err
	}
	err = tx.Commit()
	db.settlePending(tx, err == nil, ep)
	return err
}

// Exec runs one write statement outside an explicit transaction.
func (db *DB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return db.w.ExecContext(ctx, query, args...)
}

// postgresTxs holds the transactions DB.Tx has open on PostgreSQL, so
// helpers given only a *sql.Tx (LockTx) know its dialect.
var postgresTxs sync.Map // *sql.Tx -> struct{}

func isPostgresTx(tx *sql.Tx) bool {
	_, ok := postgresTxs.Load(tx)
	return ok
}
