package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
)

// Template is an org's own template (API §15) or snapshot (§14): a name
// (Alias, "" for none) over builds, each an image the backend made.
type Template struct {
	ID            string
	OrgID         string
	Alias         string
	Kind          template.Kind
	CPUCount      int
	MemoryMB      int
	Parent        string // the template it was built from, or the snapshot's sandbox's template
	SourceSandbox string // a snapshot's sandbox
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// TemplateBuild is one build of a template: a build request and what came of it.
type TemplateBuild struct {
	ID         string
	TemplateID string
	OrgID      string
	Status     template.Status
	Reason     string // why it failed
	ReasonStep string // the step that failed, if one did
	Spec       string // the build request, JSON (base, steps, commands)
	Image      string // the local image once ready
	SizeBytes  int64
	CPUCount   int
	MemoryMB   int
	StartCmd   string
	ReadyCmd   string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time
}

// TemplateTag points a name at one build of a template.
type TemplateTag struct {
	TemplateID string
	Tag        string
	BuildID    string
	CreatedAt  time.Time
}

// BuildLogEntry is one line of a build's log.
type BuildLogEntry struct {
	N       int
	At      time.Time
	Level   string
	Step    string
	Message string
}

// TemplateQuotas are an org's limits on its templates (snapshots included);
// nil is unlimited.
type TemplateQuotas struct {
	MaxTemplates     *int
	MaxTemplateBytes *int64
}

// ErrTemplateLimit is returned when an insert would pass an org's template quota.
var ErrTemplateLimit = errors.New("template quota reached")

const templateColumns = `id, org_id, COALESCE(alias, ''), kind, cpu_count, memory_mb, parent, source_sandbox, created_at, updated_at`

func scanTemplate(s Scanner) (*Template, error) {
	var t Template
	var kind string
	err := s.Scan(&t.ID, &t.OrgID, &t.Alias, &kind, &t.CPUCount, &t.MemoryMB, &t.Parent, &t.SourceSandbox, nsTime(&t.CreatedAt), nsTime(&t.UpdatedAt))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	t.Kind = template.Kind(kind)
	return &t, err
}

const buildColumns = `id, template_id, org_id, status, reason, reason_step, spec, image, size_bytes, cpu_count, memory_mb,
	start_cmd, ready_cmd, created_at, updated_at, finished_at`

func scanBuild(s Scanner) (*TemplateBuild, error) {
	var b TemplateBuild
	var status string
	var finished int64
	err := s.Scan(&b.ID, &b.TemplateID, &b.OrgID, &status, &b.Reason, &b.ReasonStep, &b.Spec, &b.Image, &b.SizeBytes,
		&b.CPUCount, &b.MemoryMB, &b.StartCmd, &b.ReadyCmd, nsTime(&b.CreatedAt), nsTime(&b.UpdatedAt), &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	b.Status = template.Status(status)
	if finished != 0 {
		b.FinishedAt = time.Unix(0, finished).UTC()
	}
	return &b, err
}

func nullAlias(a string) any {
	if a == "" {
		return nil
	}
	return a
}

// EnsureTemplateTx returns org's template named t.Alias, inserting t when
// there is none (or when t has no alias). created says which. The insert
// counts against the org's template quota (ErrTemplateLimit).
func EnsureTemplateTx(ctx context.Context, tx *sql.Tx, t *Template) (out *Template, created bool, err error) {
	if t.Alias != "" {
		got, err := scanTemplate(tx.QueryRowContext(ctx, `SELECT `+templateColumns+` FROM templates WHERE org_id = ? AND alias = ?`, t.OrgID, t.Alias))
		if err == nil {
			return got, false, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, false, err
		}
	}
	if err := LockOrgQuotasTx(ctx, tx, t.OrgID); err != nil {
		return nil, false, err
	}
	q, err := templateQuotasOf(ctx, tx, t.OrgID)
	if err != nil {
		return nil, false, err
	}
	if q.MaxTemplates != nil {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM templates WHERE org_id = ?`, t.OrgID).Scan(&n); err != nil {
			return nil, false, err
		}
		if n >= *q.MaxTemplates {
			return nil, false, fmt.Errorf("%w: max_templates is %d and the org has %d", ErrTemplateLimit, *q.MaxTemplates, n)
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO templates (id, org_id, alias, kind, cpu_count, memory_mb, parent, source_sandbox, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (org_id, alias) DO NOTHING`,
		t.ID, t.OrgID, nullAlias(t.Alias), string(t.Kind), t.CPUCount, t.MemoryMB, t.Parent, t.SourceSandbox, t.CreatedAt.UnixNano(), t.UpdatedAt.UnixNano())
	if err != nil {
		return nil, false, err
	}
	if n, _ := res.RowsAffected(); n == 0 { // another create of the same alias won
		got, err := scanTemplate(tx.QueryRowContext(ctx, `SELECT `+templateColumns+` FROM templates WHERE org_id = ? AND alias = ?`, t.OrgID, t.Alias))
		return got, false, err
	}
	return t, true, nil
}

// TemplateByRef reads org's template whose id or alias is ref.
func (db *DB) TemplateByRef(ctx context.Context, org, ref string) (*Template, error) {
	return scanTemplate(db.r.QueryRowContext(ctx, `SELECT `+templateColumns+` FROM templates
		WHERE org_id = ? AND (id = ? OR alias = ?) ORDER BY CASE WHEN id = ? THEN 0 ELSE 1 END LIMIT 1`, org, ref, ref, ref))
}

// TemplatePage lists org's templates of kind ("" for every kind), newest
// first, after the cursor (created_at, id) of the previous page's last one.
func (db *DB) TemplatePage(ctx context.Context, org string, kind template.Kind, afterAt time.Time, afterID string, limit int) ([]*Template, error) {
	q := `SELECT ` + templateColumns + ` FROM templates WHERE org_id = ?`
	args := []any{org}
	if kind != "" {
		q += ` AND kind = ?`
		args = append(args, string(kind))
	}
	if afterID != "" {
		q += ` AND (created_at < ? OR (created_at = ? AND id < ?))`
		args = append(args, afterAt.UnixNano(), afterAt.UnixNano(), afterID)
	}
	q += ` ORDER BY created_at DESC, id DESC`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	return QueryAll(ctx, db.r, scanTemplate, q, args...)
}

// DeleteTemplate removes org's template id with its builds, tags and logs,
// and returns the images of its builds (the caller removes them).
func (db *DB) DeleteTemplate(ctx context.Context, org, id string) (images []string, err error) {
	err = db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM templates WHERE org_id = ? AND id = ?`, org, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		if images, err = QueryStrings(ctx, tx, `SELECT image FROM template_builds WHERE template_id = ? AND image <> ''`, id); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM template_build_logs WHERE build_id IN (SELECT id FROM template_builds WHERE template_id = ?)`,
			`DELETE FROM template_tags WHERE template_id = ?`,
			`DELETE FROM template_builds WHERE template_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return deleteTemplateFilesTx(ctx, tx, id)
	})
	return images, err
}

// InsertBuildTx adds build b to its template and points tags at it.
func InsertBuildTx(ctx context.Context, tx *sql.Tx, b *TemplateBuild, tags []string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO template_builds (`+buildColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ID, b.TemplateID, b.OrgID, string(b.Status), b.Reason, b.ReasonStep, b.Spec, b.Image, b.SizeBytes, b.CPUCount, b.MemoryMB,
		b.StartCmd, b.ReadyCmd, b.CreatedAt.UnixNano(), b.UpdatedAt.UnixNano(), nanosOrZero(b.FinishedAt))
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE templates SET updated_at = ? WHERE id = ?`, b.CreatedAt.UnixNano(), b.TemplateID); err != nil {
		return err
	}
	return SetTagsTx(ctx, tx, b.TemplateID, b.ID, tags, b.CreatedAt)
}

// SetTagsTx points tags of template at build (moving them from any other).
func SetTagsTx(ctx context.Context, tx *sql.Tx, templateID, buildID string, tags []string, at time.Time) error {
	for _, tag := range tags {
		if _, err := tx.ExecContext(ctx, `INSERT INTO template_tags (template_id, tag, build_id, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (template_id, tag) DO UPDATE SET build_id = excluded.build_id, created_at = excluded.created_at`,
			templateID, tag, buildID, at.UnixNano()); err != nil {
			return err
		}
	}
	return nil
}

// SetTags is SetTagsTx in a transaction of its own.
func (db *DB) SetTags(ctx context.Context, templateID, buildID string, tags []string, at time.Time) error {
	return db.Tx(ctx, func(tx *sql.Tx) error { return SetTagsTx(ctx, tx, templateID, buildID, tags, at) })
}

// DeleteTags removes tags of template; a tag it does not have is ignored.
func (db *DB) DeleteTags(ctx context.Context, templateID string, tags []string) error {
	return db.Tx(ctx, func(tx *sql.Tx) error {
		for _, tag := range tags {
			if _, err := tx.ExecContext(ctx, `DELETE FROM template_tags WHERE template_id = ? AND tag = ?`, templateID, tag); err != nil {
				return err
			}
		}
		return nil
	})
}

// Tags lists template's tags, by name.
func (db *DB) Tags(ctx context.Context, templateID string) ([]TemplateTag, error) {
	return QueryAll(ctx, db.r, func(s Scanner) (TemplateTag, error) {
		var t TemplateTag
		err := s.Scan(&t.TemplateID, &t.Tag, &t.BuildID, nsTime(&t.CreatedAt))
		return t, err
	}, `SELECT template_id, tag, build_id, created_at FROM template_tags WHERE template_id = ? ORDER BY tag`, templateID)
}

// BuildOfTag reads the build tag points at (ErrNotFound when no such tag).
func (db *DB) BuildOfTag(ctx context.Context, templateID, tag string) (*TemplateBuild, error) {
	return scanBuild(db.r.QueryRowContext(ctx, `SELECT `+prefixed("b.", buildColumns)+` FROM template_tags t
		JOIN template_builds b ON b.id = t.build_id WHERE t.template_id = ? AND t.tag = ?`, templateID, tag))
}

func prefixed(p, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// Build reads org's build id.
func (db *DB) Build(ctx context.Context, org, id string) (*TemplateBuild, error) {
	return scanBuild(db.r.QueryRowContext(ctx, `SELECT `+buildColumns+` FROM template_builds WHERE org_id = ? AND id = ?`, org, id))
}

// Builds lists template's builds, newest first.
func (db *DB) Builds(ctx context.Context, templateID string) ([]*TemplateBuild, error) {
	return QueryAll(ctx, db.r, scanBuild, `SELECT `+buildColumns+` FROM template_builds WHERE template_id = ? ORDER BY created_at DESC, id DESC`, templateID)
}

// UpdateBuild writes b's outcome (status, reason, spec, image, size,
// commands), only while the build is not done: a finished build never
// changes. It reports whether it wrote.
func (db *DB) UpdateBuild(ctx context.Context, b *TemplateBuild) (bool, error) {
	res, err := db.w.ExecContext(ctx, `UPDATE template_builds SET status = ?, reason = ?, reason_step = ?, spec = ?, image = ?, size_bytes = ?,
		start_cmd = ?, ready_cmd = ?, updated_at = ?, finished_at = ? WHERE id = ? AND status IN (?, ?)`,
		string(b.Status), b.Reason, b.ReasonStep, b.Spec, b.Image, b.SizeBytes, b.StartCmd, b.ReadyCmd, b.UpdatedAt.UnixNano(), nanosOrZero(b.FinishedAt),
		b.ID, string(template.StatusWaiting), string(template.StatusBuilding))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// AppendBuildLog adds entries to build's log, numbered after its last.
func (db *DB) AppendBuildLog(ctx context.Context, buildID string, entries []BuildLogEntry) error {
	return db.Tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(n), -1) FROM template_build_logs WHERE build_id = ?`, buildID).Scan(&n); err != nil {
			return err
		}
		for _, e := range entries {
			n++
			if _, err := tx.ExecContext(ctx, `INSERT INTO template_build_logs (build_id, n, at, level, step, message) VALUES (?, ?, ?, ?, ?, ?)`,
				buildID, n, e.At.UnixNano(), e.Level, e.Step, e.Message); err != nil {
				return err
			}
		}
		return nil
	})
}

