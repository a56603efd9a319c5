// Package lifecycle serves the sandbox lifecycle API (§1) and the operations
// other domains (runtimes) reuse: create, pause, resume, delete.
package lifecycle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Config wires a Service.
type Config struct {
	DB         *store.DB
	Reconciler *reconciler.Reconciler
	Provider   compute.Provider
	Logger     *slog.Logger
	Now        func() time.Time
	// MinTimeout is the lowest accepted timeout in seconds (60; tests lower it).
	MinTimeout int
	// WaitLimit bounds waitReady and synchronous operations.
	WaitLimit time.Duration
	// Admit refuses a create (e.g. without credits); nil admits all.
	Admit func(ctx context.Context, orgID string) error
	// Admission places each create: start now or wait in the queue (§7);
	// nil starts every create at once.
	Admission *admission.Admitter
	// SandboxDomain is the base domain of host-routed sandbox traffic,
	// {port}-{sandboxID}.{SandboxDomain} (DREADNODE_SANDBOX_DOMAIN; a port
	// in it is ignored when matching); "" is "localhost".
	SandboxDomain string
	// OperatorKeys are the API keys the operator configured (the bootstrap
	// and admin keys), whatever their form: the traffic router never
	// forwards them into a sandbox (handlers_credentials.go). Keys the
	// backend mints are recognised by their form alone.
	OperatorKeys []string
	// Committer checkpoints sandboxes for Fork (nil: forks answer 503).
	Committer compute.Committer
	// Resolve finds an org's own template or snapshot (API §14–§15) by
	// id or name, with or without ":tag"; ok false when ref names none of
	// the org's (another org's included), which then answers as an unknown
	// template. nil: the provider's templates only.
	Resolve func(ctx context.Context, org, ref string) (t OrgTemplate, ok bool, err error)
}

// OrgTemplate is an org's own template or snapshot, resolved to a build.
type OrgTemplate struct {
	ID       string // the template's id (the sandbox's templateID)
	Image    string // the build's local image
	CPUCount int
	MemoryMB int
}

