package store

import (
	"context"
	"database/sql"
)

// InsertFixture is InsertFixtureTx in a transaction of its own.
//
// For tests and benchmarks only: see InsertFixtureTx.
func (db *DB) InsertFixture(ctx context.Context, r *Record) error {
	return db.Tx(ctx, func(tx *sql.Tx) error { return InsertFixtureTx(ctx, tx, r) })
}

// InsertFixtureTx stores r in whatever phase it is in, skipping the gate's
// start-phase check (InsertRecordTx): for tests and benchmarks that need a
// record as history left it (running, paused, ended, stuck mid-move) without
// driving a provider through every move to get there. Production code never
// calls it: a record starts in a sandbox.StartPhases phase and reaches every
// other through Transition.
func InsertFixtureTx(ctx context.Context, tx *sql.Tx, r *Record) error {
	return insertRecordTx(ctx, tx, r)
}