// BuildLog reads up to limit entries of build's log from offset.
func (db *DB) BuildLog(ctx context.Context, buildID string, offset, limit int) ([]BuildLogEntry, error) {
	return QueryAll(ctx, db.r, func(s Scanner) (BuildLogEntry, error) {
		var e BuildLogEntry
		err := s.Scan(&e.N, nsTime(&e.At), &e.Level, &e.Step, &e.Message)
		return e, err
	}, fmt.Sprintf(`SELECT n, at, level, step, message FROM template_build_logs WHERE build_id = ? AND n >= ? ORDER BY n LIMIT %d`, limit), buildID, offset)
}

// TemplateBytes is what org's templates hold, together: its ready builds'
// images and the files uploaded for its builds' COPY steps (max_template_bytes
// bounds both).
func TemplateBytes(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, org string) (int64, error) {
	var n int64
	err := q.QueryRowContext(ctx, `SELECT COALESCE(SUM(size_bytes), 0) + (SELECT COALESCE(SUM(size_bytes), 0) FROM template_files WHERE org_id = ?)
		FROM template_builds WHERE org_id = ?`, org, org).Scan(&n)
	return n, err
}

func templateQuotasOf(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, org string) (TemplateQuotas, error) {
	var out TemplateQuotas
	var count, bytes sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT max_templates, max_template_bytes FROM template_quotas WHERE org_id = ?`, org).Scan(&count, &bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	if count.Valid {
		v := int(count.Int64)
		out.MaxTemplates = &v
	}
	if bytes.Valid {
		out.MaxTemplateBytes = &bytes.Int64
	}
	return out, nil
}

// TemplateQuotasOf reads org's template quotas (unlimited when none were set).
func (db *DB) TemplateQuotasOf(ctx context.Context, org string) (TemplateQuotas, error) {
	return templateQuotasOf(ctx, db.r, org)
}

// SetTemplateQuotas replaces org's template quotas (nil fields: unlimited).
func (db *DB) SetTemplateQuotas(ctx context.Context, org string, q TemplateQuotas) error {
	var count, bytes any
	if q.MaxTemplates != nil {
		count = *q.MaxTemplates
	}
	if q.MaxTemplateBytes != nil {
		bytes = *q.MaxTemplateBytes
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO template_quotas (org_id, max_templates, max_template_bytes) VALUES (?, ?, ?)
		ON CONFLICT (org_id) DO UPDATE SET max_templates = excluded.max_templates, max_template_bytes = excluded.max_template_bytes`, org, count, bytes)
	return err
}

