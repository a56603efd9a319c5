package templates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Builder runs template builds (the build engine; the Docker provider).
type Builder = compute.TemplateBuilder

// BuildSpec is how a build makes its image: a base (a local image, or one
// of the org's templates) and E2B's steps.
type BuildSpec struct {
	FromImage    string                 `json:"fromImage,omitempty"`
	FromTemplate string                 `json:"fromTemplate,omitempty"`
	Steps        []compute.TemplateStep `json:"steps,omitempty"`
	StartCmd     *string                `json:"startCmd,omitempty"`
	ReadyCmd     *string                `json:"readyCmd,omitempty"`
	Force        bool                   `json:"force,omitempty"`
}

// StartBuild starts org's waiting build buildID of template ref with spec.
// It returns once the build is accepted; GET …/status follows it.
func (s *Service) StartBuild(ctx context.Context, org, ref, buildID string, spec BuildSpec) error {
	t, _, err := s.Get(ctx, org, ref)
	if err != nil {
		return err
	}
	if !IsBuildID(buildID) {
		return &domain.InvalidError{In: domain.InPath, Field: "buildID", Msg: fmt.Sprintf("%q is not a build id (a UUID)", buildID)}
	}
	b, err := s.db.Build(ctx, org, buildID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && b.TemplateID != t.ID) {
		return domain.NotFound("build", buildID)
	}
	if err != nil {
		return err
	}
	if b.Status != template.StatusWaiting {
		return domain.Conflict(fmt.Sprintf("build %s was already started (it is %s); request a new build (POST /v3/templates)", buildID, b.Status))
	}
	if (spec.FromImage == "") == (spec.FromTemplate == "") {
		return domain.Invalid("fromImage", "give exactly one of fromImage and fromTemplate")
	}
	req := compute.TemplateBuild{TemplateID: t.ID, BuildID: b.ID, OrgID: org, FromImage: spec.FromImage, Steps: spec.Steps,
		StartCmd: spec.StartCmd, ReadyCmd: spec.ReadyCmd, Force: spec.Force, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB,
		Files: s.filesOf(org, t.ID)}
	if spec.FromTemplate != "" {
		parent, err := s.Resolve(ctx, org, spec.FromTemplate)
		if errors.Is(err, ErrNotOrgs) {
			if s.isStatic(ctx, spec.FromTemplate) {
				return domain.Invalid("fromTemplate", fmt.Sprintf("%q is one of the provider's templates; build from its image with fromImage", spec.FromTemplate))
			}
			return domain.Invalid("fromTemplate", fmt.Sprintf("no template %q in this organization", spec.FromTemplate))
		}
		if err != nil {
			return err
		}
		req.FromTemplate = parent.Image
	}
	if s.cfg.Builder == nil {
		return &domain.UnavailableError{Detail: "this backend's provider builds no templates (template builds need the Docker provider)"}
	}
	raw, _ := json.Marshal(spec)
	b.Spec, b.Status, b.UpdatedAt = string(raw), template.StatusBuilding, s.now()
	if ok, err := s.db.UpdateBuild(ctx, b); err != nil || !ok {
		if err == nil {
			err = domain.Conflict(fmt.Sprintf("build %s was started meanwhile", buildID))
		}
		return err
	}
	s.wg.Add(1)
	go s.run(t, b, req)
	return nil
}

