package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"slices"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

// The store owns the whole schema, every package's tables included, as
// numbered SQL files per dialect: migrations/<dialect>/NNNNN_name.sql, run
// in version order by goose. Both dialects hold the same versions with the
// same table, column and index names; only the types differ.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// Dialect names a database engine the schema is written for.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// versionTable is goose's record of applied versions. It is not the legacy
// schema_migrations table, which is left untouched so its history stays
// readable.
const versionTable = "goose_db_version"

// legacyVersions maps the names the old per-package Migrate calls recorded
// in schema_migrations to the goose version holding the same statements. A
// database created before goose is adopted by marking these versions
// applied instead of running them again.
var legacyVersions = map[string]int64{
	"0001_core":               1,
	"0002_list_by_phase":      2,
	"ledger_0001":             3,
	"ledger_0002":             4,
	"tasks_0001_environments": 5,
	"0100_admission":          6,
}

func (d Dialect) goose() (goose.Dialect, error) {
	switch d {
	case SQLite:
		return goose.DialectSQLite3, nil
	case Postgres:
		return goose.DialectPostgres, nil
	}
	return "", fmt.Errorf("no migrations for database dialect %q", d)
}

// Migrations returns the dialect's migration files (NNNNN_name.sql at the
// root).
func Migrations(d Dialect) (fs.FS, error) {
	if _, err := d.goose(); err != nil {
		return nil, err
	}
	return fs.Sub(migrationFiles, "migrations/"+string(d))
}

// MigrateSchema brings the schema of sqldb up to the latest version of the
// dialect's migrations. Versions are applied in order, each in its own
// transaction. On SQLite the caller passes its single writer pool; on
// PostgreSQL an advisory lock lets several replicas start at once.
func MigrateSchema(ctx context.Context, sqldb *sql.DB, d Dialect) error {
	gd, err := d.goose()
	if err != nil {
		return err
	}
	fsys, err := Migrations(d)
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	}
	switch d {
	case SQLite:
		gap, err := adoptLegacy(ctx, sqldb)
		if err != nil {
			return fmt.Errorf("adopting the migrations recorded in schema_migrations: %w", err)
		}
		// A legacy database may hold a later version without an earlier
		// one (the quotas command ran admission's migration on a database
		// the server never opened); the missing versions create other
		// tables and are safe to apply late.
		opts = append(opts, goose.WithAllowOutofOrder(gap))
	case Postgres:
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(gd, sqldb, fsys, opts...)
	if err != nil {
		return fmt.Errorf("loading the %s migrations: %w", d, err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrating the database schema: %w", err)
	}
	return nil
}

// SchemaVersion is the latest applied migration version of sqldb.
func SchemaVersion(ctx context.Context, sqldb *sql.DB, d Dialect) (current, latest int64, err error) {
	gd, err := d.goose()
	if err != nil {
		return 0, 0, err
	}
	fsys, err := Migrations(d)
	if err != nil {
		return 0, 0, err
	}
	p, err := goose.NewProvider(gd, sqldb, fsys, goose.WithDisableGlobalRegistry(true), goose.WithLogger(goose.NopLogger()))
	if err != nil {
		return 0, 0, err
	}
	return p.GetVersions(ctx)
}

// adoptLegacy records in goose's table the versions an old build applied
// through schema_migrations, once, in one transaction; it does nothing on a
// new database or one already adopted. gap reports an adopted version above
// one that is missing.
func adoptLegacy(ctx context.Context, sqldb *sql.DB) (gap bool, err error) {
	tx, err := sqldb.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() // a no-op once committed
	exists := func(table string) (bool, error) {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n)
		return n > 0, err
	}
	legacy, err := exists("schema_migrations")
	if err != nil || !legacy {
		return false, err
	}
	adopted, err := exists(versionTable)
	if err != nil || adopted {
		return false, err
	}
	versions, err := legacyApplied(ctx, tx)
	if err != nil {
		return false, err
	}
	slices.Sort(versions)
	st, err := database.NewStore(database.DialectSQLite3, versionTable)
	if err != nil {
		return false, err
	}
	if err := st.CreateVersionTable(ctx, tx); err != nil {
		return false, err
	}
	// goose's own first row: the table exists at version 0.
	for _, v := range append([]int64{0}, versions...) {
		if err := st.Insert(ctx, tx, database.InsertRequest{Version: v}); err != nil {
			return false, err
		}
	}
	for i, v := range versions {
		if v != int64(i+1) {
			gap = true
		}
	}
	return gap, tx.Commit()
}

// legacyApplied reads the goose versions of the legacy migrations
// schema_migrations records (its rows closed before the caller goes on in
// the same transaction).
func legacyApplied(ctx context.Context, tx *sql.Tx) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var versions []int64
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		v, ok := legacyVersions[name]
		if !ok {
			return nil, fmt.Errorf("schema_migrations holds %q, which this build does not know: the database was written by another build of the backend", name)
		}
		versions = append(versions, v)
	}
	return versions, rows.Err()
}