// Service implements the lifecycle operations.
type Service struct {
	cfg       Config
	db        *store.DB
	rc        *reconciler.Reconciler
	prov      compute.Provider
	log       *slog.Logger
	templates templateCache
	rendered  renderCache
	seedMu    sync.Mutex
	// afterCheckpoint, in tests, runs between a fork's commit and its
	// check that the parent still lives (SetAfterCheckpoint).
	afterCheckpoint func(parent *store.Record)
	envdSeed        []byte // the key of EnvdToken, read once from the database
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MinTimeout <= 0 {
		cfg.MinTimeout = 60
	}
	if cfg.WaitLimit <= 0 {
		cfg.WaitLimit = 2 * time.Minute
	}
	if cfg.SandboxDomain == "" {
		cfg.SandboxDomain = "localhost"
	}
	return &Service{cfg: cfg, db: cfg.DB, rc: cfg.Reconciler, prov: cfg.Provider, log: cfg.Logger,
		rendered: renderCache{maxSize: 50_000}}
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// MinTimeout is the lowest accepted sandbox timeout in seconds.
func (s *Service) MinTimeout() int { return s.cfg.MinTimeout }

func (s *Service) template(ctx context.Context, id string) (compute.Template, error) {
	templates, err := s.templates.get(ctx, s.prov.Templates)
	if err != nil {
		return compute.Template{}, &domain.UnavailableError{Detail: "the " + s.prov.Name() + " provider did not list its templates: " + err.Error()}
	}
	t, ok := templates[id]
	if !ok {
		names := make([]string, 0, len(templates))
		for n := range templates {
			names = append(names, n)
		}
		sort.Strings(names)
		return t, &unknownTemplateError{InvalidError: domain.InvalidError{In: domain.InBody, Field: "templateID",
			Msg: fmt.Sprintf("unknown template %q; available: %s", id, strings.Join(names, ", "))}}
	}
	return t, nil
}

// resolve finds the template a create names: the provider's own ("base",
// "base:default"), else the org's (its image then set).
func (s *Service) resolve(ctx context.Context, org, ref string) (compute.Template, string, error) {
	name, tag, tagged := strings.Cut(ref, ":")
	if _, alias, ok := strings.Cut(name, "/"); ok {
		name = alias
	}
	t, err := s.template(ctx, name)
	var unknown *unknownTemplateError
	if err == nil {
		if tagged && tag != defaultTag {
			return t, "", &domain.NotFoundError{Kind: "template tag", ID: ref,
				Detail: fmt.Sprintf("template %q has no tag %q (the provider's templates have only %q)", name, tag, defaultTag)}
		}
		return t, "", nil
	}
	if !errors.As(err, &unknown) || s.cfg.Resolve == nil {
		return t, "", err
	}
	own, ok, rerr := s.cfg.Resolve(ctx, org, ref)
	if rerr != nil {
		return t, "", rerr
	}
	if !ok {
		return t, "", err
	}
	return compute.Template{ID: own.ID, CPUCount: own.CPUCount, MemoryMB: own.MemoryMB}, own.Image, nil
}

// defaultTag is the tag a template name without one means (E2B's).
const defaultTag = "default"

// unknownTemplateError is an invalid templateID naming no template; the
// template route answers it as not found.
type unknownTemplateError struct{ domain.InvalidError }

func (e *unknownTemplateError) Unwrap() error { return &e.InvalidError }

// IsUnknownTemplate reports whether err is Create's answer for a templateID
// naming none of the provider's templates nor the org's own (another org's
// included): the E2B edge answers it as E2B answers a template not found.
func IsUnknownTemplate(err error) bool {
	var unknown *unknownTemplateError
	return errors.As(err, &unknown)
}

// Template is the template id, or an error: unavailable when the provider
// does not list its templates, not found for an unknown id.
func (s *Service) Template(ctx context.Context, id string) (compute.Template, error) {
	t, err := s.template(ctx, id)
	var unknown *unknownTemplateError
	if errors.As(err, &unknown) {
		return t, &domain.NotFoundError{Kind: "template", ID: id, Detail: unknown.Msg}
	}
	return t, err
}

// providerFor names the provider that will run template (several providers
// may serve one deployment, routed by template).
func (s *Service) providerFor(template string) string {
	if r, ok := s.prov.(interface{ ProviderFor(string) string }); ok {
		return r.ProviderFor(template)
	}
	return s.prov.Name()
}

// CreateOptions are set by callers other than the public create route.
type CreateOptions struct {
	Kind           string // default runtime
	RuntimeID      string
	IdempotencyKey string
}

// resolveVolumes names the org volume each of spec's OrgVolumes mounts
// (its VolumeID), refusing a name the org has no volume of, or a volume
// held by another provider than the one the sandbox runs on.
func (s *Service) resolveVolumes(ctx context.Context, orgID string, spec *Spec) error {
	if len(spec.OrgVolumes) == 0 {
		return nil
	}
	spec.Volumes = slices.Clone(spec.Volumes)
	prov := s.providerFor(spec.TemplateID)
	for _, i := range spec.OrgVolumes {
		field := fmt.Sprintf("volumeMounts.%d.name", i)
		v, err := s.db.VolumeByName(ctx, orgID, spec.Volumes[i].Name)
		if errors.Is(err, store.ErrNotFound) {
			return domain.Invalid(field, fmt.Sprintf("the organization has no volume named %q; create it first (POST /volumes)", spec.Volumes[i].Name))
		}
		if err != nil {
			return err
		}
		if v.Provider != "" && v.Provider != prov {
			return domain.Invalid(field, fmt.Sprintf("volume %q is held by the %s provider, and template %q runs on %s; use a template of %s",
				v.Name, v.Provider, spec.TemplateID, prov, v.Provider))
		}
		spec.Volumes[i].VolumeID = v.ID
	}
	return nil
}

// Created is the outcome of Create. AccessToken is empty on an idempotent
// replay: a secret is never shown twice.
type Created struct {
	Record      *store.Record
	AccessToken string
	Replayed    bool
}

// Create validates spec, stores a pending record and asks the reconciler to
// start it. It returns at once; use WaitStarted to wait.
func (s *Service) Create(ctx context.Context, orgID string, spec Spec, opts CreateOptions) (Created, error) {
	if err := spec.validate(s.cfg.MinTimeout); err != nil {
		return Created{}, err
	}
	tmpl, image, err := s.resolve(ctx, orgID, spec.TemplateID)
	if err != nil {
		return Created{}, err
	}
	spec.TemplateID = tmpl.ID
	if c, ok := s.prov.(compute.NetworkChecker); ok {
		if field, reason := c.CheckNetwork(spec.TemplateID, spec.Network); field != "" {
			return Created{}, domain.Invalid(field, reason)
		}
	}
	if err := s.resolveVolumes(ctx, orgID, &spec); err != nil {
		return Created{}, err
	}
	if s.cfg.Admit != nil {
		if err := s.cfg.Admit(ctx, orgID); err != nil {
			return Created{}, err
		}
	}
	now := s.now()
	token := ids.Token("sbx_at")
	rec := &store.Record{
		ID: ids.New(), OrgID: orgID, Kind: sandbox.KindRuntime, Provider: s.providerFor(spec.TemplateID), Phase: sandbox.PhasePending,
		TemplateID: spec.TemplateID, Metadata: spec.Metadata, CPUCount: tmpl.CPUCount, MemoryMB: tmpl.MemoryMB,
		AutoPause: spec.AutoPause, AutoResume: spec.AutoResume, TimeoutSec: spec.TimeoutSec,
		AccessTokenHash: ids.HashSecret(token), CreatedAt: now, EndAt: now.Add(time.Duration(spec.TimeoutSec) * time.Second),
		Spec: store.Spec{EnvVars: spec.EnvVars, Command: spec.Command, Network: spec.Network, Volumes: spec.Volumes, E2BSecure: spec.E2BSecure,
			E2BMaskRequestHost: spec.E2BMaskRequestHost, AutoResumeTimeoutSec: spec.AutoResumeTimeoutSec, OutputDir: spec.OutputDir,
			AutoPauseFilesystem: spec.AutoPauseFilesystem, Image: image},
		RuntimeID: opts.RuntimeID,
	}
	if opts.Kind != "" {
		rec.Kind = opts.Kind
	}
	if spec.CPUCount != nil {
		rec.CPUCount = *spec.CPUCount
	}
	if spec.MemoryMB != nil {
		rec.MemoryMB = *spec.MemoryMB
	}
	out := Created{Record: rec, AccessToken: token}
	replayed, err := s.insert(ctx, rec, opts.IdempotencyKey)
	if err != nil {
		return Created{}, err
	}
	if replayed != "" {
		r, err := s.db.GetRecord(ctx, replayed)
		if err != nil {
			return Created{}, err
		}
		return Created{Record: r, Replayed: true}, nil
	}
	return out, nil
}

// insert places rec (admission: pending now, or queued) and stores it, with
// the idempotency key when there is one, then wakes whoever starts it. It
// returns the id of the record an earlier create with the same key made,
// and stores nothing then.
func (s *Service) insert(ctx context.Context, rec *store.Record, idempotencyKey string) (replayed string, err error) {
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		if idempotencyKey != "" {
			id, err := store.LookupIdempotencyTx(ctx, tx, rec.OrgID, "sandbox", idempotencyKey)
			if err != nil || id != "" {
				replayed = id
				return err
			}
			if err := store.SaveIdempotencyTx(ctx, tx, rec.OrgID, "sandbox", idempotencyKey, rec.ID); err != nil {
				return err
			}
		}
		if s.cfg.Admission != nil {
			if err := s.cfg.Admission.Place(ctx, tx, rec); err != nil {
				return err
			}
		}
		return store.InsertRecordTx(ctx, tx, rec)
	})
	if err != nil || replayed != "" {
		return replayed, err
	}
	s.rc.Changed(rec)
	switch {
	case rec.Phase == sandbox.PhasePending: // a queued one is kicked when admitted
		s.rc.Kick(rec.ID)
	case rec.Phase == sandbox.PhaseQueued && s.cfg.Admission != nil:
		// After the commit, so a pass on another connection (PostgreSQL)
		// sees the new queued create instead of waiting for the next tick.
		s.cfg.Admission.Wake()
	}
	return "", nil
}

