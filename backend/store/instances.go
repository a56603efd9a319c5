package store

import (
	"context"
	"slices"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// RecordInstance is what the orphan sweep needs of a record: its phase and
// the provider id of the instance it owns ("" when none is known yet).
type RecordInstance struct {
	Phase      sandbox.Phase
	ProviderID string
}

// RecordInstances reads the phase and provider id of the given records
// (missing ids are absent) from the database, not the cache: the sweep
// compares them with instances listed just before, and another replica may
// have written them.
func (db *DB) RecordInstances(ctx context.Context, ids []string) (map[string]RecordInstance, error) {
	out := make(map[string]RecordInstance, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		if err := db.recordInstances(ctx, args, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// recordInstances reads the records of ids (one chunk) into out.
func (db *DB) recordInstances(ctx context.Context, ids []any, out map[string]RecordInstance) error {
	rows, err := db.r.QueryContext(ctx, `SELECT id, phase, provider_id FROM sandboxes WHERE id IN (`+placeholders(len(ids))+`)`, ids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var ri RecordInstance
		if err := rows.Scan(&id, &ri.Phase, &ri.ProviderID); err != nil {
			return err
		}
		out[id] = ri
	}
	return rows.Err()
}
