package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// Output is what SaveOutput kept of a record's output directory.
type Output struct {
	Archive   []byte // a tar of the directory's entries, names relative to it
	Bytes     int64  // of the files' contents kept
	Files     int    // entries kept
	Truncated bool   // entries were left out past the bound
	SavedAt   time.Time
}

// SaveOutput keeps the output directory of a record whose instance is about
// to be removed (a Worlds job), replacing an earlier one: the reconciler may
// stop an instance twice after a crash.
func (db *DB) SaveOutput(ctx context.Context, id string, o Output) error {
	truncated := 0
	if o.Truncated {
		truncated = 1
	}
	_, err := db.Exec(ctx, `INSERT INTO record_outputs (id, archive, bytes, files, truncated, saved_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET archive = excluded.archive, bytes = excluded.bytes, files = excluded.files,
		truncated = excluded.truncated, saved_at = excluded.saved_at`,
		id, o.Archive, o.Bytes, o.Files, truncated, o.SavedAt.UnixNano())
	return err
}

// SavedOutput returns what SaveOutput kept, ErrNotFound when nothing was.
func (db *DB) SavedOutput(ctx context.Context, id string) (Output, error) {
	var o Output
	var truncated, saved int64
	err := db.r.QueryRowContext(ctx, `SELECT archive, bytes, files, truncated, saved_at FROM record_outputs WHERE id = ?`, id).
		Scan(&o.Archive, &o.Bytes, &o.Files, &truncated, &saved)
	if errors.Is(err, sql.ErrNoRows) {
		return Output{}, ErrNotFound
	}
	o.Truncated, o.SavedAt = truncated != 0, time.Unix(0, saved).UTC()
	return o, err
}

// OutputSummary is SavedOutput without the archive.
func (db *DB) OutputSummary(ctx context.Context, id string) (Output, error) {
	got, err := db.OutputSummaries(ctx, []string{id})
	if err != nil {
		return Output{}, err
	}
	o, ok := got[id]
	if !ok {
		return Output{}, ErrNotFound
	}
	return o, nil
}

// OutputSummaries is OutputSummary for several records in one query (a page
// of jobs), keyed by record id; records without a kept output are absent.
func (db *DB) OutputSummaries(ctx context.Context, ids []string) (map[string]Output, error) {
	out := make(map[string]Output, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := db.r.QueryContext(ctx, `SELECT id, bytes, files, truncated, saved_at FROM record_outputs WHERE id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var o Output
		var truncated, saved int64
		if err := rows.Scan(&id, &o.Bytes, &o.Files, &truncated, &saved); err != nil {
			return nil, err
		}
		o.Truncated, o.SavedAt = truncated != 0, time.Unix(0, saved).UTC()
		out[id] = o
	}
	return out, rows.Err()
}
