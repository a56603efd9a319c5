// Package templates owns an org's own templates (API §15) and snapshots
// (§14): their records (the store's templates, builds, tags and build
// logs), the build requests that make them, the snapshots that commit a
// sandbox's filesystem to an image, their quotas, and the resolution of a
// templateID at sandbox create. Builds run on a Builder (the build engine);
// images are made and removed through Images (the Docker provider).
// Handlers of both edges (native, E2B's under /e2b) translate onto it.
package templates

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Images is what the service needs of the engine for images it owns: the
// one commit path of snapshots and forks (implemented by the Docker
// provider; the sandbox is paused for the copy only).
type Images = compute.Committer

// Config wires the service.
type Config struct {
	DB *store.DB
	// Images commits snapshots and removes images; nil refuses snapshots
	// (the provider keeps no local images, e.g. E2B).
	Images Images
	// Hold moves a sandbox's end (lifecycle's SetEnd: to now+d, or at
	// least that when extend): a snapshot holds it off during the commit.
	Hold func(ctx context.Context, r *store.Record, d time.Duration, extend bool) error
	// Builder runs builds; nil leaves every build waiting with a reason.
	Builder Builder
	// Static lists the provider's own templates ("base"): names that are
	// not an org's and resolve to themselves.
	Static func(ctx context.Context) ([]compute.Template, error)
	// SpoolDir holds uploads of COPY steps' files while they arrive,
	// before they are written to the database ("": the system's
	// temporary directory).
	SpoolDir string
	// MaxFileBytes bounds one upload (default MaxFileBytes).
	MaxFileBytes int64
	Logger       *slog.Logger
	Now          func() time.Time
	// MaxConcurrentBuilds bounds builds running at once (default 2).
	MaxConcurrentBuilds int
	// BuildTimeout bounds one build (default 20 minutes).
	BuildTimeout time.Duration
}

// Service implements templates and snapshots.
type Service struct {
	cfg       Config
	db        *store.DB
	log       *slog.Logger
	builds    chan struct{} // semaphore of running builds
	snapshots sync.Map      // sandbox id → struct{}: a snapshot in flight
	// duringCommit, in tests, runs alongside a snapshot's commit (done
	// false) and again once it returned (done true), before the snapshot
	// checks that the sandbox still lives (SetDuringCommit).
	duringCommit func(rec *store.Record, done bool)
	wg           sync.WaitGroup
}

// SetDuringCommit makes every later snapshot run f(rec, false) alongside
// its commit (started as the commit starts and waited for after it) and
// f(rec, true) once the commit returned, both before the snapshot checks
// that the sandbox still lives: tests kill the sandbox there. Set it
// before any snapshot starts.
func (s *Service) SetDuringCommit(f func(rec *store.Record, done bool)) { s.duringCommit = f }

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConcurrentBuilds <= 0 {
		cfg.MaxConcurrentBuilds = 2
	}
	if cfg.BuildTimeout <= 0 {
		cfg.BuildTimeout = 20 * time.Minute
	}
	sweepSpool(cfg.SpoolDir, cfg.Now())
	return &Service{cfg: cfg, db: cfg.DB, log: cfg.Logger, builds: make(chan struct{}, cfg.MaxConcurrentBuilds)}
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// Wait waits for the builds in flight (tests, shutdown).
func (s *Service) Wait() { s.wg.Wait() }

// Defaults and bounds of a template's resources (E2B's).
const (
	DefaultCPU      = 2
	DefaultMemoryMB = 512
	MinMemoryMB     = 128
	MaxCPU          = 32
	MaxMemoryMB     = 32768
)

// Request asks for a template build: the template named (made when the org
// has none of that name) and a build waiting for its start.
type Request struct {
	Name     string // "alias[:tag]"; "" makes a template without a name
	Tags     []string
	CPUCount *int // nil: DefaultCPU
	MemoryMB *int // nil: DefaultMemoryMB
}

