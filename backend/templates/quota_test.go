package templates

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// One PostgreSQL cluster for the package; each test gets its own database.
func TestMain(m *testing.M) { pgtest.Main(m) }

// The snapshot quotas on each database: max_snapshots counts the org's
// snapshot templates (a new snapshot past it is a 409 naming it, a new
// build of a snapshot it holds is not), max_snapshot_bytes the bytes of
// every build of them (before the commit: once reached; after: with the
// image's size); built templates and another org's snapshots count for
// neither; GET /sandboxes/usage's figures are the same sums.
func TestSnapshotQuotas(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		for _, org := range []string{"o", "other"} {
			if _, _, err := db.EnsureOrg(ctx, org, 1_000_000); err != nil {
				t.Fatal(err)
			}
		}
		s := New(Config{DB: db})
		add := func(org, alias string, kind template.Kind, size int64) {
			t.Helper()
			now := time.Now()
			tpl := &store.Template{ID: newTemplateID(), OrgID: org, Alias: alias, Kind: kind, CPUCount: 2, MemoryMB: 512, CreatedAt: now, UpdatedAt: now}
			b := &store.TemplateBuild{ID: newTemplateID(), OrgID: org, Status: template.StatusReady, Spec: "{}", Image: "img-" + alias, SizeBytes: size,
				CPUCount: 2, MemoryMB: 512, CreatedAt: now, UpdatedAt: now, FinishedAt: now}
			if err := db.Tx(ctx, func(tx *sql.Tx) error {
				got, _, err := store.EnsureTemplateTx(ctx, tx, tpl)
				if err != nil {
					return err
				}
				b.TemplateID = got.ID
				return store.InsertBuildTx(ctx, tx, b, []string{b.ID})
			}); err != nil {
				t.Fatal(err)
			}
		}
		add("o", "snap", template.KindSnapshot, 60)
		add("o", "built", template.KindBuild, 1000)
		add("other", "theirs", template.KindSnapshot, 500)

		if n, b, err := store.SnapshotUsage(ctx, db.Reader(), "o"); err != nil || n != 1 || b != 60 {
			t.Fatalf("usage: %d snapshots, %d bytes, %v; want 1, 60", n, b, err)
		}
		// Unlimited: nothing refused.
		if err := s.checkSnapshotQuotas(ctx, db.Reader(), "o", "", 1<<40); err != nil {
			t.Fatalf("no quota set: %v", err)
		}
		if err := admission.SetQuotas(ctx, db, "o", admission.Quotas{MaxSnapshots: ptr(1), MaxSnapshotBytes: ptr(int64(100))}); err != nil {
			t.Fatal(err)
		}
		q, err := admission.QuotasOf(ctx, db.Reader(), "o")
		if err != nil || q.MaxSnapshots == nil || *q.MaxSnapshots != 1 || q.MaxSnapshotBytes == nil || *q.MaxSnapshotBytes != 100 {
			t.Fatalf("quotas read back: %+v %v", q, err)
		}
		refused := func(err error, limit string) {
			t.Helper()
			var c *domain.ConflictError
			if !errors.As(err, &c) || !strings.HasPrefix(c.Detail, limit+":") {
				t.Fatalf("want a conflict naming %s, got %v", limit, err)
			}
		}
		refused(s.checkSnapshotQuotas(ctx, db.Reader(), "o", "", -1), "max_snapshots")
		refused(s.checkSnapshotQuotas(ctx, db.Reader(), "o", "new-name", -1), "max_snapshots")
		if err := s.checkSnapshotQuotas(ctx, db.Reader(), "o", "snap", -1); err != nil {
			t.Fatalf("a new build of a snapshot the org holds: %v", err)
		}
		if err := s.checkSnapshotQuotas(ctx, db.Reader(), "o", "snap", 40); err != nil {
			t.Fatalf("an image that fits max_snapshot_bytes exactly: %v", err)
		}
		refused(s.checkSnapshotQuotas(ctx, db.Reader(), "o", "snap", 41), "max_snapshot_bytes")
		if err := db.Tx(ctx, func(tx *sql.Tx) error { return s.checkSnapshotQuotas(ctx, tx, "o", "snap", 41) }); err == nil {
			t.Fatal("the check inside the recording transaction let an image past max_snapshot_bytes")
		}
		if err := admission.SetQuotas(ctx, db, "o", admission.Quotas{MaxSnapshotBytes: ptr(int64(60))}); err != nil {
			t.Fatal(err)
		}
		refused(s.checkSnapshotQuotas(ctx, db.Reader(), "o", "", -1), "max_snapshot_bytes")
		// Another org's quotas are its own.
		if err := s.checkSnapshotQuotas(ctx, db.Reader(), "other", "", 1); err != nil {
			t.Fatalf("another org: %v", err)
		}
		if err := admission.SetQuotas(ctx, db, "o", admission.Quotas{MaxSnapshots: ptr(-1)}); err == nil || !strings.Contains(err.Error(), "max_snapshots") {
			t.Fatalf("a negative max_snapshots: %v", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }
