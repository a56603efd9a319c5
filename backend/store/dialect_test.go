package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// One PostgreSQL cluster for the package; each test gets its own database.
func TestMain(m *testing.M) { pgtest.Main(m) }

// dialects are the databases every store test runs against.
var dialects = []Dialect{SQLite, Postgres}

// openDialect opens a new, empty, migrated store on d for this test.
func openDialect(t *testing.T, d Dialect) *DB {
	t.Helper()
	url := filepath.Join(t.TempDir(), "t.db")
	if d == Postgres {
		url = pgtest.Database(t)
	}
	db, err := Open(context.Background(), url)
	if err != nil {
		t.Fatalf("opening a %s store: %v", d, err)
	}
	t.Cleanup(func() { db.Close() })
	if db.Dialect() != d {
		t.Fatalf("opened %s, want %s", db.Dialect(), d)
	}
	return db
}

// eachDialect runs fn as a subtest per dialect, each on a fresh store.
func eachDialect(t *testing.T, fn func(t *testing.T, db *DB)) {
	t.Helper()
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) { fn(t, openDialect(t, d)) })
	}
}
