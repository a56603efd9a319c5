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

// A page's summaries come in one query, keyed by record; a record without
// a kept output is absent rather than zero.
func TestOutputSummaries(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		for i, id := range []string{"a", "b"} {
			if err := db.SaveOutput(ctx, id, Output{Archive: []byte("x"), Bytes: int64(10 + i), Files: i + 1, SavedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := db.OutputSummaries(ctx, []string{"a", "b", "none"})
		if err != nil || len(got) != 2 || got["a"].Bytes != 10 || got["b"].Files != 2 || got["a"].Archive != nil {
			t.Fatalf("summaries: %+v %v", got, err)
		}
		if _, ok := got["none"]; ok {
			t.Fatal("a record without output has a summary")
		}
		if got, err := db.OutputSummaries(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("no ids: %v %v", got, err)
		}
	})
}