// Requested is a template and its new build.
type Requested struct {
	Template *store.Template
	Build    *store.TemplateBuild
	Tags     []string
}

// Names is what a template is called: its alias, when it has one.
func Names(t *store.Template) []string {
	if t.Alias == "" {
		return []string{}
	}
	return []string{t.Alias}
}

// CheckResources applies E2B's rules to a build's resources (nil: the
// default) and returns them, or the first refusal as E2B words it.
func CheckResources(cpuP, memP *int) (int, int, string) {
	cpu, mem := DefaultCPU, DefaultMemoryMB
	if cpuP != nil {
		cpu = *cpuP
	}
	if memP != nil {
		mem = *memP
	}
	switch {
	case cpu < 1:
		return 0, 0, "validation error: cpuCount must be at least 1"
	case mem < MinMemoryMB:
		return 0, 0, fmt.Sprintf("validation error: memoryMB must be at least %d", MinMemoryMB)
	case cpu > MaxCPU:
		return 0, 0, fmt.Sprintf("CPU count must be at most %d", MaxCPU)
	case cpu != 1 && cpu%2 != 0:
		return 0, 0, "CPU count must be 1 or an even number"
	case mem > MaxMemoryMB:
		return 0, 0, fmt.Sprintf("Memory can't be higher than %d MB", MaxMemoryMB)
	case mem%2 != 0:
		return 0, 0, "Memory must be divisible by 2"
	}
	return cpu, mem, ""
}

// Request makes (or reuses, by name) org's template and a waiting build.
func (s *Service) Request(ctx context.Context, org string, req Request) (Requested, error) {
	cpu, mem, msg := CheckResources(req.CPUCount, req.MemoryMB)
	if msg != "" {
		return Requested{}, &domain.RejectedError{Detail: msg}
	}
	var name Name
	if req.Name != "" {
		var err error
		if name, err = ParseName("name", req.Name); err != nil {
			return Requested{}, err
		}
		if s.isStatic(ctx, name.Ref) {
			return Requested{}, domain.Invalid("name", fmt.Sprintf("%q is the name of one of the provider's templates; choose another", name.Ref))
		}
	}
	tags, err := CleanTags("tags", req.Tags)
	if err != nil {
		return Requested{}, err
	}
	if name.Tag != "" {
		tags = append(tags, name.Tag)
	}
	if len(tags) == 0 {
		tags = []string{template.DefaultTag}
	}
	now := s.now()
	t := &store.Template{ID: newTemplateID(), OrgID: org, Alias: name.Ref, Kind: template.KindBuild, CPUCount: cpu, MemoryMB: mem,
		CreatedAt: now, UpdatedAt: now}
	b := &store.TemplateBuild{ID: uuid.NewString(), OrgID: org, Status: template.StatusWaiting, Spec: "{}", CPUCount: cpu, MemoryMB: mem,
		CreatedAt: now, UpdatedAt: now}
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		got, _, err := store.EnsureTemplateTx(ctx, tx, t)
		if err != nil {
			return err
		}
		if got.Kind != template.KindBuild {
			return domain.Conflict(fmt.Sprintf("%q names a snapshot; choose another name for a template", name.Ref))
		}
		t, b.TemplateID = got, got.ID
		return store.InsertBuildTx(ctx, tx, b, tags)
	})
	if err != nil {
		return Requested{}, quotaError(err)
	}
	return Requested{Template: t, Build: b, Tags: tags}, nil
}

func quotaError(err error) error {
	if errors.Is(err, store.ErrTemplateLimit) {
		return &domain.QuotaExceededError{Detail: err.Error() + "; delete a template or snapshot, or ask the operator to raise max_templates"}
	}
	return err
}

// newTemplateID is a template id: 20 lowercase letters and digits, as E2B's.
func newTemplateID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [20]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

