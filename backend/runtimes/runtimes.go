// Package runtimes serves interactive runtimes (API §4): stable, named
// identities of compute whose current sandbox is a record linked by id. A
// runtime's state is derived from that record, never stored.
//
// The sandboxes themselves are created, paused, resumed and deleted by the
// lifecycle service, called through the Sandboxes interface with Go values;
// credits are checked and settled by the billing service (Billing).
package runtimes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/keyed"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Runtime defaults and bounds.
const (
	DefaultRuntimeTimeout = 600 // seconds a started sandbox lives without keepalive
	DefaultKeepalive      = 300
	MinKeepalive          = 60
	MaxKeepalive          = 3600
	maxMetadata           = 64
)

var (
	slugRe     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$`)
	templateRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.\-]{0,63}$`)
	envNameRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	metaKeyRe  = regexp.MustCompile(`^[A-Za-z0-9_.\-/]{1,64}$`)
)

// Sandboxes is what runtimes need of the lifecycle service: its operations
// on sandbox records, in Go values.
type Sandboxes interface {
	Create(ctx context.Context, orgID string, spec lifecycle.Spec, opts lifecycle.CreateOptions) (lifecycle.Created, error)
	WaitStarted(ctx context.Context, id string) (*store.Record, error)
	Pause(ctx context.Context, r *store.Record) (*store.Record, error)
	Resume(ctx context.Context, r *store.Record) (*store.Record, bool, error)
	Delete(ctx context.Context, r *store.Record, reason string) (*store.Record, error)
	SetEnd(ctx context.Context, r *store.Record, d time.Duration, extend bool) (*store.Record, error)
	MinTimeout() int
}

// Billing is what runtimes need of the billing service.
type Billing interface {
	// Admit refuses new compute for an org without credits.
	Admit(ctx context.Context, orgID string) error
	// Settle bills what a record accrued (after a pause or a kill).
	Settle(ctx context.Context, id string) error
	// ViewAt is the ledger view of a record (a runtime's instance).
	ViewAt(r *store.Record, now time.Time) *billing.Record
}

// Config wires a Service.
type Config struct {
	DB        *store.DB
	Sandboxes Sandboxes
	Billing   Billing
	// Provider lists the templates a runtime may use (optional).
	Provider compute.Provider
	Logger   *slog.Logger
	Now      func() time.Time
}

// Service is the runtimes service. Its table (ledger_runtimes) is created by
// the billing service's migrations, which predate the split.
type Service struct {
	cfg     Config
	db      *store.DB
	lc      Sandboxes
	bill    Billing
	log     *slog.Logger
	rtLocks keyed.Mutex
}

