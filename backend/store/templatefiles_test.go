package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
)

// Uploaded files of COPY steps: stored in chunks and read back whole, only
// for an existing template of the org, bounded by max_template_bytes
// (counted with the images), nothing left by a failed upload, and removed
// with their template.
func TestTemplateFilesChunkedBoundedAndRemoved(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		now := time.Now().UTC()
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, _, err := EnsureTemplateTx(ctx, tx, &Template{ID: "t1", OrgID: "o1", Alias: "web", Kind: template.KindBuild,
				CPUCount: 2, MemoryMB: 1024, CreatedAt: now, UpdatedAt: now})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		rows := func() (files, chunks int) {
			t.Helper()
			if err := db.Reader().QueryRow(`SELECT COUNT(*) FROM template_files`).Scan(&files); err != nil {
				t.Fatal(err)
			}
			if err := db.Reader().QueryRow(`SELECT COUNT(*) FROM template_file_chunks`).Scan(&chunks); err != nil {
				t.Fatal(err)
			}
			return files, chunks
		}

		data := make([]byte, 2*FileChunkBytes+12345)
		_, _ = rand.Read(data)
		if err := db.PutTemplateFile(ctx, "o1", "t1", "h1", int64(len(data)), bytes.NewReader(data), now); err != nil {
			t.Fatal(err)
		}
		if f, c := rows(); f != 1 || c != 3 {
			t.Fatalf("after one upload of 2 MiB and a bit: %d files, %d chunks, want 1 and 3", f, c)
		}
		r, err := db.OpenTemplateFile(ctx, "o1", "t1", "h1")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes (%v), want the %d uploaded", len(got), err, len(data))
		}
		if _, err := db.OpenTemplateFile(ctx, "o2", "t1", "h1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another org reads the files: %v", err)
		}
		// The same hash again is kept as it is (a hash names its content).
		if err := db.PutTemplateFile(ctx, "o1", "t1", "h1", 3, bytes.NewReader([]byte("abc")), now); err != nil {
			t.Fatal(err)
		}
		if used, err := TemplateBytes(ctx, db.Reader(), "o1"); err != nil || used != int64(len(data)) {
			t.Fatalf("template bytes %d (%v), want the upload's %d", used, err, len(data))
		}

		// Failures leave nothing.
		if err := db.PutTemplateFile(ctx, "o2", "t1", "h2", 3, bytes.NewReader([]byte("abc")), now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("upload to another org's template: want ErrNotFound, got %v", err)
		}
		if err := db.PutTemplateFile(ctx, "o1", "t1", "h3", FileChunkBytes+10, bytes.NewReader(data[:FileChunkBytes+5]), now); err == nil {
			t.Fatal("a short upload was stored")
		}
		if err := db.PutTemplateFile(ctx, "o1", "t1", "h4", 5, bytes.NewReader(data[:FileChunkBytes+5]), now); err == nil {
			t.Fatal("a long upload was stored")
		}
		limit := int64(len(data)) + 100
		if err := db.SetTemplateQuotas(ctx, "o1", TemplateQuotas{MaxTemplateBytes: &limit}); err != nil {
			t.Fatal(err)
		}
		if err := db.PutTemplateFile(ctx, "o1", "t1", "h5", 101, bytes.NewReader(data[:101]), now); !errors.Is(err, ErrTemplateBytes) {
			t.Fatalf("an upload past max_template_bytes: want ErrTemplateBytes, got %v", err)
		}
		if f, c := rows(); f != 1 || c != 3 {
			t.Fatalf("failed uploads left rows: %d files, %d chunks, want 1 and 3", f, c)
		}
		if err := db.PutTemplateFile(ctx, "o1", "t1", "h6", 100, bytes.NewReader(data[:100]), now); err != nil {
			t.Fatalf("an upload within max_template_bytes: %v", err)
		}

		// Deleting the template removes its files; a reader opened before fails.
		r, err = db.OpenTemplateFile(ctx, "o1", "t1", "h1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.DeleteTemplate(ctx, "o1", "t1"); err != nil {
			t.Fatal(err)
		}
		if f, c := rows(); f != 0 || c != 0 {
			t.Fatalf("the deleted template left %d files, %d chunks", f, c)
		}
		if _, err := io.ReadAll(r); err == nil {
			t.Fatal("reading the files of a deleted template succeeded")
		}
		if used, err := TemplateBytes(ctx, db.Reader(), "o1"); err != nil || used != 0 {
			t.Fatalf("template bytes after the delete: %d (%v)", used, err)
		}
	})
}