// TemplateUploadSeed is a random secret made once per database (32 bytes,
// hex), the key that signs the upload links of template build files
// (GET /templates/{id}/files/{hash}): an SDK uploads to the link without
// its API key, as to E2B's storage. It is never logged nor answered.
func (db *DB) TemplateUploadSeed(ctx context.Context) (string, error) {
	return db.seed(ctx, "template_upload_seed")
}

// DeleteBuild removes org's build id with its log and any tag on it.
func (db *DB) DeleteBuild(ctx context.Context, org, id string) error {
	return db.Tx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`DELETE FROM template_build_logs WHERE build_id = ? AND EXISTS (SELECT 1 FROM template_builds WHERE id = ? AND org_id = ?)`,
			`DELETE FROM template_tags WHERE build_id = ? AND EXISTS (SELECT 1 FROM template_builds WHERE id = ? AND org_id = ?)`,
			`DELETE FROM template_builds WHERE id = ? AND id = ? AND org_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, id, id, org); err != nil {
				return err
			}
		}
		return nil
	})
}

// SnapshotsOf lists org's snapshot templates taken of sandbox, newest first.
func (db *DB) SnapshotsOf(ctx context.Context, org, sandboxID string) ([]*Template, error) {
	return QueryAll(ctx, db.r, scanTemplate, `SELECT `+templateColumns+` FROM templates WHERE org_id = ? AND kind = ? AND source_sandbox = ?
		ORDER BY created_at DESC, id DESC`, org, string(template.KindSnapshot), sandboxID)
}

// AllBuildImages lists the image of every build, of every org (the sweep
// of images no build owns).
func (db *DB) AllBuildImages(ctx context.Context) ([]string, error) {
	return QueryStrings(ctx, db.r, `SELECT image FROM template_builds WHERE image <> ''`)
}

// SnapshotUsage is org's snapshots (snapshot templates, as GET /snapshots
// lists them) and the image bytes of all their builds (max_snapshots,
// max_snapshot_bytes; GET /sandboxes/usage).
func SnapshotUsage(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, org string) (count int, bytes int64, err error) {
	err = q.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM templates WHERE org_id = ? AND kind = ?),
		(SELECT COALESCE(SUM(b.size_bytes), 0) FROM template_builds b JOIN templates t ON t.id = b.template_id WHERE t.org_id = ? AND t.kind = ?)`,
		org, string(template.KindSnapshot), org, string(template.KindSnapshot)).Scan(&count, &bytes)
	return count, bytes, err
}

// BuildOwnsImage reports whether a template build (of any org) is buildID
// or names image ref as its image: the reconciler's image sweep keeps the
// images a build owns.
func (db *DB) BuildOwnsImage(ctx context.Context, buildID, ref string) (bool, error) {
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM template_builds WHERE id = ? OR (image <> '' AND image = ?)`, buildID, ref).Scan(&n)
	return n > 0, err
}
