package templates

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Snapshot is one snapshot as E2B's SnapshotInfo shows it: its id
// ("<alias or template id>:<tag>") and names.
type Snapshot struct {
	Template *store.Template
	Build    *store.TemplateBuild
	Tag      string
}

// ID is the snapshot's id: "<alias or template id>:<tag>".
func (s Snapshot) ID() string {
	name := s.Template.ID
	if s.Template.Alias != "" {
		name = s.Template.Alias
	}
	return name + ":" + s.Tag
}

// TakeSnapshot commits org's sandbox sandboxID's filesystem to a new image
// owned by the org: a build of the snapshot template named name
// ("alias[:tag]"; made when the org has none of that name, reused
// otherwise), or of a new unnamed one. The sandbox is paused for the
// commit only and keeps running. A sandbox that ended (or began to) while
// it was being committed leaves no image and answers as not found.
func (s *Service) TakeSnapshot(ctx context.Context, org, sandboxID, name string) (Snapshot, error) {
	if s.cfg.Images == nil {
		return Snapshot{}, &domain.UnavailableError{Detail: "this backend's provider takes no snapshots (snapshots need the Docker or the E2B provider)"}
	}
	var n Name
	if name != "" {
		var err error
		if n, err = ParseName("name", name); err != nil {
			return Snapshot{}, err
		}
		if s.isStatic(ctx, n.Ref) {
			return Snapshot{}, domain.Invalid("name", fmt.Sprintf("%q is the name of one of the provider's templates; choose another", n.Ref))
		}
	}
	rec, err := s.liveSandbox(ctx, org, sandboxID)
	if err != nil {
		return Snapshot{}, err
	}
	if rec.Phase != sandbox.PhaseRunning && rec.Phase != sandbox.PhasePaused {
		return Snapshot{}, domain.ConflictIn(string(rec.PublicState()), fmt.Sprintf("sandbox %s is %s; snapshot it once it runs", sandboxID, rec.PublicState()))
	}
	if _, busy := s.snapshots.LoadOrStore(sandboxID, struct{}{}); busy {
		return Snapshot{}, domain.Conflict(fmt.Sprintf("a snapshot of sandbox %s is being taken; take another once it is done", sandboxID))
	}
	defer s.snapshots.Delete(sandboxID)
	if q, err := s.db.TemplateQuotasOf(ctx, org); err != nil {
		return Snapshot{}, err
	} else if err := s.checkBytes(ctx, org, 0); err != nil && q.MaxTemplateBytes != nil {
		return Snapshot{}, err
	}
	// The snapshot quotas refuse before the commit (nothing is paused or
	// written for a request that cannot be kept), and again, with the
	// image's size, in the transaction that records it.
	if err := s.checkSnapshotQuotas(ctx, s.db.Reader(), org, n.Ref, -1); err != nil {
		return Snapshot{}, err
	}

	// The sandbox's timeout does not run while it is paused for the
	// commit (on an engine without a native diff, a commit walks the whole
	// filesystem and takes a while): its end is held off meanwhile and is
	// then the end it had plus the commit's time.
	if s.cfg.Hold != nil && !rec.EndAt.IsZero() {
		remaining := max(rec.EndAt.Sub(s.now()), time.Second)
		if err := s.cfg.Hold(ctx, rec, commitHold, true); err == nil {
			defer func() {
				if cur, err := s.liveSandbox(context.WithoutCancel(ctx), org, sandboxID); err == nil {
					_ = s.cfg.Hold(context.WithoutCancel(ctx), cur, remaining, false)
				}
			}()
		}
	}
	buildID := uuid.NewString()
	image := "dreadnode-snapshot/" + sandboxID + ":" + buildID
	labels := s.imageLabels(ctx, org, "", buildID)
	started := time.Now()
	during := make(chan struct{})
	if s.duringCommit != nil {
		go func() { defer close(during); s.duringCommit(rec, false) }()
	} else {
		close(during)
	}
	committed, err := s.cfg.Images.Commit(ctx, rec.Ref(), compute.CommitOptions{Name: image, Labels: labels})
	<-during
	if s.duringCommit != nil {
		s.duringCommit(rec, true)
	}
	size := committed.SizeBytes
	s.log.Info("snapshot committed", "sandbox", sandboxID, "build", buildID, "bytes", size, "took", time.Since(started), "err", err)
	if err != nil {
		_ = s.cfg.Images.RemoveImage(context.WithoutCancel(ctx), image)
		if _, gone := s.liveSandbox(ctx, org, sandboxID); gone != nil {
			return Snapshot{}, gone
		}
		return Snapshot{}, &domain.ProviderError{Detail: fmt.Sprintf("snapshot of sandbox %s: %v", sandboxID, err)}
	}
	if committed.Name != "" {
		image = committed.Name // the provider's name of it (E2B: its snapshot template)
	}
	keep := false
	defer func() {
		if !keep {
			_ = s.cfg.Images.RemoveImage(context.WithoutCancel(ctx), image)
		}
	}()
	// A kill that began during the commit wins: no image outlives it.
	if _, err := s.liveSandbox(ctx, org, sandboxID); err != nil {
		return Snapshot{}, err
	}
	if err := s.checkBytes(ctx, org, size); err != nil {
		return Snapshot{}, err
	}
	if err := s.checkSnapshotQuotas(ctx, s.db.Reader(), org, n.Ref, size); err != nil {
		return Snapshot{}, err
	}
	now := s.now()
	t := &store.Template{ID: newTemplateID(), OrgID: org, Alias: n.Ref, Kind: template.KindSnapshot, CPUCount: rec.CPUCount, MemoryMB: rec.MemoryMB,
		Parent: rec.TemplateID, SourceSandbox: sandboxID, CreatedAt: now, UpdatedAt: now}
	b := &store.TemplateBuild{ID: buildID, OrgID: org, Status: template.StatusReady, Spec: "{}", Image: image, SizeBytes: size,
		CPUCount: rec.CPUCount, MemoryMB: rec.MemoryMB, CreatedAt: now, UpdatedAt: now, FinishedAt: now}
	tag := n.TagOrDefault()
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		if err := store.LockOrgQuotasTx(ctx, tx, org); err != nil {
			return err
		}
		if err := s.checkSnapshotQuotas(ctx, tx, org, n.Ref, size); err != nil {
			return err
		}
		got, _, err := store.EnsureTemplateTx(ctx, tx, t)
		if err != nil {
			return err
		}
		if got.Kind != template.KindSnapshot {
			return domain.Conflict(fmt.Sprintf("%q names a template that is not a snapshot; choose another name", n.Ref))
		}
		t, b.TemplateID = got, got.ID
		return store.InsertBuildTx(ctx, tx, b, []string{tag})
	})
	if err != nil {
		return Snapshot{}, quotaError(err)
	}
	keep = true
	return Snapshot{Template: t, Build: b, Tag: tag}, nil
}

