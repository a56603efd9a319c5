package store

import (
	"context"
	"database/sql"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/internal/unchecked"
)

// The insert without the start-phase check is package storetest's
// (InsertFixture, InsertFixtureTx): for tests and benchmarks only, out of
// reach of production code, which starts a record in a sandbox.StartPhases
// phase and moves it through Transition.
func init() {
	unchecked.InsertRecordTx = func(ctx context.Context, tx *sql.Tx, r any) error {
		return insertRecordTx(ctx, tx, r.(*Record))
	}
}