// WaitStarted waits (bounded by WaitLimit and ctx) until id leaves the
// starting phases, and returns the record as it is then.
func (s *Service) WaitStarted(ctx context.Context, id string) (*store.Record, error) {
	return s.waitFor(ctx, id, func(p sandbox.Phase) bool { return !p.Starting() })
}

// WaitEnded waits (bounded by WaitLimit and ctx) until id is in a terminal
// phase, and returns the record as it is then.
func (s *Service) WaitEnded(ctx context.Context, id string) (*store.Record, error) {
	return s.waitFor(ctx, id, func(p sandbox.Phase) bool { return p.Terminal() })
}

// WaitPaused waits (bounded by WaitLimit and ctx) until id is no longer
// being paused, and returns the record as it is then: paused, or whatever
// the pause in flight ended in.
func (s *Service) WaitPaused(ctx context.Context, id string) (*store.Record, error) {
	return s.waitFor(ctx, id, func(p sandbox.Phase) bool { return p != sandbox.PhasePausing })
}

func (s *Service) waitFor(ctx context.Context, id string, done func(sandbox.Phase) bool) (*store.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WaitLimit)
	defer cancel()
	for {
		changed, release := s.rc.Subscribe(id)
		r, err := s.db.GetRecord(ctx, id)
		if err != nil || done(r.Phase) {
			release()
			return r, err
		}
		select {
		case <-changed:
		case <-time.After(time.Second): // the DB is the truth; re-read even without a wake-up
		case <-ctx.Done():
		}
		release()
		if ctx.Err() != nil {
			return r, nil
		}
	}
}

