// Package storetest holds the store's fixtures: records inserted as history
// left them, for tests and benchmarks. Production code never imports it
// (TestInsertFixtureOnlyInTestsAndBenchmarks).
package storetest

import (
	"context"
	"database/sql"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/internal/unchecked"
)

// InsertFixture is InsertFixtureTx in a transaction of its own.
func InsertFixture(ctx context.Context, db *store.DB, r *store.Record) error {
	return db.Tx(ctx, func(tx *sql.Tx) error { return InsertFixtureTx(ctx, tx, r) })
}

// InsertFixtureTx stores r in whatever phase it is in, skipping the gate's
// start-phase check (store.InsertRecordTx): for tests and benchmarks that
// need a record as history left it (running, paused, ended, stuck mid-move)
// without driving a provider through every move to get there. Production
// code never calls it: a record starts in a sandbox.StartPhases phase and
// reaches every other through Transition.
func InsertFixtureTx(ctx context.Context, tx *sql.Tx, r *store.Record) error {
	return unchecked.InsertRecordTx(ctx, tx, r)
}