func (s *Service) isStatic(ctx context.Context, ref string) bool {
	if s.cfg.Static == nil {
		return false
	}
	ts, err := s.cfg.Static(ctx)
	if err != nil {
		return false
	}
	for _, t := range ts {
		if t.ID == ref {
			return true
		}
	}
	return false
}

// Get reads org's template named ref ("id", "alias", with or without ":tag").
func (s *Service) Get(ctx context.Context, org, ref string) (*store.Template, Name, error) {
	n, err := ParseName("templateID", ref)
	if err != nil {
		return nil, Name{}, err
	}
	t, err := s.db.TemplateByRef(ctx, org, n.Ref)
	if errors.Is(err, store.ErrNotFound) {
		return nil, n, domain.NotFound("template", ref)
	}
	return t, n, err
}

// Page is a page of templates and the cursor of the next ("" at the end).
type Page struct {
	Templates []*store.Template
	Next      string
}

// List lists org's templates of kind ("" every kind), newest first, from
// cursor (a previous page's Next), at most limit (0: all).
func (s *Service) List(ctx context.Context, org string, kind template.Kind, cursor string, limit int) (Page, error) {
	var at time.Time
	var id string
	if cursor != "" {
		var ns int64
		if _, err := fmt.Sscanf(cursor, "%d_%s", &ns, &id); err != nil || id == "" {
			return Page{}, &domain.InvalidError{In: domain.InQuery, Field: "nextToken", Msg: "not a token this API answered; start again without it"}
		}
		at = time.Unix(0, ns).UTC()
	}
	q := limit
	if q > 0 {
		q++
	}
	ts, err := s.db.TemplatePage(ctx, org, kind, at, id, q)
	if err != nil {
		return Page{}, err
	}
	out := Page{Templates: ts}
	if limit > 0 && len(ts) > limit {
		out.Templates = ts[:limit]
		last := ts[limit-1]
		out.Next = fmt.Sprintf("%d_%s", last.CreatedAt.UnixNano(), last.ID)
	}
	return out, nil
}

// Delete removes org's template named ref (a tag in ref is ignored: the
// whole template goes) and its images.
func (s *Service) Delete(ctx context.Context, org, ref string) error {
	t, _, err := s.Get(ctx, org, ref)
	if err != nil {
		return err
	}
	images, err := s.db.DeleteTemplate(ctx, org, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return domain.NotFound("template", ref)
	}
	if err != nil {
		return err
	}
	s.removeImages(ctx, images)
	return nil
}

func (s *Service) removeImages(ctx context.Context, images []string) {
	if s.cfg.Images == nil {
		return
	}
	for _, img := range images {
		err := s.cfg.Images.RemoveImage(context.WithoutCancel(ctx), img)
		switch {
		case err == nil:
		case compute.KindOf(err) == compute.KindConflict:
			// A sandbox started from it still has its container (the engine
			// refuses to pull an image from under it). No retry here: the
			// reconciler's orphan image sweep removes it once no container
			// uses it, as no build record names it any more.
			s.log.Info("a deleted template's image is in use by a sandbox; the orphan image sweep removes it once that sandbox is gone", "image", img)
		default:
			s.log.Warn("removing a template's image failed; the orphan image sweep retries", "image", img, "error", err)
		}
	}
}

// Builds lists a template's builds, newest first.
func (s *Service) Builds(ctx context.Context, t *store.Template) ([]*store.TemplateBuild, error) {
	return s.db.Builds(ctx, t.ID)
}

// Tags lists the tags of org's template named ref.
func (s *Service) Tags(ctx context.Context, org, ref string) ([]store.TemplateTag, error) {
	t, _, err := s.Get(ctx, org, ref)
	if err != nil {
		return nil, err
	}
	return s.db.Tags(ctx, t.ID)
}

