package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"github.com/pressly/goose/v3"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// latestVersion is the highest version among the SQLite migration files.
func latestVersion(t *testing.T) int64 {
	t.Helper()
	vs := migrationVersions(t)
	return vs[len(vs)-1]
}

// migrationVersions lists the versions of the SQLite migrations in order.
// Numbers may skip one (a branch leaves a number to another merged later).
func migrationVersions(t *testing.T) []int64 {
	t.Helper()
	fsys, err := Migrations(SQLite)
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no SQLite migrations embedded (%v)", err)
	}
	out := make([]int64, len(names))
	for i, n := range names {
		if _, err := fmt.Sscanf(n, "%05d_", &out[i]); err != nil {
			t.Fatalf("migration %s: %v", n, err)
		}
	}
	return out
}

func assertLatest(t *testing.T, sqldb *sql.DB, d Dialect) {
	t.Helper()
	cur, latest, err := SchemaVersion(context.Background(), sqldb, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := latestVersion(t); cur != want || latest != want {
		t.Fatalf("%s schema at version %d (files up to %d), want %d", d, cur, latest, want)
	}
}

var space = regexp.MustCompile(`\s+`)

// sqliteSchema is every table and index of a SQLite database, by name, with
// its CREATE statement with whitespace normalised; goose's version table,
// the legacy schema_migrations and SQLite's own objects are left out.
func sqliteSchema(t *testing.T, sqldb *sql.DB) map[string]string {
	t.Helper()
	rows, err := sqldb.Query(`SELECT type, name, COALESCE(sql, '') FROM sqlite_master
		WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite_%' AND tbl_name NOT IN (?, 'schema_migrations')`, versionTable)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var typ, name, ddl string
		if err := rows.Scan(&typ, &name, &ddl); err != nil {
			t.Fatal(err)
		}
		ddl = space.ReplaceAllString(ddl, " ")
		ddl = strings.NewReplacer("( ", "(", " )", ")").Replace(ddl)
		out[typ+" "+name] = ddl
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// legacyBuild creates a SQLite database at path the way the backend did
// before goose: each named group of testdata/legacy_schema.sql applied once
// in a transaction and recorded in schema_migrations (a copy of the old
// DB.Migrate), for the names in only (all when empty).
func legacyBuild(t *testing.T, path string, only ...string) *sql.DB {
	t.Helper()
	src, err := os.ReadFile("testdata/legacy_schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	sqldb, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqldb.Close() })
	groups := strings.Split(string(src), "\n-- migration: ")[1:]
	if len(groups) != len(legacyVersions) {
		t.Fatalf("testdata has %d legacy migrations, legacyVersions %d", len(groups), len(legacyVersions))
	}
	for _, g := range groups {
		name, body, _ := strings.Cut(g, "\n")
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		tx, err := sqldb.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		for _, s := range strings.Split(body, "\n;\n") {
			if strings.TrimSpace(s) == "" {
				continue
			}
			if _, err := tx.Exec(s); err != nil {
				t.Fatalf("legacy migration %s: %v", name, err)
			}
		}
		if _, err := tx.Exec(`INSERT INTO schema_migrations (name, applied_at) VALUES (?, strftime('%s','now'))`, name); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return sqldb
}

func TestMigrateFreshSQLiteToLatest(t *testing.T) {
	db := openTest(t)
	assertLatest(t, db.w, SQLite)
	schema := sqliteSchema(t, db.Reader())
	for _, name := range []string{"table meta", "table orgs", "table api_keys", "table idempotency", "table sandboxes",
		"table sandbox_logs", "table ledger_runtimes", "table task_environments", "table org_quotas", "table accruals",
		"index sandboxes_org_seq", "index sandboxes_phase", "index sandboxes_org_phase_seq", "index ledger_runtimes_ws",
		"index accruals_running", "index accruals_closing", "index ledger_sandboxes_live", "index task_environments_ws",
		"index task_environments_state", "index sandboxes_queued"} {
		if _, ok := schema[name]; !ok {
			t.Errorf("fresh database lacks %s", name)
		}
	}
	// The settle pass's query and its partial index must agree, or the
	// planner stops using the index.
	for idx, where := range map[string]string{"index accruals_running": runningWhere, "index accruals_closing": closingWhere} {
		if got := schema[idx]; !strings.HasSuffix(got, "WHERE "+where) {
			t.Errorf("%s is %q; its WHERE must be %q, as the settle queries say", idx, got, where)
		}
	}
}

// The goose files keep the old schema exactly: same tables, columns,
// constraints and indexes as the statements the packages used to apply.
// Migrations after the legacy ones (leases, 00007 on) are compared with
// nothing: the goose database is taken to the last legacy version.
func TestMigrationsMatchLegacySchema(t *testing.T) {
	legacy := legacyBuild(t, filepath.Join(t.TempDir(), "old.db"))
	sqldb, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "goose.db")+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqldb.Close() })
	if _, err := newProvider(t, sqldb, SQLite).UpTo(context.Background(), slices.Max(slices.Collect(maps.Values(legacyVersions)))); err != nil {
		t.Fatal(err)
	}
	want, got := sqliteSchema(t, legacy), sqliteSchema(t, sqldb)
	for name, ddl := range want {
		if got[name] != ddl {
			t.Errorf("%s:\n legacy: %s\n goose:  %s", name, ddl, got[name])
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("goose creates %s, which the legacy schema did not have", name)
		}
	}
}

func TestReopenIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	ctx := context.Background()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	r := newRecord(t, db, "sb-reopen")
	db.Close()
	for i := 0; i < 2; i++ {
		db, err = Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen %d: %v", i+1, err)
		}
		assertLatest(t, db.w, SQLite)
		var n int
		if err := db.Reader().QueryRow(`SELECT COUNT(*) FROM sandboxes WHERE id = ?`, r.ID).Scan(&n); err != nil || n != 1 {
			t.Fatalf("reopen %d: record %s rows %d (%v)", i+1, r.ID, n, err)
		}
		var applied int
		if err := db.Reader().QueryRow(`SELECT COUNT(*) FROM ` + versionTable + ` WHERE version_id > 0`).Scan(&applied); err != nil {
			t.Fatal(err)
		}
		if applied != len(migrationVersions(t)) {
			t.Fatalf("reopen %d: %d versions recorded, want each once (%d)", i+1, applied, len(migrationVersions(t)))
		}
		db.Close()
	}
}

func TestOpenAdoptsLegacyDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old := legacyBuild(t, path)
	for _, s := range []string{
		`INSERT INTO orgs (id, name, credits_micro, created_at) VALUES ('org-1', 'acme', 5000000, 1)`,
		`INSERT INTO sandboxes (id, org_id, kind, provider, phase, template_id, created_at, end_at) VALUES ('sb-old', 'org-1', 'runtime', 'docker', 'running', 'base', 2, 3)`,
		`INSERT INTO org_quotas (org_id, max_running) VALUES ('org-1', 4)`,
	} {
		if _, err := old.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	ctx := context.Background()
	for i := 0; i < 2; i++ {
		db, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("open %d of a legacy database: %v", i+1, err)
		}
		assertLatest(t, db.w, SQLite)
		var phase string
		var credits int64
		var maxRunning int
		if err := db.Reader().QueryRow(`SELECT s.phase, o.credits_micro, q.max_running FROM sandboxes s
			JOIN orgs o ON o.id = s.org_id JOIN org_quotas q ON q.org_id = o.id WHERE s.id = 'sb-old'`).Scan(&phase, &credits, &maxRunning); err != nil {
			t.Fatalf("open %d: the legacy rows are gone: %v", i+1, err)
		}
		if phase != "running" || credits != 5000000 || maxRunning != 4 {
			t.Fatalf("open %d: legacy rows changed: phase %q credits %d max_running %d", i+1, phase, credits, maxRunning)
		}
		// Adopted versions are recorded once each and not run again.
		versions := gooseVersions(t, db)
		want := append([]int64{0}, migrationVersions(t)...) // the legacy ones adopted, the later ones applied
		if !slices.Equal(versions, want) {
			t.Fatalf("open %d: goose versions %v, want %v", i+1, versions, want)
		}
		var legacyRows int
		if err := db.Reader().QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&legacyRows); err != nil {
			t.Fatal(err)
		}
		if legacyRows != len(legacyVersions) {
			t.Fatalf("open %d: schema_migrations has %d rows, want the %d legacy ones kept", i+1, legacyRows, len(legacyVersions))
		}
		db.Close()
	}
}

// The quotas command used to migrate admission's table into a database the
// server may never have opened: a legacy database can hold version 6
// without 3-5. Open applies the missing ones.
func TestOpenAdoptsLegacyDatabaseWithGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	legacyBuild(t, path, "0001_core", "0002_list_by_phase", "0100_admission").Close()
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	assertLatest(t, db.w, SQLite)
	fresh := openTest(t)
	want, got := sqliteSchema(t, fresh.Reader()), sqliteSchema(t, db.Reader())
	if len(got) != len(want) {
		t.Fatalf("adopted database has %d tables and indexes, a fresh one %d", len(got), len(want))
	}
	for name, ddl := range want {
		if got[name] != ddl {
			t.Errorf("%s: adopted %q, fresh %q", name, got[name], ddl)
		}
	}
}

func TestOpenRefusesUnknownLegacyMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old := legacyBuild(t, path, "0001_core")
	if _, err := old.Exec(`INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_future', 0)`); err != nil {
		t.Fatal(err)
	}
	old.Close()
	_, err := Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), `"9999_future"`) {
		t.Fatalf("Open of a database with an unknown legacy migration: %v, want an error naming it", err)
	}
}

// Both dialects hold the same versions under the same names, so a change
// to one cannot ship without its twin.
func TestDialectsHaveTheSameVersions(t *testing.T) {
	list := func(d Dialect) []string {
		fsys, err := Migrations(d)
		if err != nil {
			t.Fatal(err)
		}
		names, err := fs.Glob(fsys, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	if s, p := list(SQLite), list(Postgres); !slices.Equal(s, p) {
		t.Fatalf("migrations differ between dialects:\n sqlite:   %v\n postgres: %v", s, p)
	}
}

// Down migrations undo their version: down to zero leaves no table, and up
// again rebuilds the same schema.
func TestSQLiteDownAndUpAgain(t *testing.T) {
	db := openTest(t)
	want := sqliteSchema(t, db.Reader())
	p := newProvider(t, db.w, SQLite)
	if _, err := p.DownTo(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if left := sqliteSchema(t, db.Reader()); len(left) != 0 {
		t.Fatalf("down to 0 left %v", left)
	}
	if err := MigrateSchema(context.Background(), db.w, SQLite); err != nil {
		t.Fatal(err)
	}
	got := sqliteSchema(t, db.Reader())
	for name, ddl := range want {
		if got[name] != ddl {
			t.Errorf("%s after down and up: %q, want %q", name, got[name], ddl)
		}
	}
}

func newProvider(t *testing.T, sqldb *sql.DB, d Dialect) *goose.Provider {
	t.Helper()
	gd, err := d.goose()
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := Migrations(d)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(gd, sqldb, fsys, goose.WithDisableGlobalRegistry(true), goose.WithLogger(goose.NopLogger()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// catalog is a schema's tables with their columns ("name NULL" or "name
// NOT NULL"), and its named indexes with their table.
type catalog struct {
	tables  map[string][]string
	indexes map[string]string
}

func sqliteCatalog(t *testing.T, sqldb *sql.DB) catalog {
	t.Helper()
	c := catalog{tables: map[string][]string{}, indexes: map[string]string{}}
	var tables []string
	eachRow(t, sqldb, func(rows *sql.Rows) error {
		var typ, name, tbl string
		if err := rows.Scan(&typ, &name, &tbl); err != nil {
			return err
		}
		if typ == "table" {
			tables = append(tables, name)
		} else {
			c.indexes[name] = tbl
		}
		return nil
	}, `SELECT m.type, m.name, m.tbl_name FROM sqlite_master m
		WHERE m.type IN ('table', 'index') AND m.name NOT LIKE 'sqlite_%' AND m.tbl_name != 'schema_migrations'`)
	for _, tbl := range tables {
		// table_xinfo: table_info leaves generated columns out.
		eachRow(t, sqldb, func(cols *sql.Rows) error {
			var name string
			var notNull bool
			var pk int // position in the primary key, 0 when not in it
			if err := cols.Scan(&name, &notNull, &pk); err != nil {
				return err
			}
			// SQLite lets a non-INTEGER primary key hold NULL; PostgreSQL
			// does not. The schema never writes one.
			c.tables[tbl] = append(c.tables[tbl], nullability(name, notNull || pk > 0))
			return nil
		}, `SELECT name, "notnull", pk FROM pragma_table_xinfo(?)`, tbl)
		slices.Sort(c.tables[tbl])
	}
	return c
}

func postgresCatalog(t *testing.T, sqldb *sql.DB) catalog {
	t.Helper()
	c := catalog{tables: map[string][]string{}, indexes: map[string]string{}}
	eachRow(t, sqldb, func(rows *sql.Rows) error {
		var tbl, col string
		var notNull bool
		if err := rows.Scan(&tbl, &col, &notNull); err != nil {
			return err
		}
		c.tables[tbl] = append(c.tables[tbl], nullability(col, notNull))
		return nil
	}, `SELECT table_name, column_name, is_nullable = 'NO' FROM information_schema.columns
		WHERE table_schema = 'public'`)
	for tbl := range c.tables {
		slices.Sort(c.tables[tbl])
	}
	eachRow(t, sqldb, func(rows *sql.Rows) error {
		var name, tbl string
		if err := rows.Scan(&name, &tbl); err != nil {
			return err
		}
		c.indexes[name] = tbl
		return nil
	}, `SELECT indexname, tablename FROM pg_indexes WHERE schemaname = 'public'`)
	return c
}

func nullability(col string, notNull bool) string {
	if notNull {
		return col + " NOT NULL"
	}
	return col + " NULL"
}

// The PostgreSQL files, applied to a real server, reach the latest version
// and hold every table, column and index SQLite has, under the same names.
func TestPostgresMigrationsMatchSQLite(t *testing.T) {
	cluster := pgtest.Start(t)
	pg, err := sql.Open("pgx", cluster.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	ctx := context.Background()
	for i := 0; i < 2; i++ { // the second run finds nothing to do
		if err := MigrateSchema(ctx, pg, Postgres); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		assertLatest(t, pg, Postgres)
	}

	lite := sqliteCatalog(t, openTest(t).Reader())
	pgc := postgresCatalog(t, pg)
	for tbl, cols := range lite.tables {
		if tbl == versionTable {
			continue // goose's own table differs by dialect
		}
		if got, ok := pgc.tables[tbl]; !ok {
			t.Errorf("PostgreSQL lacks table %s", tbl)
		} else if !slices.Equal(got, cols) {
			t.Errorf("table %s columns differ:\n sqlite:   %v\n postgres: %v", tbl, cols, got)
		}
	}
	for tbl := range pgc.tables {
		if _, ok := lite.tables[tbl]; !ok {
			t.Errorf("PostgreSQL has table %s, which SQLite lacks", tbl)
		}
	}
	for idx, tbl := range lite.indexes {
		if got, ok := pgc.indexes[idx]; !ok || got != tbl {
			t.Errorf("PostgreSQL lacks index %s on %s (found on %q)", idx, tbl, got)
		}
	}

	// Partial indexes keep their predicates.
	for idx, want := range map[string]string{
		"sandboxes_queued":      "WHERE (phase = 'queued'::text)",
		"accruals_running":      "WHERE (running_since IS NOT NULL)",
		"accruals_closing":      "WHERE closing",
		"ledger_sandboxes_live": "WHERE (phase = ANY (ARRAY['pending'::text, 'creating'::text, 'running'::text, 'pausing'::text, 'paused'::text, 'resuming'::text]))",
	} {
		var def string
		if err := pg.QueryRow(`SELECT indexdef FROM pg_indexes WHERE indexname = $1`, idx).Scan(&def); err != nil {
			t.Fatalf("index %s: %v", idx, err)
		}
		if !strings.HasSuffix(def, want) {
			t.Errorf("index %s is %q, want it to end %q", idx, def, want)
		}
	}

	// ... and the column the settle pass's index reads is generated from
	// the expression that index used to hold (migrations 00009, 00010).
	var gen string
	if err := pg.QueryRow(`SELECT generation_expression FROM information_schema.columns
		WHERE table_name = 'accruals' AND column_name = 'closing'`).Scan(&gen); err != nil {
		t.Fatal(err)
	}
	if want := "((running_since IS NULL) AND (runtime_ns > billed_ns))"; gen != want {
		t.Errorf("accruals.closing is generated as %q, want %q", gen, want)
	}

	// seq columns number rows by themselves, as AUTOINCREMENT does.
	if _, err := pg.Exec(`INSERT INTO orgs (id, name, created_at) VALUES ('o', 'o', 1)`); err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := pg.QueryRow(`INSERT INTO sandboxes (id, org_id, kind, provider, phase, template_id, created_at)
		VALUES ('sb', 'o', 'runtime', 'docker', 'pending', 'base', 1) RETURNING seq`).Scan(&seq); err != nil || seq != 1 {
		t.Fatalf("sandboxes seq %d (%v), want 1", seq, err)
	}
	if _, err := pg.Exec(`DELETE FROM sandboxes; DELETE FROM orgs`); err != nil {
		t.Fatal(err)
	}

	// Down to zero and up again: every Down section is valid PostgreSQL.
	if _, err := newProvider(t, pg, Postgres).DownTo(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if left := postgresCatalog(t, pg); len(left.tables) != 1 {
		t.Fatalf("down to 0 left tables %v", left.tables)
	}
	if err := MigrateSchema(ctx, pg, Postgres); err != nil {
		t.Fatal(err)
	}
	assertLatest(t, pg, Postgres)
}

// gooseVersions reads the versions goose recorded, in order.
func gooseVersions(t *testing.T, db *DB) []int64 {
	t.Helper()
	rows, err := db.Reader().QueryContext(context.Background(), `SELECT version_id FROM `+versionTable+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return versions
}

// eachRow runs query on sqldb and calls scan for each row, failing the test
// on any error (the rows closed, their Err read).
func eachRow(t *testing.T, sqldb *sql.DB, scan func(*sql.Rows) error, query string, args ...any) {
	t.Helper()
	rows, err := sqldb.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
