package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// RuntimesPrefix is where the runtimes API (§4) lives.
const RuntimesPrefix = Prefix + "/ws/{workspace}/runtimes"

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

func (s *Service) registerRuntimes(r *mux.Router) {
	r.Handle(RuntimesPrefix, s.orgHandler(s.handleCreateRuntime)).Methods(http.MethodPost)
	r.Handle(RuntimesPrefix, s.orgHandler(s.handleListRuntimes)).Methods(http.MethodGet)
	r.Handle(RuntimesPrefix+"/{runtime_id}", s.orgHandler(s.handleGetRuntime)).Methods(http.MethodGet)
	r.Handle(RuntimesPrefix+"/{runtime_id}", s.orgHandler(s.handleDeleteRuntime)).Methods(http.MethodDelete)
	r.Handle(RuntimesPrefix+"/{runtime_id}/start", s.orgHandler(s.handleStart)).Methods(http.MethodPost)
	r.Handle(RuntimesPrefix+"/{runtime_id}/pause", s.orgHandler(s.handlePause)).Methods(http.MethodPost)
	r.Handle(RuntimesPrefix+"/{runtime_id}/resume", s.orgHandler(s.handleResume)).Methods(http.MethodPost)
	r.Handle(RuntimesPrefix+"/{runtime_id}/reset", s.orgHandler(s.handleReset)).Methods(http.MethodPost)
	r.Handle(RuntimesPrefix+"/{runtime_id}/keepalive", s.orgHandler(s.handleKeepalive)).Methods(http.MethodPost)
}

// RuntimeResources are a runtime's sandbox resources (null: template default).
type RuntimeResources struct {
	CPUCount *int `json:"cpu_count"`
	MemoryMB *int `json:"memory_mb"`
}

