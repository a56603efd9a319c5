package store

import (
	"context"
	"database/sql"
	"testing"
)

// A charge on PostgreSQL is a HOT (heap-only) update of the record's
// accruals row: it changes no value an index reads, so it writes no index
// entry (migrations 00009, 00010), and it leaves the sandboxes row alone.
// Before 00009 the settle pass's partial index named billed_ns and every
// charge rewrote all of the row's index entries, the bulk of a pass's cost.
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
		var upd, hot, wide int64
		if err := tx.QueryRowContext(ctx, `SELECT a.n_tup_upd, a.n_tup_hot_upd, s.n_tup_upd FROM pg_stat_xact_user_tables a,
			pg_stat_xact_user_tables s WHERE a.relname = 'accruals' AND s.relname = 'sandboxes'`).Scan(&upd, &hot, &wide); err != nil {
			return err
		}
		if upd != 1 || hot != 1 || wide != 0 {
			t.Errorf("a charge made %d updates of accruals, %d of them HOT, and %d of sandboxes; want 1, 1 and 0", upd, hot, wide)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