// run builds b (off the request), writing its log as it goes and its
// outcome at the end.
func (s *Service) run(t *store.Template, b *store.TemplateBuild, req compute.TemplateBuild) {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.BuildTimeout)
	defer cancel()
	logs := newLogWriter(s.db, b.ID, s.log)
	defer logs.close()
	logs.add(store.BuildLogEntry{At: s.now(), Level: template.LevelInfo, Message: "Waiting for a build slot"})
	select {
	case s.builds <- struct{}{}:
	case <-ctx.Done():
	}
	defer func() { <-s.builds }()
	req.Log = func(e compute.TemplateLogEntry) {
		logs.add(store.BuildLogEntry{At: e.Time, Level: e.Level, Step: e.Step, Message: e.Message})
	}
	var res compute.TemplateBuildResult
	err := ctx.Err()
	if err == nil {
		res, err = s.cfg.Builder.BuildTemplate(ctx, req)
	}
	now := s.now()
	b.UpdatedAt, b.FinishedAt = now, now
	if err != nil {
		b.Status, b.Reason = template.StatusError, err.Error()
		var be *compute.TemplateBuildError
		if errors.As(err, &be) && be.Step > 0 {
			b.ReasonStep = strconv.Itoa(be.Step)
		}
		logs.add(store.BuildLogEntry{At: now, Level: template.LevelError, Message: "Build failed: " + b.Reason})
	} else {
		b.Status, b.Image, b.SizeBytes = template.StatusReady, res.Image, res.SizeBytes
		b.StartCmd, b.ReadyCmd = res.Start.Cmd, res.Start.ReadyCmd
		if err := s.checkBytes(ctx, t.OrgID, res.SizeBytes); err != nil {
			b.Status, b.Reason, b.Image, b.SizeBytes = template.StatusError, err.Error(), "", 0
			s.removeBuildImage(res.Image)
		}
	}
	logs.close()
	if b.Status == template.StatusReady {
		logs.db.AppendBuildLog(context.Background(), b.ID, []store.BuildLogEntry{{At: now, Level: template.LevelInfo, Message: "Build finished"}}) //nolint:errcheck // the log line is best effort
	}
	if ok, err := s.db.UpdateBuild(context.Background(), b); err != nil || !ok {
		// The template was deleted meanwhile (or the database failed):
		// the image has no owner, remove it.
		if b.Image != "" {
			s.removeBuildImage(b.Image)
		}
		if err != nil {
			s.log.Error("recording a template build's outcome", "build", b.ID, "error", err)
		}
	}
}

func (s *Service) removeBuildImage(img string) {
	if s.cfg.Builder != nil {
		if err := s.cfg.Builder.RemoveTemplateImage(context.Background(), img); err != nil {
			s.log.Warn("removing a template build's image", "image", img, "error", err)
		}
	}
}

// checkBytes refuses a new image of size bytes past org's max_template_bytes.
func (s *Service) checkBytes(ctx context.Context, org string, size int64) error {
	q, err := s.db.TemplateQuotasOf(ctx, org)
	if err != nil || q.MaxTemplateBytes == nil {
		return err
	}
	used, err := store.TemplateBytes(ctx, s.db.Reader(), org)
	if err != nil {
		return err
	}
	if used+size > *q.MaxTemplateBytes {
		return &domain.QuotaExceededError{Detail: fmt.Sprintf("template quota reached: max_template_bytes is %d; the org's templates and snapshots hold %d bytes and this image has %d; delete a template or snapshot, or ask the operator to raise max_template_bytes",
			*q.MaxTemplateBytes, used, size)}
	}
	return nil
}

// Status is a build as GET …/status shows it.
type Status struct {
	Template *store.Template
	Build    *store.TemplateBuild
	Logs     []store.BuildLogEntry
}

// BuildStatus reads org's build buildID of template ref and its log from
// offset (at most limit entries), those of level and above.
func (s *Service) BuildStatus(ctx context.Context, org, ref, buildID string, offset, limit int, level string) (Status, error) {
	if !IsBuildID(buildID) {
		return Status{}, &domain.InvalidError{In: domain.InPath, Field: "buildID", Msg: fmt.Sprintf("%q is not a build id (a UUID)", buildID)}
	}
	t, _, err := s.Get(ctx, org, ref)
	if err != nil {
		return Status{}, err
	}
	b, err := s.db.Build(ctx, org, buildID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && b.TemplateID != t.ID) {
		return Status{}, domain.NotFound("build", buildID)
	}
	if err != nil {
		return Status{}, err
	}
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	logs, err := s.db.BuildLog(ctx, b.ID, offset, limit)
	if err != nil {
		return Status{}, err
	}
	return Status{Template: t, Build: b, Logs: filterLevel(logs, level)}, nil
}

var levelRank = map[string]int{template.LevelDebug: 0, template.LevelInfo: 1, template.LevelWarn: 2, template.LevelError: 3}

// filterLevel keeps the entries of level and above ("" keeps all). The
// offset a client keeps counts every entry, so E2B's clients that add the
// number of entries they got to their offset may see some twice when
// filtering; none is lost.
func filterLevel(logs []store.BuildLogEntry, level string) []store.BuildLogEntry {
	min, ok := levelRank[level]
	if !ok {
		return logs
	}
	out := logs[:0:0]
	for _, l := range logs {
		if levelRank[l.Level] >= min {
			out = append(out, l)
		}
	}
	return out
}
