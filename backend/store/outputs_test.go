package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// A job's output round-trips byte for byte on both dialects (a BLOB in
// SQLite, a BYTEA in PostgreSQL), a second save replaces the first, and
// the summary reads the same figures without the archive.
func TestSaveOutputRoundTrip(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		if _, err := db.SavedOutput(ctx, "job"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("before any save: %v", err)
		}
		archive := append([]byte{0, 1, 2, 0xff}, bytes.Repeat([]byte("x"), 70000)...)
		at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		if err := db.SaveOutput(ctx, "job", Output{Archive: []byte("old"), Bytes: 1, Files: 1, SavedAt: at}); err != nil {
			t.Fatal(err)
		}
		if err := db.SaveOutput(ctx, "job", Output{Archive: archive, Bytes: 70004, Files: 2, Truncated: true, SavedAt: at}); err != nil {
			t.Fatal(err)
		}
		o, err := db.SavedOutput(ctx, "job")
		if err != nil || !bytes.Equal(o.Archive, archive) || o.Bytes != 70004 || o.Files != 2 || !o.Truncated || !o.SavedAt.Equal(at) {
			t.Fatalf("read back: %v %d %d %v %v (%d bytes)", err, o.Bytes, o.Files, o.Truncated, o.SavedAt, len(o.Archive))
		}
		s, err := db.OutputSummary(ctx, "job")
		if err != nil || s.Archive != nil || s.Bytes != 70004 || s.Files != 2 || !s.Truncated {
			t.Fatalf("summary: %+v %v", s, err)
		}
	})
}