// AssignTags points tags at the build target ("name:tag") points at, and
// returns that build's id and the tags.
func (s *Service) AssignTags(ctx context.Context, org, target string, tags []string) (string, []string, error) {
	if len(tags) == 0 {
		return "", nil, domain.Invalid("tags", "name at least one tag")
	}
	clean, err := CleanTags("tags", tags)
	if err != nil {
		return "", nil, err
	}
	t, n, err := s.Get(ctx, org, target)
	if err != nil {
		return "", nil, err
	}
	b, err := s.db.BuildOfTag(ctx, t.ID, n.TagOrDefault())
	if errors.Is(err, store.ErrNotFound) {
		return "", nil, domain.NotFound("tag", target)
	}
	if err != nil {
		return "", nil, err
	}
	if err := s.db.SetTags(ctx, t.ID, b.ID, clean, s.now()); err != nil {
		return "", nil, err
	}
	return b.ID, clean, nil
}

// DeleteTags removes tags of org's template name; its default tag stays.
func (s *Service) DeleteTags(ctx context.Context, org, name string, tags []string) error {
	if len(tags) == 0 {
		return domain.Invalid("tags", "name at least one tag")
	}
	clean, err := CleanTags("tags", tags)
	if err != nil {
		return err
	}
	for _, t := range clean {
		if t == template.DefaultTag {
			return domain.Invalid("tags", "the default tag cannot be deleted: it names the template's current build")
		}
	}
	t, _, err := s.Get(ctx, org, name)
	if err != nil {
		return err
	}
	return s.db.DeleteTags(ctx, t.ID, clean)
}

// Resolved is what a sandbox create needs of an org's template.
type Resolved struct {
	TemplateID string
	BuildID    string
	Image      string
	CPUCount   int
	MemoryMB   int
	StartCmd   string
	ReadyCmd   string
}

// ErrNotOrgs is Resolve's answer for a name that is none of the org's
// templates: the caller looks among the provider's own.
var ErrNotOrgs = errors.New("not one of the org's templates")

// Resolve resolves ref ("id", "alias", either with ":tag") to the ready
// build of org's template it names. A name of no template of the org
// (another org's included) is ErrNotOrgs; a tag it does not have, not
// found; a build not ready, a conflict.
func (s *Service) Resolve(ctx context.Context, org, ref string) (Resolved, error) {
	n, err := ParseName("templateID", ref)
	if err != nil {
		return Resolved{}, ErrNotOrgs
	}
	t, err := s.db.TemplateByRef(ctx, org, n.Ref)
	if errors.Is(err, store.ErrNotFound) {
		return Resolved{}, ErrNotOrgs
	}
	if err != nil {
		return Resolved{}, err
	}
	b, err := s.db.BuildOfTag(ctx, t.ID, n.TagOrDefault())
	if errors.Is(err, store.ErrNotFound) {
		return Resolved{}, &domain.NotFoundError{Kind: "template tag", ID: ref,
			Detail: fmt.Sprintf("template %q has no tag %q", n.Ref, n.TagOrDefault())}
	}
	if err != nil {
		return Resolved{}, err
	}
	if b.Status != template.StatusReady || b.Image == "" {
		return Resolved{}, domain.Conflict(fmt.Sprintf("template %q: build %s is %s, not ready; wait for it (GET /templates/%s/builds/%s/status)",
			ref, b.ID, b.Status, t.ID, b.ID))
	}
	return Resolved{TemplateID: t.ID, BuildID: b.ID, Image: b.Image, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB,
		StartCmd: b.StartCmd, ReadyCmd: b.ReadyCmd}, nil
}

// imageLabels label an image the service made.
func (s *Service) imageLabels(ctx context.Context, org, templateID, buildID string) map[string]string {
	labels := map[string]string{compute.LabelManaged: "true", compute.LabelOrg: org, LabelTemplate: templateID, LabelBuild: buildID}
	if dep, err := s.db.DeploymentID(ctx); err == nil {
		labels[compute.LabelDeployment] = dep
	}
	return labels
}

// Labels of the images the service makes.
const (
	LabelTemplate = "dev.dreadnode.template"
	LabelBuild    = "dev.dreadnode.build"
)
