package templates_test

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/templates"
)

// failingReader gives n bytes, then fails, as a client's body cut short.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("connection reset by peer")
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

// An upload through a signed link is kept in the database (present for
// any service on it), and every failed upload (cut short, past the size
// limit, past max_template_bytes, a bad link) leaves nothing: no record
// and no spool file.
func TestFileUploadsBoundedAndLeaveNothingOnFailure(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	spool := t.TempDir()
	svc := templates.New(templates.Config{DB: db, SpoolDir: spool, MaxFileBytes: 1000})
	other := templates.New(templates.Config{DB: db, SpoolDir: t.TempDir()}) // another replica
	req, err := svc.Request(ctx, "o1", templates.Request{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	tid := req.Template.ID
	link := func(hash string) url.Values {
		t.Helper()
		up, _, err := svc.FileStatus(ctx, "o1", "web", hash)
		if err != nil || up.Present {
			t.Fatalf("files status of %s: %+v %v", hash, up, err)
		}
		q, _ := url.ParseQuery(up.Query)
		return q
	}
	put := func(hash string, q url.Values, body io.Reader) error {
		return svc.PutFile(ctx, q.Get("org"), tid, hash, q.Get("expires"), q.Get("signature"), body)
	}
	left := func() {
		t.Helper()
		if names, _ := os.ReadDir(spool); len(names) != 0 {
			t.Fatalf("a failed upload left %d spool files", len(names))
		}
		if used, _ := store.TemplateBytes(ctx, db.Reader(), "o1"); used != 10 {
			t.Fatalf("the org holds %d bytes, want the 10 of the one good upload", used)
		}
	}

	if err := put("good", link("good"), strings.NewReader("0123456789")); err != nil {
		t.Fatal(err)
	}
	if up, _, err := other.FileStatus(ctx, "o1", tid, "good"); err != nil || !up.Present {
		t.Fatalf("another service on the database does not see the upload: %+v %v", up, err)
	}
	left()

	if err := put("cut", link("cut"), &failingReader{n: 500}); err == nil {
		t.Fatal("an upload cut short was stored")
	}
	left()
	var quota *domain.QuotaExceededError
	if err := put("big", link("big"), &failingReader{n: 5000}); !errors.As(err, &quota) || !strings.Contains(quota.Detail, "1000 bytes") {
		t.Fatalf("past the size limit: want a quota error naming 1000 bytes, got %v", err)
	}
	left()
	limit := int64(100)
	if err := db.SetTemplateQuotas(ctx, "o1", store.TemplateQuotas{MaxTemplateBytes: &limit}); err != nil {
		t.Fatal(err)
	}
	if err := put("over", link("over"), &failingReader{n: 200}); !errors.As(err, &quota) || !strings.Contains(quota.Detail, "max_template_bytes") {
		t.Fatalf("past max_template_bytes: want a quota error naming it, got %v", err)
	}
	left()
	q := link("forged")
	q.Set("signature", strings.Repeat("0", 64))
	var rej *domain.RejectedError
	if err := put("forged", q, strings.NewReader("abc")); !errors.As(err, &rej) {
		t.Fatalf("a forged link: want a rejection, got %v", err)
	}
	left()

	// Deleting the template removes its files for every service.
	if err := other.Delete(ctx, "o1", "web"); err != nil {
		t.Fatal(err)
	}
	if used, _ := store.TemplateBytes(ctx, db.Reader(), "o1"); used != 0 {
		t.Fatalf("the deleted template's files still count %d bytes", used)
	}
}