// New returns the Service.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil || cfg.Sandboxes == nil || cfg.Billing == nil {
		return nil, errors.New("runtimes: Config.DB, Sandboxes and Billing are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, db: cfg.DB, lc: cfg.Sandboxes, bill: cfg.Billing, log: cfg.Logger}, nil
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// Resources are a runtime's sandbox resources (null: template default).
type Resources = apitypes.RuntimeResources

// View is the JSON of a runtime: the document's Runtime. Its State is
// derived from the linked record (idle, running or paused); SandboxID is the
// live linked record and Instance its ledger view; SandboxToken (the
// sandbox's access token) only the start response carries.
type View = apitypes.Runtime

// Keepalive is the outcome of a keepalive: the sandbox lives until
// ExpiresAt (the document's RuntimeKeepalive).
type Keepalive = apitypes.RuntimeKeepalive

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// live reports whether rec is compute the runtime still controls.
func live(rec *store.Record) bool {
	return rec != nil && rec.Phase.Live()
}

// runtimeState derives a runtime's state from its linked record.
func runtimeState(rec *store.Record) apitypes.RuntimeState {
	if !live(rec) {
		return apitypes.RuntimeStateIdle
	}
	if st := rec.Phase.LedgerState(); st == sandbox.LedgerPaused {
		return apitypes.RuntimeStatePaused
	}
	return apitypes.RuntimeStateRunning // starting, running (pausing still runs)
}

func (s *Service) runtimeView(rt *Runtime, rec *store.Record, now time.Time) *View {
	v := &View{ID: rt.ID, Name: rt.Name, Organization: rt.OrgID, Workspace: rt.Workspace, Template: rt.TemplateID,
		TimeoutSec: rt.TimeoutSec, Metadata: rt.Metadata, EnvVarNames: make([]string, 0, len(rt.EnvVars)),
		State: runtimeState(rec), LastSandboxID: strPtr(rt.LastRecordID), CreatedAt: rt.CreatedAt, UpdatedAt: rt.UpdatedAt}
	if rt.CPUCount > 0 {
		v.Resources.CPUCount = &rt.CPUCount
	}
	if rt.MemoryMB > 0 {
		v.Resources.MemoryMB = &rt.MemoryMB
	}
	for k := range rt.EnvVars {
		v.EnvVarNames = append(v.EnvVarNames, k)
	}
	sort.Strings(v.EnvVarNames)
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	switch {
	case live(rec):
		v.SandboxID = &rec.ID
		v.Instance = s.bill.ViewAt(rec, now)
	case rt.CurrentRecordID != "":
		// The linked record ended on its own (timeout, credits, failure).
		v.LastSandboxID = &rt.CurrentRecordID
	}
	return v
}

// currentRecord reads the runtime's linked record (nil when unlinked).
func (s *Service) currentRecord(ctx context.Context, rt *Runtime) (*store.Record, error) {
	if rt.CurrentRecordID == "" {
		return nil, nil
	}
	// The instance view shows billed credits: as they are now, not as cached.
	rec, err := s.db.GetOrgRecordBilled(ctx, rt.OrgID, rt.CurrentRecordID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return rec, err
}

// View is the runtime's view, with its linked record as it is now.
func (s *Service) View(ctx context.Context, rt *Runtime) (*View, error) {
	rec, err := s.currentRecord(ctx, rt)
	if err != nil {
		return nil, err
	}
	return s.runtimeView(rt, rec, s.now()), nil
}

// ValidWorkspace reports whether ws is a workspace name.
func ValidWorkspace(ws string) bool { return slugRe.MatchString(ws) }

// Load reads runtime id of org in workspace; another org's or another
// workspace's is not found.
func (s *Service) Load(ctx context.Context, org, workspace, id string) (*Runtime, error) {
	rt, err := s.getRuntime(ctx, org, workspace, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.NotFound("runtime", id)
	}
	return rt, err
}

// NewRuntime is what a runtime is created with (the document's
// CreateRuntime): Name is unique within the workspace, Template defaults
// to "base".
type NewRuntime = apitypes.CreateRuntime

func (s *Service) validateRuntime(ctx context.Context, req *NewRuntime) error {
	if req.Name == "" {
		return domain.Invalid("name", "is required: 1-64 characters of letters, digits, '_', '.', '-'")
	}
	if !slugRe.MatchString(req.Name) {
		return domain.Invalid("name", "must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit")
	}
	if req.Template == "" {
		req.Template = "base"
	}
	if !templateRe.MatchString(req.Template) {
		return domain.Invalid("template", "must be a template id such as \"base\" (lowercase letters, digits, '.', '_', '-')")
	}
	if s.cfg.Provider != nil {
		ts, err := s.cfg.Provider.Templates(ctx)
		if err != nil {
			return &domain.UnavailableError{Detail: "the " + s.cfg.Provider.Name() + " provider did not list its templates: " + err.Error()}
		}
		names := make([]string, 0, len(ts))
		for _, t := range ts {
			names = append(names, t.ID)
		}
		if !slices.Contains(names, req.Template) {
			sort.Strings(names)
			return domain.Invalid("template", fmt.Sprintf("unknown template %q; available: %s", req.Template, strings.Join(names, ", ")))
		}
	}
	if r := req.Resources; r != nil {
		if r.CPUCount != nil && (*r.CPUCount < 1 || *r.CPUCount > lifecycle.MaxCPU) {
			return domain.Invalid("resources.cpu_count", fmt.Sprintf("must be between 1 and %d", lifecycle.MaxCPU))
		}
		if r.MemoryMB != nil && (*r.MemoryMB < lifecycle.MinMemoryMB || *r.MemoryMB > lifecycle.MaxMemoryMB) {
			return domain.Invalid("resources.memory_mb", fmt.Sprintf("must be between %d and %d", lifecycle.MinMemoryMB, lifecycle.MaxMemoryMB))
		}
	}
	for k := range req.EnvVars {
		if !envNameRe.MatchString(k) {
			return domain.Invalid("env_vars."+k, "is not a valid environment variable name")
		}
	}
	if len(req.Metadata) > maxMetadata {
		return domain.Invalid("metadata", fmt.Sprintf("at most %d entries", maxMetadata))
	}
	for k, v := range req.Metadata {
		if !metaKeyRe.MatchString(k) {
			return domain.Invalid("metadata."+k, "keys are 1-64 characters of letters, digits, '_', '.', '-', '/'")
		}
		if len(v) > 512 {
			return domain.Invalid("metadata."+k, "values are at most 512 characters")
		}
	}
	if req.TimeoutSec == nil {
		t := DefaultRuntimeTimeout
		req.TimeoutSec = &t
	}
	return s.CheckTimeout("timeout_sec", *req.TimeoutSec)
}

// CheckTimeout refuses a sandbox timeout (field, in seconds) out of bounds.
func (s *Service) CheckTimeout(field string, v int) error {
	lo := s.lc.MinTimeout()
	if v < lo || v > lifecycle.MaxTimeout {
		return domain.Invalid(field, fmt.Sprintf("must be between %d and %d seconds", lo, lifecycle.MaxTimeout))
	}
	return nil
}

// Create validates and stores a runtime of org in workspace. With an
// idempotency key, a repeated create returns the first runtime (replayed).
func (s *Service) Create(ctx context.Context, org, workspace string, req NewRuntime, idemKey string) (v *View, replayed bool, err error) {
	if err := s.validateRuntime(ctx, &req); err != nil {
		return nil, false, err
	}
	now := s.now()
	rt := &Runtime{ID: ids.New(), OrgID: org, Workspace: workspace, Name: req.Name, TemplateID: req.Template, TimeoutSec: *req.TimeoutSec,
		EnvVars: req.EnvVars, Metadata: req.Metadata, CreatedAt: now, UpdatedAt: now}
	if req.Resources != nil {
		if req.Resources.CPUCount != nil {
			rt.CPUCount = *req.Resources.CPUCount
		}
		if req.Resources.MemoryMB != nil {
			rt.MemoryMB = *req.Resources.MemoryMB
		}
	}
	rt, replayed, err = s.insertRuntime(ctx, rt, idemKey)
	if err != nil {
		return nil, false, err
	}
	if replayed && rt.Workspace != workspace {
		return nil, false, domain.Conflict("the Idempotency-Key was used for a runtime in workspace \"" + rt.Workspace + "\"; use a new key")
	}
	v, err = s.View(ctx, rt)
	return v, replayed, err
}

// List returns up to limit runtimes of org's workspace after seq in
// creation order (newest first when desc), and whether more follow.
func (s *Service) List(ctx context.Context, org, workspace string, after int64, limit int, desc bool) (views []*View, lastSeq int64, more bool, err error) {
	rts, err := s.listRuntimesIn(ctx, org, workspace, after, limit+1, desc)
	if err != nil {
		return nil, 0, false, err
	}
	if len(rts) > limit {
		rts, more = rts[:limit], true
	}
	idList := make([]string, 0, len(rts))
	for _, rt := range rts {
		if rt.CurrentRecordID != "" {
			idList = append(idList, rt.CurrentRecordID)
		}
	}
	recs, err := s.db.GetRecords(ctx, idList)
	if err != nil {
		return nil, 0, false, err
	}
	now := s.now()
	views = make([]*View, 0, len(rts))
	for _, rt := range rts {
		views = append(views, s.runtimeView(rt, recs[rt.CurrentRecordID], now))
		lastSeq = rt.Seq
	}
	return views, lastSeq, more, nil
}

// Start provisions a sandbox for an idle runtime through the lifecycle
// service, links it and waits until it runs. timeout (seconds) nil is the
// runtime's own. The view carries the sandbox's access token (shown once).
func (s *Service) Start(ctx context.Context, rt *Runtime, timeout *int) (*View, error) {
	t := rt.TimeoutSec
	if timeout != nil {
		if err := s.CheckTimeout("timeout_sec", *timeout); err != nil {
			return nil, err
		}
		t = *timeout
	}
	rt, unlock, err := s.lockRuntime(ctx, rt)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cur, err := s.currentRecord(ctx, rt)
	if err != nil {
		return nil, err
	}
	if live(cur) {
		return nil, domain.ConflictIn(string(runtimeState(cur)), fmt.Sprintf("runtime %s is already %s with sandbox %s; pause, resume or reset it instead of starting it again",
			rt.ID, runtimeState(cur), cur.ID))
	}
	if err := s.bill.Admit(ctx, rt.OrgID); err != nil {
		return nil, err
	}
	spec := lifecycle.Spec{TemplateID: rt.TemplateID, TimeoutSec: t, EnvVars: rt.EnvVars, Metadata: rt.Metadata}
	if rt.CPUCount > 0 {
		spec.CPUCount = &rt.CPUCount
	}
	if rt.MemoryMB > 0 {
		spec.MemoryMB = &rt.MemoryMB
	}
	created, err := s.lc.Create(ctx, rt.OrgID, spec, lifecycle.CreateOptions{Kind: sandbox.KindRuntime, RuntimeID: rt.ID})
	if err != nil {
		return nil, err
	}
	ok, err := s.relink(ctx, rt.ID, rt.CurrentRecordID, created.Record.ID)
	if err == nil && !ok {
		err = domain.Conflict(fmt.Sprintf("runtime %s was started or reset concurrently; read it again", rt.ID))
	}
	if err != nil {
		// Do not leave an unlinked sandbox running.
		if _, derr := s.lc.Delete(context.WithoutCancel(ctx), created.Record, sandbox.KillDeleted); derr != nil {
			s.log.Warn("removing the sandbox of a failed runtime start", "record", created.Record.ID, "err", derr)
		}
		return nil, err
	}
	rec, err := s.lc.WaitStarted(ctx, created.Record.ID)
	if err != nil {
		return nil, err
	}
	if rt.CurrentRecordID != "" {
		rt.LastRecordID = rt.CurrentRecordID
	}
	rt.CurrentRecordID = created.Record.ID
	if !live(rec) {
		detail := rec.Diagnostic
		if detail == "" {
			detail = "it ended (" + string(rec.Phase.LedgerState()) + ", " + rec.KillReason + ")"
		}
		return nil, &domain.StartFailedError{Detail: fmt.Sprintf("the sandbox %s of runtime %s did not start: %s; the runtime stays idle", rec.ID, rt.ID, detail)}
	}
	rt.UpdatedAt = s.now()
	v := s.runtimeView(rt, rec, s.now())
	v.SandboxToken = created.AccessToken
	return v, nil
}

// lockRuntime takes the runtime's in-process lock and re-reads it.
func (s *Service) lockRuntime(ctx context.Context, rt *Runtime) (*Runtime, func(), error) {
	unlock := s.rtLocks.Lock(rt.ID)
	cur, err := s.getRuntime(ctx, rt.OrgID, "", rt.ID)
	if err != nil {
		unlock()
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, domain.NotFound("runtime", rt.ID)
		}
		return nil, nil, err
	}
	return cur, unlock, nil
}

// liveRecord reads the runtime's live record or answers a conflict (no sandbox).
func (s *Service) liveRecord(ctx context.Context, rt *Runtime, op string) (*store.Record, error) {
	rec, err := s.currentRecord(ctx, rt)
	if err != nil {
		return nil, err
	}
	if !live(rec) {
		return nil, domain.ConflictIn("idle", fmt.Sprintf("runtime %s is idle (no sandbox); POST .../runtimes/%s/start before %s", rt.ID, rt.ID, op))
	}
	return rec, nil
}

// withLiveRecord runs op on the runtime's live sandbox record, holding the
// runtime's lock (a conflict when the runtime is idle), then reads the
// runtime again.
func (s *Service) withLiveRecord(ctx context.Context, rt *Runtime, doing string, op func(rec *store.Record) error) (*View, error) {
	rt, unlock, err := s.lockRuntime(ctx, rt)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := s.liveRecord(ctx, rt, doing)
	if err != nil {
		return nil, err
	}
	if err := op(rec); err != nil {
		return nil, err
	}
	return s.reread(ctx, rt.OrgID, rt.ID)
}

// Pause pauses the runtime's sandbox and settles what it accrued.
func (s *Service) Pause(ctx context.Context, rt *Runtime) (*View, error) {
	return s.withLiveRecord(ctx, rt, "pausing it", func(rec *store.Record) error {
		if _, err := s.lc.Pause(ctx, rec); err != nil {
			return err
		}
		if err := s.bill.Settle(ctx, rec.ID); err != nil {
			s.log.Warn("settling a paused sandbox failed; the settle loop retries", "record", rec.ID, "err", err)
		}
		return nil
	})
}

// Resume resumes the runtime's sandbox (credits permitting).
func (s *Service) Resume(ctx context.Context, rt *Runtime) (*View, error) {
	return s.withLiveRecord(ctx, rt, "resuming it", func(rec *store.Record) error {
		if err := s.bill.Admit(ctx, rt.OrgID); err != nil {
			return err
		}
		_, _, err := s.lc.Resume(ctx, rec)
		return err
	})
}

// Keepalive makes the runtime's sandbox live at least extendSeconds (nil:
// DefaultKeepalive) from now.
func (s *Service) Keepalive(ctx context.Context, rt *Runtime, extendSeconds *int) (*Keepalive, error) {
	d := DefaultKeepalive
	if extendSeconds != nil {
		d = *extendSeconds
	}
	if d < MinKeepalive || d > MaxKeepalive {
		return nil, domain.Invalid("extend_seconds", fmt.Sprintf("must be between %d and %d seconds", MinKeepalive, MaxKeepalive))
	}
	rt, unlock, err := s.lockRuntime(ctx, rt)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := s.liveRecord(ctx, rt, "keeping it alive")
	if err != nil {
		return nil, err
	}
	cur, err := s.lc.SetEnd(ctx, rec, time.Duration(d)*time.Second, true)
	if err != nil {
		return nil, err
	}
	return &Keepalive{ID: rt.ID, SandboxID: cur.ID, ExpiresAt: timePtr(cur.EndAt)}, nil
}

// Reset kills the runtime's sandbox (the record is kept) and leaves the
// runtime idle.
func (s *Service) Reset(ctx context.Context, rt *Runtime) (*View, error) {
	if err := s.release(ctx, rt, sandbox.KillReset, false); err != nil {
		return nil, err
	}
	return s.reread(ctx, rt.OrgID, rt.ID)
}

// Delete kills the runtime's sandbox and deletes the runtime.
func (s *Service) Delete(ctx context.Context, rt *Runtime) error {
	return s.release(ctx, rt, sandbox.KillDeleted, true)
}

// release kills the runtime's sandbox (kill_reason reason; the record is
// kept) and unlinks it, leaving the runtime idle, or deletes the runtime
// (under the same lock, so no start can slip in between).
func (s *Service) release(ctx context.Context, rt *Runtime, reason string, deleteRow bool) error {
	rt, unlock, err := s.lockRuntime(ctx, rt)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := s.currentRecord(ctx, rt)
	if err != nil {
		return err
	}
	if live(rec) {
		if _, err := s.lc.Delete(ctx, rec, reason); err != nil {
			// Once stopping is stored the reconciler finishes the removal.
			cur, gerr := s.db.GetRecord(context.WithoutCancel(ctx), rec.ID)
			if gerr != nil || live(cur) {
				return err
			}
			s.log.Warn("removing a runtime's sandbox is still in progress; the reconciler finishes it", "record", rec.ID, "err", err)
		}
		if err := s.bill.Settle(context.WithoutCancel(ctx), rec.ID); err != nil {
			s.log.Warn("settling a reset sandbox failed; the settle loop retries", "record", rec.ID, "err", err)
		}
	}
	if deleteRow {
		return s.deleteRuntimeRow(context.WithoutCancel(ctx), rt.ID)
	}
	if rt.CurrentRecordID == "" {
		return nil
	}
	ok, err := s.relink(ctx, rt.ID, rt.CurrentRecordID, "")
	if err == nil && !ok {
		return domain.Conflict(fmt.Sprintf("runtime %s was started or reset concurrently; read it again", rt.ID))
	}
	return err
}

// reread reads the runtime again (any workspace) and views it.
func (s *Service) reread(ctx context.Context, org, id string) (*View, error) {
	rt, err := s.getRuntime(ctx, org, "", id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.NotFound("runtime", id)
	}
	if err != nil {
		return nil, err
	}
	return s.View(ctx, rt)
}