// RuntimeView is the JSON of a runtime.
type RuntimeView struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Organization string            `json:"organization"`
	Workspace    string            `json:"workspace"`
	Template     string            `json:"template"`
	Resources    RuntimeResources  `json:"resources"`
	TimeoutSec   int               `json:"timeout_sec"`
	EnvVarNames  []string          `json:"env_var_names"`
	Metadata     map[string]string `json:"metadata"`
	// State is derived from the linked record: idle, running or paused.
	State string `json:"state"`
	// SandboxID is the live linked record; Instance is its ledger view.
	SandboxID     *string   `json:"sandbox_id"`
	LastSandboxID *string   `json:"last_sandbox_id"`
	Instance      *Record   `json:"instance"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	// SandboxToken is the sandbox's access token (X-Access-Token for exec,
	// files and the traffic router); only the start response carries it.
	SandboxToken string `json:"sandbox_token,omitempty"`
}

// live reports whether rec is compute the runtime still controls.
func live(rec *store.Record) bool {
	return rec != nil && slices.Contains(store.LivePhases, rec.Phase)
}

// runtimeState derives a runtime's state from its linked record.
func runtimeState(rec *store.Record) string {
	if !live(rec) {
		return "idle"
	}
	if rec.Phase.LedgerState() == "paused" {
		return "paused"
	}
	return "running" // starting, running (pausing still runs)
}

func (s *Service) runtimeView(rt *runtime, rec *store.Record, now time.Time) *RuntimeView {
	v := &RuntimeView{ID: rt.ID, Name: rt.Name, Organization: rt.OrgID, Workspace: rt.Workspace, Template: rt.TemplateID,
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
		v.Instance = s.viewAt(rec, now)
	case rt.CurrentRecordID != "":
		// The linked record ended on its own (timeout, credits, failure).
		v.LastSandboxID = &rt.CurrentRecordID
	}
	return v
}

// currentRecord reads the runtime's linked record (nil when unlinked).
func (s *Service) currentRecord(ctx context.Context, rt *runtime) (*store.Record, error) {
	if rt.CurrentRecordID == "" {
		return nil, nil
	}
	rec, err := s.db.GetOrgRecord(ctx, rt.OrgID, rt.CurrentRecordID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return rec, err
}

func (s *Service) viewRuntime(ctx context.Context, rt *runtime) (*RuntimeView, error) {
	rec, err := s.currentRecord(ctx, rt)
	if err != nil {
		return nil, err
	}
	return s.runtimeView(rt, rec, s.now()), nil
}

// workspace reads and checks the {workspace} path variable.
func workspace(r *http.Request) (string, error) {
	ws := mux.Vars(r)["workspace"]
	if !slugRe.MatchString(ws) {
		return "", &httpx.Error{Code: 400, Type: "validation_error",
			Detail: "workspace: must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit",
			Errors: []httpx.FieldError{{Loc: []any{"path", "workspace"}, Msg: "invalid workspace", Type: "value_error"}}}
	}
	return ws, nil
}

// loadRuntime reads the runtime named in the path; another org's or another
// workspace's is 404.
func (s *Service) loadRuntime(r *http.Request, org string) (*runtime, error) {
	ws, err := workspace(r)
	if err != nil {
		return nil, err
	}
	id := mux.Vars(r)["runtime_id"]
	rt, err := s.getRuntime(r.Context(), org, ws, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, httpx.NotFound("runtime", id)
	}
	return rt, err
}

// CreateRuntimeRequest is the body of POST /runtimes.
type CreateRuntimeRequest struct {
	// Name is unique within the workspace.
	Name string `json:"name"`
	// Template of the sandboxes (default "base").
	Template   string            `json:"template"`
	Resources  *RuntimeResources `json:"resources"`
	EnvVars    map[string]string `json:"env_vars"`
	Metadata   map[string]string `json:"metadata"`
	TimeoutSec *int              `json:"timeout_sec"`
}

func (s *Service) validateRuntime(ctx context.Context, req *CreateRuntimeRequest) error {
	if req.Name == "" {
		return httpx.Invalid("name", "is required: 1-64 characters of letters, digits, '_', '.', '-'")
	}
	if !slugRe.MatchString(req.Name) {
		return httpx.Invalid("name", "must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit")
	}
	if req.Template == "" {
		req.Template = "base"
	}
	if !templateRe.MatchString(req.Template) {
		return httpx.Invalid("template", "must be a template id such as \"base\" (lowercase letters, digits, '.', '_', '-')")
	}
	if s.cfg.Provider != nil {
		ts, err := s.cfg.Provider.Templates(ctx)
		if err != nil {
			return httpx.NewError(http.StatusServiceUnavailable, "provider_unavailable", "the "+s.cfg.Provider.Name()+" provider did not list its templates: "+err.Error())
		}
		names := make([]string, 0, len(ts))
		for _, t := range ts {
			names = append(names, t.ID)
		}
		if !slices.Contains(names, req.Template) {
			sort.Strings(names)
			return httpx.Invalid("template", fmt.Sprintf("unknown template %q; available: %s", req.Template, strings.Join(names, ", ")))
		}
	}
	if r := req.Resources; r != nil {
		if r.CPUCount != nil && (*r.CPUCount < 1 || *r.CPUCount > lifecycle.MaxCPU) {
			return httpx.Invalid("resources.cpu_count", fmt.Sprintf("must be between 1 and %d", lifecycle.MaxCPU))
		}
		if r.MemoryMB != nil && (*r.MemoryMB < lifecycle.MinMemoryMB || *r.MemoryMB > lifecycle.MaxMemoryMB) {
			return httpx.Invalid("resources.memory_mb", fmt.Sprintf("must be between %d and %d", lifecycle.MinMemoryMB, lifecycle.MaxMemoryMB))
		}
	}
	for k := range req.EnvVars {
		if !envNameRe.MatchString(k) {
			return httpx.Invalid("env_vars."+k, "is not a valid environment variable name")
		}
	}
	if len(req.Metadata) > maxMetadata {
		return httpx.Invalid("metadata", fmt.Sprintf("at most %d entries", maxMetadata))
	}
	for k, v := range req.Metadata {
		if !metaKeyRe.MatchString(k) {
			return httpx.Invalid("metadata."+k, "keys are 1-64 characters of letters, digits, '_', '.', '-', '/'")
		}
		if len(v) > 512 {
			return httpx.Invalid("metadata."+k, "values are at most 512 characters")
		}
	}
	if req.TimeoutSec == nil {
		t := DefaultRuntimeTimeout
		req.TimeoutSec = &t
	}
	return s.checkTimeout("timeout_sec", *req.TimeoutSec)
}

func (s *Service) checkTimeout(field string, v int) error {
	lo := 60
	if s.lc != nil {
		lo = s.lc.MinTimeout()
	}
	if v < lo || v > lifecycle.MaxTimeout {
		return httpx.Invalid(field, fmt.Sprintf("must be between %d and %d seconds", lo, lifecycle.MaxTimeout))
	}
	return nil
}

func (s *Service) handleCreateRuntime(w http.ResponseWriter, r *http.Request, org string) error {
	ws, err := workspace(r)
	if err != nil {
		return err
	}
	var req CreateRuntimeRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if err := s.validateRuntime(r.Context(), &req); err != nil {
		return err
	}
	now := s.now()
	rt := &runtime{ID: ids.New(), OrgID: org, Workspace: ws, Name: req.Name, TemplateID: req.Template, TimeoutSec: *req.TimeoutSec,
		EnvVars: req.EnvVars, Metadata: req.Metadata, CreatedAt: now, UpdatedAt: now}
	if req.Resources != nil {
		if req.Resources.CPUCount != nil {
			rt.CPUCount = *req.Resources.CPUCount
		}
		if req.Resources.MemoryMB != nil {
			rt.MemoryMB = *req.Resources.MemoryMB
		}
	}
	rt, replayed, err := s.insertRuntime(r.Context(), rt, r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	if replayed && rt.Workspace != ws {
		return httpx.Conflict("the Idempotency-Key was used for a runtime in workspace \"" + rt.Workspace + "\"; use a new key")
	}
	v, err := s.viewRuntime(r.Context(), rt)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if replayed {
		status = http.StatusOK
	}
	httpx.WriteJSON(w, status, v)
	return nil
}

func (s *Service) handleListRuntimes(w http.ResponseWriter, r *http.Request, org string) error {
	ws, err := workspace(r)
	if err != nil {
		return err
	}
	q, err := query(r, "limit", "cursor")
	if err != nil {
		return err
	}
	limit, err := parseLimit(q.Get("limit"), DefaultLimit, MaxLimit)
	if err != nil {
		return err
	}
	after, err := decodeCursor("r", q.Get("cursor"))
	if err != nil {
		return err
	}
	rts, err := s.listRuntimes(r.Context(), org, ws, after, limit+1)
	if err != nil {
		return err
	}
	page := &Page[*RuntimeView]{Items: make([]*RuntimeView, 0, len(rts))}
	if len(rts) > limit {
		rts = rts[:limit]
		c := encodeCursor("r", rts[limit-1].Seq)
		page.NextCursor = &c
	}
	idList := make([]string, 0, len(rts))
	for _, rt := range rts {
		if rt.CurrentRecordID != "" {
			idList = append(idList, rt.CurrentRecordID)
		}
	}
	recs, err := s.db.GetRecords(r.Context(), idList)
	if err != nil {
		return err
	}
	now := s.now()
	for _, rt := range rts {
		page.Items = append(page.Items, s.runtimeView(rt, recs[rt.CurrentRecordID], now))
	}
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

func (s *Service) handleGetRuntime(w http.ResponseWriter, r *http.Request, org string) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	v, err := s.viewRuntime(r.Context(), rt)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, v)
	return nil
}

// noBody rejects a body other than empty or {} on action routes.
func noBody(r *http.Request) error {
	var none struct{}
	return httpx.Decode(r, &none, nil)
}

// StartRequest is the optional body of POST /runtimes/{id}/start.
type StartRequest struct {
	// TimeoutSec overrides the runtime's timeout_sec for this sandbox.
	TimeoutSec *int `json:"timeout_sec"`
}

func (s *Service) handleStart(w http.ResponseWriter, r *http.Request, org string) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	var req StartRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	timeout := rt.TimeoutSec
	if req.TimeoutSec != nil {
		if err := s.checkTimeout("timeout_sec", *req.TimeoutSec); err != nil {
			return err
		}
		timeout = *req.TimeoutSec
	}
	v, err := s.Start(r.Context(), rt, timeout)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, v)
	return nil
}

// Start provisions a sandbox for an idle runtime through the lifecycle
// service, links it and waits until it runs. The view carries the sandbox's
// access token (shown once).
func (s *Service) Start(ctx context.Context, rt *runtime, timeout int) (*RuntimeView, error) {
	if s.lc == nil {
		return nil, errors.New("ledger: runtimes need Config.Lifecycle")
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
		return nil, httpx.Conflict(fmt.Sprintf("runtime %s is already %s with sandbox %s; pause, resume or reset it instead of starting it again",
			rt.ID, runtimeState(cur), cur.ID))
	}
	if err := s.Admit(ctx, rt.OrgID); err != nil {
		return nil, err
	}
	req := &lifecycle.CreateRequest{TemplateID: rt.TemplateID, Timeout: &timeout, EnvVars: rt.EnvVars, Metadata: rt.Metadata}
	if rt.CPUCount > 0 || rt.MemoryMB > 0 {
		req.Resources = &lifecycle.Resources{}
		if rt.CPUCount > 0 {
			req.Resources.CPUCount = &rt.CPUCount
		}
		if rt.MemoryMB > 0 {
			req.Resources.MemoryMB = &rt.MemoryMB
		}
	}
	created, err := s.lc.Create(ctx, rt.OrgID, req, lifecycle.CreateOptions{Kind: store.KindRuntime, RuntimeID: rt.ID})
	if err != nil {
		return nil, err
	}
	ok, err := s.relink(ctx, rt.ID, rt.CurrentRecordID, created.Record.ID)
	if err == nil && !ok {
		err = httpx.Conflict(fmt.Sprintf("runtime %s was started or reset concurrently; read it again", rt.ID))
	}
	if err != nil {
		// Do not leave an unlinked sandbox running.
		if _, derr := s.lc.Delete(context.WithoutCancel(ctx), created.Record, store.KillDeleted); derr != nil {
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
			detail = "it ended (" + rec.Phase.LedgerState() + ", " + rec.KillReason + ")"
		}
		return nil, httpx.NewError(http.StatusBadGateway, "start_failed",
			fmt.Sprintf("the sandbox %s of runtime %s did not start: %s; the runtime stays idle", rec.ID, rt.ID, detail))
	}
	rt.UpdatedAt = s.now()
	v := s.runtimeView(rt, rec, s.now())
	v.SandboxToken = created.AccessToken
	return v, nil
}

// lockRuntime takes the runtime's in-process lock and re-reads it.
func (s *Service) lockRuntime(ctx context.Context, rt *runtime) (*runtime, func(), error) {
	unlock := s.rtLocks.Lock(rt.ID)
	cur, err := s.getRuntime(ctx, rt.OrgID, "", rt.ID)
	if err != nil {
		unlock()
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, httpx.NotFound("runtime", rt.ID)
		}
		return nil, nil, err
	}
	return cur, unlock, nil
}

// liveRecord reads the runtime's live record or answers 409 (no sandbox).
func (s *Service) liveRecord(ctx context.Context, rt *runtime, op string) (*store.Record, error) {
	rec, err := s.currentRecord(ctx, rt)
	if err != nil {
		return nil, err
	}
	if !live(rec) {
		return nil, httpx.Conflict(fmt.Sprintf("runtime %s is idle (no sandbox); POST .../runtimes/%s/start before %s", rt.ID, rt.ID, op))
	}
	return rec, nil
}

// withLiveRecord runs op on the runtime's live sandbox record, holding the
// runtime's lock (409 when the runtime is idle), then answers the runtime.
func (s *Service) withLiveRecord(w http.ResponseWriter, r *http.Request, org, doing string, op func(rec *store.Record) error) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}
	rt, unlock, err := s.lockRuntime(r.Context(), rt)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := s.liveRecord(r.Context(), rt, doing)
	if err != nil {
		return err
	}
	if err := op(rec); err != nil {
		return err
	}
	return s.writeRuntime(w, r, rt.ID, org)
}

func (s *Service) handlePause(w http.ResponseWriter, r *http.Request, org string) error {
	return s.withLiveRecord(w, r, org, "pausing it", func(rec *store.Record) error {
		if _, err := s.lc.Pause(r.Context(), rec); err != nil {
			return err
		}
		if err := s.Settle(r.Context(), rec.ID); err != nil {
			s.log.Warn("settling a paused sandbox failed; the settle loop retries", "record", rec.ID, "err", err)
		}
		return nil
	})
}

func (s *Service) handleResume(w http.ResponseWriter, r *http.Request, org string) error {
	return s.withLiveRecord(w, r, org, "resuming it", func(rec *store.Record) error {
		if err := s.Admit(r.Context(), org); err != nil {
			return err
		}
		_, _, err := s.lc.Resume(r.Context(), rec)
		return err
	})
}

// KeepaliveRequest is the body of POST /runtimes/{id}/keepalive.
type KeepaliveRequest struct {
	// ExtendSeconds (60..3600, default 300): the sandbox lives at least
	// this long from now.
	ExtendSeconds *int `json:"extend_seconds"`
}

func (s *Service) handleKeepalive(w http.ResponseWriter, r *http.Request, org string) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	var req KeepaliveRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	d := DefaultKeepalive
	if req.ExtendSeconds != nil {
		d = *req.ExtendSeconds
	}
	if d < MinKeepalive || d > MaxKeepalive {
		return httpx.Invalid("extend_seconds", fmt.Sprintf("must be between %d and %d seconds", MinKeepalive, MaxKeepalive))
	}
	rt, unlock, err := s.lockRuntime(r.Context(), rt)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := s.liveRecord(r.Context(), rt, "keeping it alive")
	if err != nil {
		return err
	}
	cur, err := s.lc.SetEnd(r.Context(), rec, time.Duration(d)*time.Second, true)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"id": rt.ID, "sandbox_id": cur.ID, "expires_at": timePtr(cur.EndAt)})
	return nil
}

func (s *Service) handleReset(w http.ResponseWriter, r *http.Request, org string) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}
	if err := s.release(r.Context(), rt, store.KillReset, false); err != nil {
		return err
	}
	return s.writeRuntime(w, r, rt.ID, org)
}

func (s *Service) handleDeleteRuntime(w http.ResponseWriter, r *http.Request, org string) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	if err := s.release(r.Context(), rt, store.KillDeleted, true); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// release kills the runtime's sandbox (kill_reason reason; the record is
// kept) and unlinks it, leaving the runtime idle, or deletes the runtime
// (under the same lock, so no start can slip in between).
func (s *Service) release(ctx context.Context, rt *runtime, reason string, deleteRow bool) error {
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
		if err := s.Settle(context.WithoutCancel(ctx), rec.ID); err != nil {
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
		return httpx.Conflict(fmt.Sprintf("runtime %s was started or reset concurrently; read it again", rt.ID))
	}
	return err
}

func (s *Service) writeRuntime(w http.ResponseWriter, r *http.Request, id, org string) error {
	rt, err := s.getRuntime(r.Context(), org, "", id)
	if errors.Is(err, store.ErrNotFound) {
		return httpx.NotFound("runtime", id)
	}
	if err != nil {
		return err
	}
	v, err := s.viewRuntime(r.Context(), rt)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, v)
	return nil
}