// checkSnapshotQuotas refuses a snapshot past org's max_snapshots (when
// it would make a new snapshot: unnamed, or a name the org has no snapshot
// of) or max_snapshot_bytes: the org's snapshots already hold that many
// bytes (size < 0: before the commit), or would with size more.
func (s *Service) checkSnapshotQuotas(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, org, alias string, size int64) error {
	quotas, err := admission.QuotasOf(ctx, q, org)
	if err != nil || (quotas.MaxSnapshots == nil && quotas.MaxSnapshotBytes == nil) {
		return err
	}
	count, used, err := store.SnapshotUsage(ctx, q, org)
	if err != nil {
		return err
	}
	if quotas.MaxSnapshots != nil {
		isNew := alias == ""
		if !isNew {
			var n int
			if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM templates WHERE org_id = ? AND alias = ?`, org, alias).Scan(&n); err != nil {
				return err
			}
			isNew = n == 0
		}
		if isNew && count >= *quotas.MaxSnapshots {
			return domain.Conflict(fmt.Sprintf("max_snapshots: the organization holds %d snapshots and its max_snapshots quota is %d; delete one (DELETE /templates/{templateID}), take it under the name of an existing snapshot, or ask an operator to raise the quota",
				count, *quotas.MaxSnapshots))
		}
	}
	if quotas.MaxSnapshotBytes != nil {
		if size < 0 && used >= *quotas.MaxSnapshotBytes {
			return domain.Conflict(fmt.Sprintf("max_snapshot_bytes: the organization's snapshots hold %d bytes, at or over its max_snapshot_bytes quota of %d; delete a snapshot or ask an operator to raise the quota",
				used, *quotas.MaxSnapshotBytes))
		}
		if size >= 0 && used+size > *quotas.MaxSnapshotBytes {
			return domain.Conflict(fmt.Sprintf("max_snapshot_bytes: this snapshot's image has %d bytes and the organization's snapshots hold %d, past its max_snapshot_bytes quota of %d; the image was removed; delete a snapshot or ask an operator to raise the quota",
				size, used, *quotas.MaxSnapshotBytes))
		}
	}
	return nil
}

// commitHold is how long a sandbox's end is held off while it is committed.
const commitHold = 30 * time.Minute

// liveSandbox reads org's sandbox id while it lives (not stopping or
// ended); otherwise not found, as E2B answers.
func (s *Service) liveSandbox(ctx context.Context, org, id string) (*store.Record, error) {
	rec, err := s.db.GetOrgRecord(ctx, org, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (!sandbox.AddressedAsSandbox(rec.Kind) || !rec.Phase.Live() || rec.Phase == sandbox.PhaseStopping)) {
		return nil, domain.NotFound("sandbox", id)
	}
	return rec, err
}

// SnapshotFilter selects snapshots: of one sandbox, and/or by name
// ("alias", "id", either with ":tag").
type SnapshotFilter struct {
	SandboxID string
	Name      string
}

// Snapshots lists org's snapshots, newest first: each template once, with
// the tag filtered on, else the tag of its newest build.
func (s *Service) Snapshots(ctx context.Context, org string, f SnapshotFilter) ([]Snapshot, error) {
	var ts []*store.Template
	var n Name
	switch {
	case f.Name != "":
		var err error
		if n, err = ParseName("name", f.Name); err != nil {
			return []Snapshot{}, nil //nolint:nilerr // a name that cannot be one matches none, as E2B answers
		}
		t, err := s.db.TemplateByRef(ctx, org, n.Ref)
		if errors.Is(err, store.ErrNotFound) || (err == nil && t.Kind != template.KindSnapshot) {
			return []Snapshot{}, nil
		}
		if err != nil {
			return nil, err
		}
		if f.SandboxID != "" && t.SourceSandbox != f.SandboxID {
			return []Snapshot{}, nil
		}
		ts = []*store.Template{t}
	case f.SandboxID != "":
		var err error
		if ts, err = s.db.SnapshotsOf(ctx, org, f.SandboxID); err != nil {
			return nil, err
		}
	default:
		var err error
		if ts, err = s.db.TemplatePage(ctx, org, template.KindSnapshot, time.Time{}, "", 0); err != nil {
			return nil, err
		}
	}
	out := []Snapshot{}
	for _, t := range ts {
		if strings.Contains(f.Name, ":") { // a tag asked for (":default" included): that tag's build
			b, err := s.db.BuildOfTag(ctx, t.ID, n.TagOrDefault())
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, Snapshot{Template: t, Build: b, Tag: n.TagOrDefault()})
			continue
		}
		snap, ok, err := s.newest(ctx, t)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, snap)
		}
	}
	return out, nil
}

// newest is t's newest build with a tag on it, shown with that tag (the
// default tag when several point at it).
func (s *Service) newest(ctx context.Context, t *store.Template) (Snapshot, bool, error) {
	tags, err := s.db.Tags(ctx, t.ID)
	if err != nil {
		return Snapshot{}, false, err
	}
	builds, err := s.db.Builds(ctx, t.ID)
	if err != nil {
		return Snapshot{}, false, err
	}
	for _, b := range builds {
		tag := ""
		for _, tg := range tags {
			if tg.BuildID == b.ID && (tag == "" || tg.Tag == template.DefaultTag) {
				tag = tg.Tag
			}
		}
		if tag != "" {
			return Snapshot{Template: t, Build: b, Tag: tag}, true, nil
		}
	}
	return Snapshot{}, false, nil
}