// errOwned refuses a write on a runtime's sandbox through the lifecycle API.
func errOwned(r *store.Record) error {
	return domain.ConflictIn(string(r.Phase.PublicState()), fmt.Sprintf("sandbox %s belongs to runtime %s; pause, resume, extend or delete it through the runtimes API (/api/v1/org/{org}/ws/{workspace}/runtimes/%s/...)", r.ID, r.RuntimeID, r.RuntimeID))
}

// Pause moves a running sandbox to paused.
func (s *Service) Pause(ctx context.Context, r *store.Record) (*store.Record, error) {
	return s.PauseAs(ctx, r, sandbox.PauseMemory)
}

// PauseAs is Pause of the kind asked: a memory pause freezes the sandbox, a
// filesystem-only one stops it (its memory freed; resume starts its
// processes again from the template's command).
func (s *Service) PauseAs(ctx context.Context, r *store.Record, kind sandbox.PauseKind) (*store.Record, error) {
	now := s.now()
	_, err := s.transition(ctx, r.ID, sandbox.PhasePausing, func(r *store.Record) error {
		r.PhaseDeadline = now.Add(time.Minute)
		r.Spec.PauseKind = kind
		return nil
	})
	if errors.Is(err, store.ErrConflict) {
		cur, _ := s.db.GetRecord(ctx, r.ID)
		return cur, domain.ConflictIn(string(stateOf(cur, r)), fmt.Sprintf("sandbox %s is %s; only a running sandbox can be paused", r.ID, stateOf(cur, r)))
	}
	if err != nil {
		return nil, err
	}
	return s.drive(ctx, r.ID)
}

// Resume moves a paused sandbox back to running; a running one is returned
// as it is. resumed reports whether it was paused. A sandbox still starting
// is waited for, and one still pausing is paused first, then resumed.
func (s *Service) Resume(ctx context.Context, r *store.Record) (cur *store.Record, resumed bool, err error) {
	for range 3 {
		now := s.now()
		_, err = s.transition(ctx, r.ID, sandbox.PhaseResuming, func(r *store.Record) error {
			r.PhaseDeadline = now.Add(time.Minute)
			return nil
		})
		if err == nil {
			cur, err = s.drive(ctx, r.ID)
			return cur, true, err
		}
		if !errors.Is(err, store.ErrConflict) {
			return nil, false, err
		}
		if cur, err = s.db.GetRecord(ctx, r.ID); err != nil {
			return nil, false, err
		}
		switch cur.Phase {
		case sandbox.PhaseRunning:
			return cur, false, nil
		case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating: // sandbox.Starting
			cur, err = s.WaitStarted(ctx, r.ID)
			return cur, false, err
		case sandbox.PhasePausing, sandbox.PhaseResuming:
			if cur, err = s.drive(ctx, r.ID); err != nil {
				return cur, false, err
			}
			if cur.Phase == sandbox.PhaseRunning {
				return cur, true, nil
			}
			continue // paused now: resume it
		case sandbox.PhasePaused, sandbox.PhaseStopping, sandbox.PhaseDeleted, sandbox.PhaseCompleted, sandbox.PhaseFailed:
			// as below the switch; named so that a value added to the enum is decided here
		}
		return cur, false, domain.ConflictIn(string(cur.Phase.PublicState()), fmt.Sprintf("sandbox %s is %s and cannot be resumed; create a new sandbox", r.ID, cur.Phase.PublicState()))
	}
	return cur, false, domain.Conflict(fmt.Sprintf("sandbox %s keeps changing state; retry the request", r.ID))
}

