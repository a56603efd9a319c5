package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// DeploymentID is a random id made when the database was created. Every
// instance a backend creates carries it, so a backend only ever adopts or
// removes instances of its own database.
func (db *DB) DeploymentID(ctx context.Context) (string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	if _, err := db.Exec(ctx, `INSERT INTO meta (key, value) VALUES ('deployment_id', ?) ON CONFLICT (key) DO NOTHING`, hex.EncodeToString(b[:])); err != nil {
		return "", err
	}
	var id string
	err := db.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'deployment_id'`).Scan(&id)
	return id, err
}
