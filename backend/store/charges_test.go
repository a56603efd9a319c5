package store

import (
	"context"
	"database/sql"
	"testing"
)

// A charge on PostgreSQL is a HOT (heap-only) update: it changes no value
// an index reads, so it writes no index entry (migration 00009). Before,
// the settle pass's partial index named billed_ns and every charge rewrote
// all of the row's index entries, the bulk of a pass's cost.
func TestChargeIsHeapOnlyOnPostgres(t *testing.T) {
	db := openDialect(t, Postgres)
	ctx := context.Background()
	newRecord(t, db, "sb-hot")
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		rows, err := BillingRowsTx(ctx, tx, []string{"sb-hot"})
		if err != nil || len(rows) != 1 {
			t.Fatalf("BillingRowsTx: %v %v", rows, err)
		}
		applied, _, err := ApplyChargesTx(ctx, tx, []ChargeOrder{{Row: &rows[0], Micro: 5, BilledNs: 1_000}})
		if err != nil || !applied[0] {
			t.Fatalf("charge: %v %v", applied, err)
		}
		// pg_stat_xact_user_tables counts this transaction's own writes.
		var upd, hot int64
		if err := tx.QueryRowContext(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables
			WHERE relname = 'sandboxes'`).Scan(&upd, &hot); err != nil {
			return err
		}
		if upd != 1 || hot != 1 {
			t.Errorf("a charge made %d updates, %d of them HOT; want 1 and 1", upd, hot)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
