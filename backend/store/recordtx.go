package store

import (
	"context"
	"database/sql"
)

// GetRecordTx reads record id inside tx (ErrNotFound when there is none),
// for a change that projects another row from the record as tx sees it.
func GetRecordTx(ctx context.Context, tx *sql.Tx, id string) (*Record, error) {
	return scanRecord(tx.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM `+recordFrom+` WHERE s.id = ?`, id))
}
