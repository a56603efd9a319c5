package templates

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Files of COPY steps: E2B's SDK hashes each step's files, asks
// GET /templates/{id}/files/{hash} whether the backend has them, and
// uploads the archive (a gzip'd tar) to the link answered, without its
// API key (E2B links to its storage); the build reads it by hash. The link
// is signed (HMAC of org, template, hash and expiry with a secret of the
// database) and expires.
//
// The archives are kept in the database (store.PutTemplateFile, chunked),
// not on the disk of the replica that received the upload: behind a load
// balancer the status query, the upload and the build's start may each
// reach another replica, and a build runs on the replica that received
// its start, so a replica's own data directory would answer "not present"
// and fail the build on every other replica. The database is the one store
// every replica already shares, on SQLite and PostgreSQL alike, with no
// object store to configure; uploads are bounded (MaxFileBytes and the
// org's max_template_bytes) so it stays a modest share of it. An upload is
// spooled to a local temporary file first, so the database transaction
// that writes it lasts as long as the database takes, never as long as a
// slow client: on SQLite it holds the one writer. The transaction writes
// the archive and its record at once: a failed upload leaves nothing.

// MaxFileBytes bounds one uploaded archive (the engine bounds it too).
const MaxFileBytes = 1 << 30

// uploadTTL is how long an upload link works.
const uploadTTL = time.Hour

var hashPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// FileUpload says whether org's template ref has the files of hash, and
// where to upload them if not (path and query under the edge that asked).
type FileUpload struct {
	Present bool
	Query   string // "expires=…&signature=…" for the upload link
}

// FileStatus answers GET /templates/{id}/files/{hash}.
func (s *Service) FileStatus(ctx context.Context, org, ref, hash string) (FileUpload, string, error) {
	if !hashPattern.MatchString(hash) {
		return FileUpload{}, "", &domain.InvalidError{In: domain.InPath, Field: "hash", Msg: "a files hash is letters, digits, '-' and '_' (at most 128)"}
	}
	t, _, err := s.Get(ctx, org, ref)
	if err != nil {
		return FileUpload{}, "", err
	}
	if _, err := s.db.TemplateFileOf(ctx, org, t.ID, hash); err == nil {
		return FileUpload{Present: true}, t.ID, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return FileUpload{}, "", err
	}
	exp := s.now().Add(uploadTTL).Unix()
	sig, err := s.sign(ctx, org, t.ID, hash, exp)
	if err != nil {
		return FileUpload{}, "", err
	}
	return FileUpload{Query: fmt.Sprintf("org=%s&expires=%d&signature=%s", org, exp, sig)}, t.ID, nil
}

func (s *Service) sign(ctx context.Context, org, templateID, hash string, exp int64) (string, error) {
	seed, err := s.db.TemplateUploadSeed(ctx)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, []byte(seed))
	fmt.Fprintf(m, "%s\x00%s\x00%s\x00%d", org, templateID, hash, exp)
	return hex.EncodeToString(m.Sum(nil)), nil
}

// PutFile stores an upload made through a signed link (the link is the
// credential: no API key).
func (s *Service) PutFile(ctx context.Context, org, templateID, hash, expires, signature string, body io.Reader) error {
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || !hashPattern.MatchString(hash) {
		return &domain.RejectedError{Detail: "not an upload link this backend answered; ask GET /templates/{id}/files/{hash} for one"}
	}
	want, err := s.sign(ctx, org, templateID, hash, exp)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(want), []byte(signature)) {
		return &domain.RejectedError{Detail: "the upload link's signature does not match; ask GET /templates/{id}/files/{hash} for a new one"}
	}
	if s.now().Unix() > exp {
		return &domain.RejectedError{Detail: "the upload link expired; ask GET /templates/{id}/files/{hash} for a new one"}
	}
	// The spool is bounded by what the org may still store, so a client
	// past its quota cannot fill the local disk either.
	limit, err := s.uploadRoom(ctx, org)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.cfg.SpoolDir, spoolPattern)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(body, limit+1))
	if err != nil {
		return err
	}
	if n > limit {
		if limit < s.maxFileBytes() {
			return &domain.QuotaExceededError{Detail: fmt.Sprintf("template quota reached: the archive is larger than the %d bytes left under the org's max_template_bytes (images, snapshots and uploaded files count); delete a template or snapshot, or ask the operator to raise max_template_bytes", limit)}
		}
		return &domain.QuotaExceededError{Detail: fmt.Sprintf("the archive is larger than %d bytes, the limit of one COPY step's files", limit)}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	err = s.db.PutTemplateFile(ctx, org, templateID, hash, n, f, s.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return domain.NotFound("template", templateID)
	case errors.Is(err, store.ErrTemplateBytes):
		return &domain.QuotaExceededError{Detail: err.Error() + "; delete a template or snapshot, or ask the operator to raise max_template_bytes"}
	}
	return err
}

// spoolPattern names the temporary files of uploads in flight.
const spoolPattern = ".template-upload-*"

func (s *Service) maxFileBytes() int64 {
	if s.cfg.MaxFileBytes > 0 {
		return s.cfg.MaxFileBytes
	}
	return MaxFileBytes
}

// uploadRoom is the most one upload of org may hold: MaxFileBytes, or
// less when the org's max_template_bytes leaves less.
func (s *Service) uploadRoom(ctx context.Context, org string) (int64, error) {
	limit := s.maxFileBytes()
	q, err := s.db.TemplateQuotasOf(ctx, org)
	if err != nil || q.MaxTemplateBytes == nil {
		return limit, err
	}
	used, err := store.TemplateBytes(ctx, s.db.Reader(), org)
	if err != nil {
		return 0, err
	}
	return max(0, min(limit, *q.MaxTemplateBytes-used)), nil
}

// filesOf opens the uploaded archives of org's template for its build.
func (s *Service) filesOf(org, templateID string) func(context.Context, string) (io.ReadCloser, error) {
	return func(ctx context.Context, hash string) (io.ReadCloser, error) {
		if !hashPattern.MatchString(hash) {
			return nil, fmt.Errorf("no files of hash %q were uploaded", hash)
		}
		r, err := s.db.OpenTemplateFile(ctx, org, templateID, hash)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("no files of hash %q were uploaded for this template; upload them first (GET /templates/{id}/files/{hash})", hash)
		}
		return r, err
	}
}

// sweepSpool removes the spool files of uploads a previous process left
// (it stopped mid-upload) once older than an upload link lives: younger
// ones may belong to another process spooling into the same directory.
func sweepSpool(dir string, now time.Time) {
	if dir == "" {
		return
	}
	names, _ := filepath.Glob(filepath.Join(dir, spoolPattern))
	for _, n := range names {
		if fi, err := os.Stat(n); err == nil && now.Sub(fi.ModTime()) > uploadTTL {
			_ = os.Remove(n)
		}
	}
}
