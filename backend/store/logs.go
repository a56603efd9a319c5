package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// SaveLogs keeps the last output of an instance that is about to be removed,
// so the logs routes still answer after the record is killed.
func (db *DB) SaveLogs(ctx context.Context, id, logs string) error {
	_, err := db.Exec(ctx, `INSERT INTO sandbox_logs (id, logs, saved_at) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET logs = excluded.logs, saved_at = excluded.saved_at`, id, logs, time.Now().UnixNano())
	return err
}

// SavedLogs returns the logs kept by SaveLogs, ErrNotFound when none were.
func (db *DB) SavedLogs(ctx context.Context, id string) (string, error) {
	var logs string
	err := db.r.QueryRowContext(ctx, `SELECT logs FROM sandbox_logs WHERE id = ?`, id).Scan(&logs)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return logs, err
}
