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
)

// Files of COPY steps: E2B's SDK hashes each step's files, asks
// GET /templates/{id}/files/{hash} whether the backend has them, and
// uploads the archive (a gzip'd tar) to the link answered, without its
// API key (E2B links to its storage); the build reads it by hash. They
// are kept under FilesDir/<org>/<template>/<hash>, removed with the
// template. The link is signed (HMAC of org, template, hash and expiry
// with a secret of the database) and expires.

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
	if s.cfg.FilesDir == "" {
		return FileUpload{}, "", &domain.UnavailableError{Detail: "this backend keeps no template files (no data directory)"}
	}
	if _, err := os.Stat(s.filePath(org, t.ID, hash)); err == nil {
		return FileUpload{Present: true}, t.ID, nil
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
	if err != nil || !hashPattern.MatchString(hash) || s.cfg.FilesDir == "" {
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
	dir := filepath.Join(s.cfg.FilesDir, org, templateID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	n, err := io.Copy(f, io.LimitReader(body, MaxFileBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n > MaxFileBytes {
		return &domain.QuotaExceededError{Detail: fmt.Sprintf("the archive is larger than %d bytes, the limit of one COPY step's files", MaxFileBytes)}
	}
	return os.Rename(f.Name(), s.filePath(org, templateID, hash))
}

func (s *Service) filePath(org, templateID, hash string) string {
	return filepath.Join(s.cfg.FilesDir, org, templateID, hash)
}

// filesOf opens the uploaded archives of org's template for its build.
func (s *Service) filesOf(org, templateID string) func(context.Context, string) (io.ReadCloser, error) {
	return func(_ context.Context, hash string) (io.ReadCloser, error) {
		if !hashPattern.MatchString(hash) || s.cfg.FilesDir == "" {
			return nil, fmt.Errorf("no files of hash %q were uploaded", hash)
		}
		f, err := os.Open(s.filePath(org, templateID, hash))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no files of hash %q were uploaded for this template; upload them first (GET /templates/{id}/files/{hash})", hash)
		}
		return f, err
	}
}