// Delete ends the sandbox whatever its phase; a terminal one stays as it is,
// and a second delete of a stopping one waits for the stop in progress.
func (s *Service) Delete(ctx context.Context, r *store.Record, reason string) (*store.Record, error) {
	now := s.now()
	cur, err := s.transition(ctx, r.ID, sandbox.PhaseStopping, func(r *store.Record) error {
		r.StopAt(now) // billing ends at the request, however long the removal takes
		if r.KillReason == "" {
			r.KillReason = reason
		}
		return nil
	})
	if errors.Is(err, store.ErrConflict) {
		if cur != nil && cur.Phase == sandbox.PhaseStopping {
			return s.drive(ctx, r.ID)
		}
		return s.db.GetRecord(ctx, r.ID) // already terminal: deleting again is a no-op
	}
	if err != nil {
		return nil, err
	}
	return s.drive(ctx, r.ID)
}

// transition commits a change a request asked for (cause user; the table
// decides whether the record's phase allows it) and wakes its waiters, as
// the reconciler does for its own.
func (s *Service) transition(ctx context.Context, id string, to sandbox.Phase, mutate func(r *store.Record) error) (*store.Record, error) {
	r, err := s.db.Transition(ctx, id, to, sandbox.CauseUser, mutate)
	if err == nil {
		s.rc.Changed(r)
	}
	return r, err
}

// drive runs the reconciler on id now, bounded by WaitLimit. A refused
// provider operation comes back as a conflict or provider error the user
// can act on.
func (s *Service) drive(ctx context.Context, id string) (*store.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WaitLimit)
	defer cancel()
	r, err := s.rc.Drive(ctx, id)
	var op *reconciler.OpError
	if errors.As(err, &op) {
		detail := "the " + s.prov.Name() + " provider refused to " + op.Op + " the sandbox: " + op.Err.Error()
		if compute.KindOf(op.Err) == compute.KindConflict {
			return r, domain.Conflict(detail)
		}
		return r, &domain.ProviderError{Detail: detail}
	}
	if err != nil && ctx.Err() != nil {
		// Still in progress: the loop finishes it; answer with what is stored.
		return s.db.GetRecord(context.WithoutCancel(ctx), id)
	}
	return r, err
}

// SetEnd moves the TTL: to now+d when extend is false, else to
// max(current, now+d). Only live sandboxes have a TTL to move.
func (s *Service) SetEnd(ctx context.Context, r *store.Record, d time.Duration, extend bool) (*store.Record, error) {
	return s.setEnd(ctx, r, d, extend, sandbox.Phase.Live)
}

// SetRunningEnd is SetEnd for a sandbox that runs (or starts) only: the
// E2B edge's timeout and refreshes, which E2B answers only for a running
// sandbox (409 while it pauses, is paused or resumes).
func (s *Service) SetRunningEnd(ctx context.Context, r *store.Record, d time.Duration, extend bool) (*store.Record, error) {
	return s.setEnd(ctx, r, d, extend, func(p sandbox.Phase) bool { return p == sandbox.PhaseRunning || p.Starting() })
}

func (s *Service) setEnd(ctx context.Context, r *store.Record, d time.Duration, extend bool, allowed func(sandbox.Phase) bool) (*store.Record, error) {
	now := s.now()
	cur, err := s.transition(ctx, r.ID, "", func(r *store.Record) error {
		if !allowed(r.Phase) {
			return store.ErrConflict
		}
		end := now.Add(d)
		if extend && r.EndAt.After(end) {
			end = r.EndAt
		}
		r.EndAt = end
		r.TimeoutSec = int(d / time.Second)
		return nil
	})
	if errors.Is(err, store.ErrConflict) {
		why := "its timeout can no longer change"
		if cur.Phase.Live() {
			why = "its timeout changes only while it runs; connect resumes it"
		}
		return cur, domain.ConflictIn(string(cur.Phase.PublicState()), fmt.Sprintf("sandbox %s is %s; %s", r.ID, cur.Phase.PublicState(), why))
	}
	if err != nil {
		return nil, err
	}
	if cur.ProviderID != "" {
		if err := s.prov.SetTimeout(ctx, cur.Ref(), cur.EndAt.Sub(now)); err != nil {
			s.log.Warn("moving the provider-side timeout failed; the reconciler still enforces endAt", "record", r.ID, "err", err)
		}
	}
	return cur, nil
}

// RotateToken issues a fresh access token (connect), invalidating the old one.
func (s *Service) RotateToken(ctx context.Context, id string) (string, error) {
	token := ids.Token("sbx_at")
	_, err := s.db.Transition(ctx, id, "", "", func(r *store.Record) error {
		r.AccessTokenHash = ids.HashSecret(token)
		return nil
	})
	return token, err
}

