// Package store is the backend's database: an embedded SQLite file by
// default. It holds the sandbox records (the single source of truth for the
// reconciler), orgs and keys, and lets other packages register their tables.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrNotFound is returned when a row does not exist.
var ErrNotFound = errors.New("not found")

// DB wraps two pools on one SQLite file: a single writer connection, so
// write transactions queue in Go instead of failing with SQLITE_BUSY, and a
// reader pool that reads concurrently under WAL.
type DB struct {
	w     *sql.DB
	r     *sql.DB
	path  string
	mu    sync.Mutex // serialises Migrate
	cache *recordCache
	// stmts holds prepared list statements by SQL text (see prepared).
	stmts  sync.Map
	nstmts atomic.Int64
}

// Open opens (creating if needed) the database named by url: a file path,
// "sqlite://path" or "file:path". PostgreSQL URLs are refused with a clear
// error until that backend exists.
func Open(ctx context.Context, url string) (*DB, error) {
	path := url
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return nil, fmt.Errorf("DREADNODE_DATABASE_URL: PostgreSQL is not supported by this build yet; use a SQLite file path (e.g. ./.dreadnode/dreadnode.db)")
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
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"
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
	db := &DB{w: w, r: r, path: path, cache: newRecordCache(100_000)}
	if err := w.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	if err := db.Migrate(ctx, "0001_core", coreSchema...); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.Migrate(ctx, "0002_list_by_phase", listSchema...); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Close closes both pools.
func (db *DB) Close() error {
	db.stmts.Range(func(_, s any) bool { s.(*sql.Stmt).Close(); return true })
	return errors.Join(db.r.Close(), db.w.Close())
}

// Path is the database file.
func (db *DB) Path() string { return db.path }

// Ping checks the database answers (for /readyz).
func (db *DB) Ping(ctx context.Context) error { return db.r.PingContext(ctx) }

// Reader is the pool for reads; never write through it.
func (db *DB) Reader() *sql.DB { return db.r }

// Tx runs fn in one write transaction, committed when fn returns nil.
func (db *DB) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		db.settlePending(tx, false)
		return err
	}
	err = tx.Commit()
	db.settlePending(tx, err == nil)
	return err
}

// Exec runs one write statement outside an explicit transaction.
func (db *DB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return db.w.ExecContext(ctx, query, args...)
}

// Migrate applies stmts once under name. Packages own their tables and call
// this at start-up; re-running with an applied name is a no-op.
func (db *DB) Migrate(ctx context.Context, name string, stmts ...string) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE name = ?`, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (name, applied_at) VALUES (?, strftime('%s','now'))`, name)
		return err
	})
}
