package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"
)

// FileChunkBytes is the most one row of template_file_chunks holds: an
// archive is written and read a chunk at a time, so neither side holds a
// whole archive in memory.
const FileChunkBytes = 1 << 20

// ErrTemplateBytes is returned when an upload would pass an org's
// max_template_bytes.
var ErrTemplateBytes = errors.New("template bytes quota reached")

// TemplateFile is an uploaded archive of a COPY step (migration 00022).
type TemplateFile struct {
	TemplateID string
	Hash       string
	OrgID      string
	SizeBytes  int64
	Chunks     int
	CreatedAt  time.Time
}

// PutTemplateFile stores the size bytes read from r as the files of hash
// of org's template, in chunks, in one transaction: a failure (r short or
// long, the database, the quota) leaves nothing. The template must exist
// (ErrNotFound otherwise; on PostgreSQL its row is locked, so a delete of
// the template either waits for the upload, and removes it, or wins and
// the upload finds no template). Files already there are kept (a hash
// names its content). An upload that would take org's template bytes
// (images and uploads) past max_template_bytes is ErrTemplateBytes.
func (db *DB) PutTemplateFile(ctx context.Context, org, templateID, hash string, size int64, r io.Reader, at time.Time) error {
	return db.Tx(ctx, func(tx *sql.Tx) error {
		if err := LockOrgQuotasTx(ctx, tx, org); err != nil {
			return err
		}
		q := `SELECT id FROM templates WHERE id = ? AND org_id = ?`
		if isPostgresTx(tx) {
			q += ` FOR UPDATE`
		}
		var id string
		if err := tx.QueryRowContext(ctx, q, templateID, org).Scan(&id); errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		} else if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM template_files WHERE template_id = ? AND hash = ?`, templateID, hash).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		quotas, err := templateQuotasOf(ctx, tx, org)
		if err != nil {
			return err
		}
		if quotas.MaxTemplateBytes != nil {
			used, err := TemplateBytes(ctx, tx, org)
			if err != nil {
				return err
			}
			if used+size > *quotas.MaxTemplateBytes {
				return fmt.Errorf("%w: max_template_bytes is %d; the org's templates, snapshots and uploaded files hold %d bytes and these files have %d",
					ErrTemplateBytes, *quotas.MaxTemplateBytes, used, size)
			}
		}
		buf := make([]byte, FileChunkBytes)
		var total int64
		chunks := 0
		for {
			k, err := io.ReadFull(r, buf)
			if k > 0 {
				total += int64(k)
				if total > size {
					return fmt.Errorf("the files are longer than the %d bytes announced", size)
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO template_file_chunks (template_id, hash, n, data) VALUES (?, ?, ?, ?)`,
					templateID, hash, chunks, buf[:k]); err != nil {
					return err
				}
				chunks++
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			if err != nil {
				return err
			}
		}
		if total != size {
			return fmt.Errorf("the files are %d bytes, not the %d announced", total, size)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO template_files (template_id, hash, org_id, size_bytes, chunks, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			templateID, hash, org, size, chunks, at.UnixNano())
		return err
	})
}

// TemplateFileOf reads the record of org's files hash of template
// (ErrNotFound when none were uploaded).
func (db *DB) TemplateFileOf(ctx context.Context, org, templateID, hash string) (*TemplateFile, error) {
	f := &TemplateFile{}
	err := db.r.QueryRowContext(ctx, `SELECT template_id, hash, org_id, size_bytes, chunks, created_at FROM template_files
		WHERE org_id = ? AND template_id = ? AND hash = ?`, org, templateID, hash).
		Scan(&f.TemplateID, &f.Hash, &f.OrgID, &f.SizeBytes, &f.Chunks, nsTime(&f.CreatedAt))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return f, err
}

// OpenTemplateFile opens org's files hash of template for reading, a
// chunk at a time (ErrNotFound when none were uploaded). A read after the
// template was deleted fails.
func (db *DB) OpenTemplateFile(ctx context.Context, org, templateID, hash string) (io.ReadCloser, error) {
	f, err := db.TemplateFileOf(ctx, org, templateID, hash)
	if err != nil {
		return nil, err
	}
	return &fileReader{ctx: ctx, db: db, f: f}, nil
}

type fileReader struct {
	ctx  context.Context
	db   *DB
	f    *TemplateFile
	next int
	buf  []byte
}

func (r *fileReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.next >= r.f.Chunks {
			return 0, io.EOF
		}
		err := r.db.r.QueryRowContext(r.ctx, `SELECT data FROM template_file_chunks WHERE template_id = ? AND hash = ? AND n = ?`,
			r.f.TemplateID, r.f.Hash, r.next).Scan(&r.buf)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("the files of hash %q were removed while read (the template was deleted)", r.f.Hash)
		}
		if err != nil {
			return 0, err
		}
		r.next++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *fileReader) Close() error { r.buf = nil; r.next = r.f.Chunks; return nil }

// deleteTemplateFilesTx removes the uploaded files of template.
func deleteTemplateFilesTx(ctx context.Context, tx *sql.Tx, templateID string) error {
	for _, q := range []string{
		`DELETE FROM template_file_chunks WHERE template_id = ?`,
		`DELETE FROM template_files WHERE template_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, templateID); err != nil {
			return err
		}
	}
	return nil
}
