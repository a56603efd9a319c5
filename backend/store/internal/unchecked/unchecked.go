// Package unchecked carries the store's record insert without the gate's
// start-phase check from package store to package storetest, its only
// importers (internal: nothing outside backend/store can import it).
package unchecked

import (
	"context"
	"database/sql"
)

// InsertRecordTx stores a *store.Record in whatever phase it is in; package
// store sets it.
var InsertRecordTx func(ctx context.Context, tx *sql.Tx, record any) error
