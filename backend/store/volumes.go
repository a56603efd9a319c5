package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Errors of CreateVolume.
var (
	// ErrVolumeExists: the org already has a volume of that name.
	ErrVolumeExists = errors.New("the organization already has a volume of that name")
	// ErrVolumeCount: the org holds as many volumes as its quota allows.
	ErrVolumeCount = errors.New("the organization holds as many volumes as its quota allows")
)

// Volume is an org volume (API.md §14): named, per org, persistent until
// deleted. Its provider volume is named from ID.
type Volume struct {
	ID        string
	OrgID     string
	Name      string
	Provider  string
	CreatedAt time.Time
	// Bytes is the disk use last measured, at BytesAt (zero: never).
	Bytes   int64
	BytesAt time.Time
}

const volumeColumns = `id, org_id, name, provider, created_at, bytes, bytes_at`

func scanVolume(row interface{ Scan(...any) error }) (*Volume, error) {
	var v Volume
	var created int64
	var at sql.NullInt64
	if err := row.Scan(&v.ID, &v.OrgID, &v.Name, &v.Provider, &created, &v.Bytes, &at); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	v.CreatedAt = time.Unix(0, created).UTC()
	if at.Valid {
		v.BytesAt = time.Unix(0, at.Int64).UTC()
	}
	return &v, nil
}

// CreateVolume stores v (ID, OrgID, Name, Provider) unless the org already
// has a volume of that name (ErrVolumeExists) or maxCount volumes
// (ErrVolumeCount; 0 or less: no limit).
func (db *DB) CreateVolume(ctx context.Context, v *Volume, maxCount int) error {
	v.CreatedAt = time.Now().UTC()
	return db.Tx(ctx, func(tx *sql.Tx) error {
		if err := LockOrgQuotasTx(ctx, tx, v.OrgID); err != nil {
			return err
		}
		var n, same int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN name = ? THEN 1 ELSE 0 END), 0) FROM volumes WHERE org_id = ?`,
			v.Name, v.OrgID).Scan(&n, &same); err != nil {
			return err
		}
		switch {
		case same > 0:
			return ErrVolumeExists
		case maxCount > 0 && n >= maxCount:
			return ErrVolumeCount
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO volumes (id, org_id, name, provider, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (org_id, name) DO NOTHING`, v.ID, v.OrgID, v.Name, v.Provider, v.CreatedAt.UnixNano())
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err == nil && k == 0 {
			return ErrVolumeExists
		}
		return nil
	})
}

// GetVolume is the org's volume id (ErrNotFound when the org has none of
// that id: another org's is not found either).
func (db *DB) GetVolume(ctx context.Context, orgID, id string) (*Volume, error) {
	return scanVolume(db.r.QueryRowContext(ctx, `SELECT `+volumeColumns+` FROM volumes WHERE org_id = ? AND id = ?`, orgID, id))
}

// VolumeByName is the org's volume named name (ErrNotFound when none).
func (db *DB) VolumeByName(ctx context.Context, orgID, name string) (*Volume, error) {
	return scanVolume(db.r.QueryRowContext(ctx, `SELECT `+volumeColumns+` FROM volumes WHERE org_id = ? AND name = ?`, orgID, name))
}

// ListVolumes lists the org's volumes, oldest first ("" lists every org's).
func (db *DB) ListVolumes(ctx context.Context, orgID string) ([]*Volume, error) {
	q, args := `SELECT `+volumeColumns+` FROM volumes WHERE org_id = ? ORDER BY created_at, id`, []any{orgID}
	if orgID == "" {
		q, args = `SELECT `+volumeColumns+` FROM volumes ORDER BY created_at, id`, nil
	}
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Volume{}
	for rows.Next() {
		v, err := scanVolume(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// DeleteVolume removes the org's volume id's row (ErrNotFound when none).
func (db *DB) DeleteVolume(ctx context.Context, orgID, id string) error {
	res, err := db.Exec(ctx, `DELETE FROM volumes WHERE org_id = ? AND id = ?`, orgID, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return ErrNotFound
	}
	return nil
}

// SetVolumeBytes records the disk use of volume id measured at at.
func (db *DB) SetVolumeBytes(ctx context.Context, id string, bytes int64, at time.Time) error {
	_, err := db.Exec(ctx, `UPDATE volumes SET bytes = ?, bytes_at = ? WHERE id = ?`, bytes, at.UnixNano(), id)
	return err
}

// VolumeUsage is the org's volume count and the bytes last measured of them.
func (db *DB) VolumeUsage(ctx context.Context, orgID string) (count int, bytes int64, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM volumes WHERE org_id = ?`, orgID).Scan(&count, &bytes)
	return count, bytes, err
}