func stateOf(cur, fallback *store.Record) sandbox.State {
	if cur == nil {
		cur = fallback
	}
	return cur.Phase.PublicState()
}

// Logs returns the output of a record: live from the provider, or what was
// kept when its instance was removed.
func (s *Service) Logs(ctx context.Context, rec *store.Record) ([]string, error) {
	var text string
	var err error
	if rec.ProviderID != "" && !rec.Phase.Terminal() {
		text, err = s.prov.Logs(ctx, rec.Ref())
	}
	// A stopping sandbox's instance may be mid-removal (the engine then
	// refuses to read it); the reconciler saved its logs before removing it.
	if rec.Phase.Terminal() || compute.IsNotFound(err) || (err != nil && rec.Phase == sandbox.PhaseStopping) {
		text, err = s.db.SavedLogs(ctx, rec.ID)
		if errors.Is(err, store.ErrNotFound) {
			text, err = "", nil
		}
	}
	if err != nil {
		return nil, providerErr("read the logs of", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// providerErr turns a provider failure into a domain error the user can act on.
func providerErr(what string, err error) error {
	msg := "could not " + what + " the sandbox: " + err.Error()
	switch compute.KindOf(err) {
	case compute.KindNotFound:
		return &domain.NotFoundError{Kind: "sandbox", Detail: msg}
	case compute.KindInvalid:
		return &domain.RejectedError{Detail: msg}
	case compute.KindConflict:
		return domain.Conflict(msg)
	case compute.KindResourceLimit:
		// The sandbox is out of processes, memory or disk: its state, which
		// ending processes or removing files changes (409, not the provider's 502).
		return domain.Conflict(msg)
	case compute.KindTimeout:
		return &domain.TimeoutError{Detail: msg}
	case compute.KindUnavailable:
		// A 503 with Retry-After (domain.DefaultUnavailableRetry): mostly a
		// sandbox's agent that could not be reached under churn, which
		// passes within seconds.
		return &domain.UnavailableError{Detail: msg}
	}
	return &domain.ProviderError{Detail: msg}
}

// Connect resumes rec when paused (resumed reports whether it was), moves
// its end to at least now+timeout (nil: an auto-paused sandbox gets its own
// timeout again) and issues a fresh access token. Both the lifecycle API and
// the E2B edge (package e2bapi) connect through it.
func (s *Service) Connect(ctx context.Context, rec *store.Record, timeout *int) (cur *store.Record, token string, resumed bool, err error) {
	if err := Owned(rec); err != nil {
		return nil, "", false, err
	}
	if rec.Phase.Terminal() || rec.Phase == sandbox.PhaseStopping {
		return nil, "", false, domain.ConflictIn(string(rec.Phase.PublicState()), fmt.Sprintf("sandbox %s is %s and cannot be connected to; create a new sandbox", rec.ID, rec.Phase.PublicState()))
	}
	switch {
	case timeout != nil:
		if _, err := s.SetEnd(ctx, rec, time.Duration(*timeout)*time.Second, true); err != nil {
			return nil, "", false, err
		}
	case rec.EndAt.IsZero(): // auto-paused at expiry: resuming gives it its timeout again
		if _, err := s.SetEnd(ctx, rec, time.Duration(max(rec.TimeoutSec, s.cfg.MinTimeout))*time.Second, true); err != nil {
			return nil, "", false, err
		}
	}
	if cur, resumed, err = s.Resume(ctx, rec); err != nil {
		return nil, "", false, err
	}
	token, err = s.RotateToken(ctx, rec.ID)
	return cur, token, resumed, err
}

// Owned refuses (409) a change to a runtime's sandbox through a sandbox API:
// its runtime owns its lifecycle. nil for any other sandbox.
func Owned(rec *store.Record) error {
	if rec.RuntimeID != "" {
		return errOwned(rec)
	}
	return nil
}

// Metrics reads the current usage of a running or paused sandbox (409 in
// any other state).
func (s *Service) Metrics(ctx context.Context, rec *store.Record) (compute.Metrics, error) {
	if rec.Phase != sandbox.PhaseRunning && rec.Phase != sandbox.PhasePaused {
		return compute.Metrics{}, domain.ConflictIn(string(rec.Phase.PublicState()), fmt.Sprintf("sandbox %s is %s; metrics exist only for running or paused sandboxes", rec.ID, rec.Phase.PublicState()))
	}
	m, err := s.prov.Metrics(ctx, rec.Ref())
	if err != nil {
		return m, providerErr("read the metrics of", err)
	}
	return m, nil
}
