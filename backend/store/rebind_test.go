package store

import (
	"context"
	"strings"
	"testing"
)

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT a FROM t WHERE id = ? AND v = ?`, `SELECT a FROM t WHERE id = $1 AND v = $2`},
		{`INSERT INTO t VALUES (?, '?', ?)`, `INSERT INTO t VALUES ($1, '?', $2)`},
		{`SELECT 'it''s ?' , ?`, `SELECT 'it''s ?' , $1`},
		{`SELECT E'a\'?' , ?`, `SELECT E'a\'?' , $1`},
		{`SELECT "we?ird" FROM t WHERE x = ?`, `SELECT "we?ird" FROM t WHERE x = $1`},
		{"SELECT ? -- what?\n, ?", "SELECT $1 -- what?\n, $2"},
		{`SELECT /* ? */ ?`, `SELECT /* ? */ $1`},
		{`SELECT $$ ? $$, $tag$ ? $tag$, ?`, `SELECT $$ ? $$, $tag$ ? $tag$, $1`},
		{`SELECT $1, $2`, `SELECT $1, $2`}, // already PostgreSQL style: untouched
		{`SELECT x FROM t WHERE a = 'unterminated ?`, `SELECT x FROM t WHERE a = 'unterminated ?`},
	} {
		if got := Rebind(c.in); got != c.want {
			t.Errorf("Rebind(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := Rebind(c.in); got != c.want { // cached
			t.Errorf("cached Rebind(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The PostgreSQL pool takes `?` on every path database/sql offers: the pool,
// a transaction, a prepared statement, a dedicated connection.
func TestPostgresTakesQuestionMarks(t *testing.T) {
	db := openDialect(t, Postgres)
	ctx := context.Background()
	var s string
	var n int64
	if err := db.Reader().QueryRowContext(ctx, `SELECT CAST(? AS text) || '?', CAST(? AS bigint)`, "a", 7).Scan(&s, &n); err != nil || s != "a?" || n != 7 {
		t.Fatalf("pool: %q %d %v", s, n, err)
	}
	stmt, err := db.Reader().PrepareContext(ctx, `SELECT CAST(? AS bigint) + 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	if err := stmt.QueryRowContext(ctx, 41).Scan(&n); err != nil || n != 42 {
		t.Fatalf("prepared: %d %v", n, err)
	}
	conn, err := db.Reader().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.QueryRowContext(ctx, `SELECT CAST(? AS text)`, "c").Scan(&s); err != nil || s != "c" {
		t.Fatalf("conn: %q %v", s, err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)`, "k", "v"); err != nil {
		t.Fatal(err)
	}
}

func TestOpenPostgresErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, "postgres://user:secret@127.0.0.1:1/nodb?sslmode=disable&connect_timeout=5"); err == nil {
		t.Fatal("opening an unreachable server succeeded")
	} else if msg := err.Error(); !contains(msg, "connecting to PostgreSQL at postgres://user:xxxxx@127.0.0.1:1/nodb") || contains(msg, "secret") {
		t.Fatalf("error must name the server without its password: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
