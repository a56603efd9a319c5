package store

// PostgreSQL placeholders.
//
// Every SQL string in the backend (store, billing, runtimes, tasks,
// admission, lifecycle) is written with SQLite's positional `?`; PostgreSQL
// wants `$1, $2, …`. Rather than editing hundreds of call sites, or wrapping
// *sql.DB / *sql.Tx in types of our own that every package would have to
// adopt, the rewrite happens in ONE place below the database/sql API: the
// PostgreSQL pool is opened on a driver.Connector that wraps pgx's stdlib
// connector and rebinds each query text as it reaches the driver (Exec,
// Query, Prepare, on the pool, a *sql.Tx or a *sql.Conn alike). So every
// package keeps using *sql.DB and *sql.Tx with `?`, and code written for
// PostgreSQL in `$n` style passes through untouched (a query without a `?`
// outside quotes and comments is not changed), which is also what goose's
// own PostgreSQL queries need.
//
// The rewrite skips string literals ('…', with '' escapes, and E'…' with
// backslash escapes), quoted identifiers ("…"), dollar-quoted bodies
// ($tag$…$tag$) and comments (-- and /* */), so a `?` inside any of those is
// left alone. It is cached per query text: the backend's queries are a few
// hundred constant strings (IN lists vary with their length, bounded by the
// callers' chunk sizes), and pgx prepares and caches statements per
// connection by text, so a stable rewrite also keeps pgx's statement cache
// warm. The cache is bounded; past the bound a query is rewritten each time
// (a linear scan, cheaper than the round trip it precedes).
//
// Limitation: PostgreSQL's jsonb operators `?`, `?|` and `?&` cannot be
// written outside quotes in `?` style; use jsonb_exists / jsonb_exists_any /
// jsonb_exists_all (or `$n` placeholders throughout that query) instead.

import (
	"context"
	"database/sql/driver"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/stdlib"
)

// maxRebound bounds the rewrite cache (distinct query texts).
const maxRebound = 8192

var (
	rebound  sync.Map // query text -> rewritten text
	nrebound atomic.Int64
)

// Rebind returns query with each `?` placeholder outside literals,
// identifiers and comments replaced by PostgreSQL's `$n`, numbered in order.
func Rebind(query string) string {
	if v, ok := rebound.Load(query); ok {
		return v.(string)
	}
	out := rebind(query)
	if nrebound.Load() < maxRebound {
		if _, loaded := rebound.LoadOrStore(query, out); !loaded {
			nrebound.Add(1)
		}
	}
	return out
}

func rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			i++
		case c == '\'':
			// E'…' strings take backslash escapes; plain ones only ''.
			backslash := i > 0 && (q[i-1] == 'E' || q[i-1] == 'e') && (i < 2 || !isIdentByte(q[i-2]))
			j := skipQuoted(q, i, '\'', backslash)
			b.WriteString(q[i:j])
			i = j
		case c == '"':
			j := skipQuoted(q, i, '"', false)
			b.WriteString(q[i:j])
			i = j
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			b.WriteString(q[i : i+j])
			i += j
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := strings.Index(q[i+2:], "*/")
			end := len(q)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(q[i:end])
			i = end
		case c == '$' && (i == 0 || !isIdentByte(q[i-1])):
			if tag, ok := dollarTag(q[i:]); ok {
				j := strings.Index(q[i+len(tag):], tag)
				end := len(q)
				if j >= 0 {
					end = i + len(tag) + j + len(tag)
				}
				b.WriteString(q[i:end])
				i = end
				continue
			}
			b.WriteByte(c)
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	if n == 0 {
		return q
	}
	return b.String()
}

// skipQuoted returns the index just past the quoted run starting at q[i]
// (the end of q when it is unterminated; the server then reports it).
func skipQuoted(q string, i int, quote byte, backslash bool) int {
	for j := i + 1; j < len(q); j++ {
		switch q[j] {
		case '\\':
			if backslash {
				j++
			}
		case quote:
			if j+1 < len(q) && q[j+1] == quote { // doubled quote: an escaped one
				j++
				continue
			}
			return j + 1
		}
	}
	return len(q)
}

// dollarTag recognises the opening of a dollar-quoted string at s[0]: $$ or
// $tag$ where tag is an identifier not starting with a digit ($1 is a
// parameter).
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		c := s[j]
		if c == '$' {
			return s[:j+1], true
		}
		if !isIdentByte(c) || (j == 1 && c >= '0' && c <= '9') {
			return "", false
		}
	}
	return "", false
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// rebindConnector makes pgx connections that rebind every query text. It
// notes their server process ids in pids (when set), by which the listener
// tells this replica's own writes from the others' (listen.go).
type rebindConnector struct {
	driver.Connector
	pids *pidSet
}

func (c rebindConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc := conn.(*stdlib.Conn)
	rc := &rebindConn{c: sc}
	if c.pids != nil {
		rc.pid, rc.pids = sc.Conn().PgConn().PID(), c.pids
		c.pids.add(rc.pid)
	}
	return rc, nil
}

// rebindConn forwards every optional driver interface pgx's connection
// implements (database/sql discovers them by type assertion, so each must be
// re-declared here), rebinding the query texts on the way.
type rebindConn struct {
	c    *stdlib.Conn
	pid  uint32
	pids *pidSet
}

var (
	_ driver.Conn               = (*rebindConn)(nil)
	_ driver.ConnBeginTx        = (*rebindConn)(nil)
	_ driver.ConnPrepareContext = (*rebindConn)(nil)
	_ driver.ExecerContext      = (*rebindConn)(nil)
	_ driver.QueryerContext     = (*rebindConn)(nil)
	_ driver.Pinger             = (*rebindConn)(nil)
	_ driver.NamedValueChecker  = (*rebindConn)(nil)
	_ driver.SessionResetter    = (*rebindConn)(nil)
)

// Unwrap returns pgx's connection, for code reaching it through
// (*sql.Conn).Raw (e.g. LISTEN/NOTIFY or COPY).
func (c *rebindConn) Unwrap() *stdlib.Conn { return c.c }

func (c *rebindConn) Prepare(q string) (driver.Stmt, error) { return c.c.Prepare(Rebind(q)) }
func (c *rebindConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.c.PrepareContext(ctx, Rebind(q))
}
func (c *rebindConn) Close() error {
	if c.pids != nil {
		c.pids.remove(c.pid)
	}
	return c.c.Close()
}
func (c *rebindConn) Begin() (driver.Tx, error) { return c.c.Begin() }
func (c *rebindConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return c.c.BeginTx(ctx, o)
}
func (c *rebindConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.c.ExecContext(ctx, Rebind(q), args)
}
func (c *rebindConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.c.QueryContext(ctx, Rebind(q), args)
}
func (c *rebindConn) Ping(ctx context.Context) error             { return c.c.Ping(ctx) }
func (c *rebindConn) CheckNamedValue(v *driver.NamedValue) error { return c.c.CheckNamedValue(v) }
func (c *rebindConn) ResetSession(ctx context.Context) error     { return c.c.ResetSession(ctx) }
