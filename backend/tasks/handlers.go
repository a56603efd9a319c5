package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ndjson"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// Route paths, relative to the router Register is given.
const (
	PathTasks        = "/api/v1/org/{org}/tasks"
	PathTask         = "/api/v1/org/{org}/tasks/{ref:.+}"
	PathEnvironments = "/api/v1/org/{org}/ws/{workspace}/environments"
	PathEnvironment  = PathEnvironments + "/{id}"
)

// TokenHeader carries the execute token.
const TokenHeader = "X-Environment-Token"

// Register adds the task catalog and environment routes to r. Requests must
// already be authenticated (httpx.Org set); the {org} path must be the key's.
func (s *Service) Register(r *mux.Router) {
	h := func(f func(w http.ResponseWriter, r *http.Request) error) http.Handler { return httpx.Handler(f) }
	r.Handle(PathTasks, h(s.listTasks)).Methods(http.MethodGet)
	r.Handle(PathTask, h(s.getTask)).Methods(http.MethodGet)
	r.Handle(PathEnvironments, h(s.createEnv)).Methods(http.MethodPost)
	r.Handle(PathEnvironments, h(s.listEnvsHandler)).Methods(http.MethodGet)
	r.Handle(PathEnvironment, h(s.getEnvHandler)).Methods(http.MethodGet)
	r.Handle(PathEnvironment, h(s.deleteEnv)).Methods(http.MethodDelete)
	r.Handle(PathEnvironment+"/status", h(s.envStatus)).Methods(http.MethodGet)
	r.Handle(PathEnvironment+"/pause", h(s.pauseEnv)).Methods(http.MethodPost)
	r.Handle(PathEnvironment+"/resume", h(s.resumeEnv)).Methods(http.MethodPost)
	r.Handle(PathEnvironment+"/execute", h(s.execute)).Methods(http.MethodPost)
	r.Handle(PathEnvironment+"/check", h(s.checkInput)).Methods(http.MethodPost)
}

var workspaceRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// scope checks the org and workspace of the path.
func scope(r *http.Request) (org, ws string, err error) {
	if org, err = httpx.PathOrg(r); err != nil {
		return "", "", err
	}
	ws = mux.Vars(r)["workspace"]
	if !workspaceRE.MatchString(ws) {
		return "", "", &httpx.Error{Code: http.StatusBadRequest, Type: "validation_error",
			Detail: fmt.Sprintf("workspace: %q must be 1 to 64 characters of a-z, 0-9, '-' and '_'", ws),
			Errors: []httpx.FieldError{{Loc: []any{"path", "workspace"}, Msg: "invalid workspace slug", Type: "value_error"}}}
	}
	return org, ws, nil
}

// lookup reads the {id} environment of the request's org and workspace.
func (s *Service) lookup(r *http.Request) (*Env, error) {
	org, ws, err := scope(r)
	if err != nil {
		return nil, err
	}
	id := mux.Vars(r)["id"]
	if len(id) > 128 {
		return nil, httpx.NotFound("environment", id[:128]+"…")
	}
	e, err := s.getOrgEnv(r.Context(), org, ws, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, httpx.NotFound("environment", id)
	}
	return e, err
}

func queryErr(name, msg string) *httpx.Error {
	return &httpx.Error{Code: http.StatusBadRequest, Type: "validation_error", Detail: name + ": " + msg,
		Errors: []httpx.FieldError{{Loc: []any{"query", name}, Msg: msg, Type: "value_error"}}}
}

func bodyErr(loc []any, msg string) *httpx.Error {
	parts := make([]string, 0, len(loc))
	for _, l := range loc {
		parts = append(parts, fmt.Sprint(l))
	}
	return &httpx.Error{Code: http.StatusBadRequest, Type: "validation_error", Detail: strings.Join(parts, ".") + ": " + msg,
		Errors: []httpx.FieldError{{Loc: append([]any{"body"}, loc...), Msg: msg, Type: "value_error"}}}
}

// ---- catalog ----

func (s *Service) listTasks(w http.ResponseWriter, r *http.Request) error {
	org, err := httpx.PathOrg(r)
	if err != nil {
		return err
	}
	if err := noQuery(r); err != nil {
		return err
	}
	tasks := s.catalog.List(org)
	latest := latestOf(tasks)
	out := make([]TaskView, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, taskView(t, latest[t]))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"tasks": out})
	return nil
}

func noQuery(r *http.Request) error {
	for k := range r.URL.Query() {
		return queryErr(k, "unknown query parameter")
	}
	return nil
}

func (s *Service) getTask(w http.ResponseWriter, r *http.Request) error {
	org, err := httpx.PathOrg(r)
	if err != nil {
		return err
	}
	raw := mux.Vars(r)["ref"]
	if u, err := url.PathUnescape(raw); err == nil {
		raw = u // a router using encoded paths leaves %2F in the variable
	}
	ref, err := catalog.ParseRef(raw)
	if err != nil {
		return &httpx.Error{Code: http.StatusBadRequest, Type: "validation_error", Detail: "ref: " + err.Error(),
			Errors: []httpx.FieldError{{Loc: []any{"path", "ref"}, Msg: err.Error(), Type: "value_error"}}}
	}
	t, err := s.catalog.Resolve(r.Context(), ref, org)
	if err != nil {
		return httpx.NotFound("task", raw)
	}
	latest := latestOf(s.catalog.List(org))
	httpx.WriteJSON(w, http.StatusOK, taskView(t, latest[t]))
	return nil
}

// ---- create ----

type createRequest struct {
	TaskRef    *string           `json:"task_ref"`
	Inputs     map[string]string `json:"inputs"`
	TimeoutSec *int              `json:"timeout_sec"`
	ProjectID  *string           `json:"project_id"`
	SecretIDs  []string          `json:"secret_ids"`
}

const idempotencyScope = "task_environments"

func (s *Service) createEnv(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	org, ws, err := scope(r)
	if err != nil {
		return err
	}
	var req createRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if req.TaskRef == nil || strings.TrimSpace(*req.TaskRef) == "" {
		return bodyErr([]any{"task_ref"}, "required: the task to provision, [org/]name[@version] (see GET /api/v1/org/{org}/tasks)")
	}
	ref, err := catalog.ParseRef(strings.TrimSpace(*req.TaskRef))
	if err != nil {
		return bodyErr([]any{"task_ref"}, err.Error())
	}
	timeout := s.cfg.DefaultTimeoutSec
	if req.TimeoutSec != nil {
		timeout = *req.TimeoutSec
		if timeout < s.cfg.MinTimeoutSec || timeout > s.cfg.MaxTimeoutSec {
			return bodyErr([]any{"timeout_sec"}, fmt.Sprintf("must be between %d and %d seconds, not %d", s.cfg.MinTimeoutSec, s.cfg.MaxTimeoutSec, timeout))
		}
	}
	if req.ProjectID != nil && (len(*req.ProjectID) > 200 || !utf8.ValidString(*req.ProjectID)) {
		return bodyErr([]any{"project_id"}, "must be a string of at most 200 characters")
	}
	if len(req.SecretIDs) > 100 {
		return bodyErr([]any{"secret_ids"}, "at most 100 secret ids")
	}
	for i, sid := range req.SecretIDs {
		if sid == "" || len(sid) > 200 {
			return bodyErr([]any{"secret_ids", i}, "must be a non-empty string of at most 200 characters")
		}
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 255 {
		return &httpx.Error{Code: http.StatusBadRequest, Type: "validation_error", Detail: "Idempotency-Key: at most 255 characters",
			Errors: []httpx.FieldError{{Loc: []any{"header", "Idempotency-Key"}, Msg: "too long", Type: "value_error"}}}
	}
	task, err := s.catalog.Resolve(ctx, ref, org)
	if err != nil {
		return httpx.NotFound("task", ref.String())
	}
	if err := s.checkRuntime(ctx, task); err != nil {
		return err
	}
	resolved, err := task.ResolveInputs(req.Inputs)
	if err != nil {
		var ie *catalog.InputError
		if errors.As(err, &ie) {
			return bodyErr([]any{"inputs", ie.Input}, ie.Msg)
		}
		return err
	}

	now := s.now()
	token := ids.Token("det")
	e := &Env{ID: ids.New(), OrgID: org, Workspace: ws, TaskRef: ref.String(), TaskOrg: task.Org, TaskName: task.Name,
		TaskVersion: task.Version, Inputs: nonNil(req.Inputs), Resolved: resolved, TimeoutSec: timeout,
		ProjectID: req.ProjectID, SecretIDs: nonNilSlice(req.SecretIDs), State: taskenv.StateBuilding,
		ExecuteService: task.ExecuteService, TokenHash: store.HashSecret(token), RecordID: ids.New(),
		Deadline: now.Add(s.cfg.BuildDeadline), CreatedAt: now, UpdatedAt: now,
		Timeline: []TimelineEntry{{State: taskenv.StateBuilding, At: now}}}
	rec := &store.Record{ID: e.RecordID, OrgID: org, Kind: sandbox.KindTask, Provider: s.providerName, Phase: sandbox.PhasePending,
		TemplateID: task.Ref(), TimeoutSec: timeout, EnvironmentID: e.ID, CreatedAt: now, PhaseDeadline: e.Deadline,
		Metadata: map[string]string{"environment_id": e.ID, "workspace": ws, "task": task.Ref()}}
	var replay string
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		if key != "" {
			id, err := store.LookupIdempotencyTx(ctx, tx, org, idempotencyScope+":"+ws, key)
			if err != nil {
				return err
			}
			if id != "" {
				replay = id
				return nil
			}
		}
		if s.cfg.Admit != nil {
			if err := s.cfg.Admit(ctx, org); err != nil {
				return err
			}
		}
		if err := store.InsertRecordTx(ctx, tx, rec); err != nil {
			return err
		}
		if err := insertEnvTx(ctx, tx, e); err != nil {
			return err
		}
		if key != "" {
			return store.SaveIdempotencyTx(ctx, tx, org, idempotencyScope+":"+ws, key, e.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if replay != "" {
		prev, err := s.getOrgEnv(ctx, org, ws, replay)
		if err != nil {
			return err
		}
		w.Header().Set("Idempotent-Replayed", "true")
		httpx.WriteJSON(w, http.StatusOK, s.envView(prev))
		return nil
	}
	s.log.Info("task environment created", "environment", e.ID, "org", org, "workspace", ws, "task", task.Ref(), "record", e.RecordID)
	s.kick(e.ID)
	v := s.envView(e)
	v.ExecuteToken = token
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+e.ID)
	httpx.WriteJSON(w, http.StatusCreated, v)
	return nil
}

// checkRuntime refuses, before anything is recorded, a task whose runtime
// (task.yaml) the engine does not offer: 400 naming the field and the
// engine's runtimes.
func (s *Service) checkRuntime(ctx context.Context, task *catalog.Task) error {
	rc, ok := s.engine.(RuntimeChecker)
	if !ok || task.Runtime == "" {
		return nil
	}
	err := rc.CheckRuntime(ctx, "task "+task.Ref()+" asks in task.yaml for runtime", task.Runtime)
	var re *hardening.RuntimeError
	if errors.As(err, &re) {
		return bodyErr([]any{"task_ref"}, re.Error())
	}
	if err != nil {
		return httpx.NewError(http.StatusBadGateway, "provider_error", err.Error())
	}
	return nil
}

// ---- read ----

func (s *Service) getEnvHandler(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lookup(r)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, s.envView(e))
	return nil
}

func (s *Service) listEnvsHandler(w http.ResponseWriter, r *http.Request) error {
	org, ws, err := scope(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	for k := range q {
		if k != "state" && k != "page" && k != "limit" {
			return queryErr(k, "unknown query parameter (use state, page, limit)")
		}
	}
	var states []string
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if st = strings.TrimSpace(st); st == "" {
				continue
			}
			if !taskenv.State(st).Valid() {
				return queryErr("state", fmt.Sprintf("unknown state %q; use %s", st, stateNames()))
			}
			states = append(states, st)
		}
	}
	page, err := intParam(q.Get("page"), "page", 1, 1, 1_000_000)
	if err != nil {
		return err
	}
	limit, err := intParam(q.Get("limit"), "limit", 50, 1, 100)
	if err != nil {
		return err
	}
	envs, err := s.pageEnvs(r.Context(), org, ws, states, (page-1)*limit, limit+1)
	if err != nil {
		return err
	}
	hasNext := len(envs) > limit
	if hasNext {
		envs = envs[:limit]
	}
	out := make([]EnvView, 0, len(envs))
	for _, e := range envs {
		out = append(out, s.envView(e))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"environments": out, "has_next": hasNext, "page": page, "limit": limit})
	return nil
}

// stateNames lists the environment states for an error message.
func stateNames() string {
	names := make([]string, len(taskenv.States))
	for i, st := range taskenv.States {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

func intParam(raw, name string, def, lo, hi int) (int, error) {
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return 0, queryErr(name, fmt.Sprintf("must be an integer, not %q", raw))
	}
	if n < lo || n > hi {
		return 0, queryErr(name, fmt.Sprintf("must be between %d and %d, not %d", lo, hi, n))
	}
	return n, nil
}

// envStatus is the cheap poll. ?wait=N (0..MaxWait seconds) holds the answer
// until the state changes: while it equals ?since=<state> when given, else
// while it is building or provisioning.
func (s *Service) envStatus(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "wait" && k != "since" {
			return queryErr(k, "unknown query parameter (use wait, since)")
		}
	}
	maxWait := int(s.cfg.MaxWait / time.Second)
	wait, err := intParam(q.Get("wait"), "wait", 0, 0, maxWait)
	if err != nil {
		return err
	}
	since := q.Get("since")
	if since != "" && !taskenv.State(since).Valid() {
		return queryErr("since", fmt.Sprintf("unknown state %q; use %s", since, stateNames()))
	}
	e, err := s.lookup(r)
	if err != nil {
		return err
	}
	holding := func(e *Env) bool {
		if since != "" {
			return e.State == taskenv.State(since)
		}
		return e.State.Transitional()
	}
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	for wait > 0 && holding(e) {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		ch, release := s.hub.Wait(e.ID)
		// Re-read after subscribing so a change in between is not missed;
		// re-read at least every 2 s in case another process changed it.
		cur, err := s.getEnv(r.Context(), e.ID)
		if err != nil {
			release()
			return err
		}
		e = cur
		if !holding(e) {
			release()
			break
		}
		t := time.NewTimer(min(left, 2*time.Second))
		select {
		case <-ch:
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			release()
			return nil // the client left
		}
		t.Stop()
		release()
		if e, err = s.getEnv(r.Context(), e.ID); err != nil {
			return err
		}
	}
	httpx.WriteJSON(w, http.StatusOK, statusView(e))
	return nil
}

// ---- pause / resume / delete ----

func (s *Service) pauseEnv(w http.ResponseWriter, r *http.Request) error {
	return s.pauseResumeEnv(w, r, true)
}

func (s *Service) resumeEnv(w http.ResponseWriter, r *http.Request) error {
	return s.pauseResumeEnv(w, r, false)
}

// pauseResumeEnv moves the backing record to pausing (resuming), as a
// sandbox's pause does, then has the driver make the engine call and finish
// the move; it answers once that is done, with the environment paused
// (ready) or the engine's refusal.
func (s *Service) pauseResumeEnv(w http.ResponseWriter, r *http.Request, pause bool) error {
	ctx := r.Context()
	e, err := s.lookup(r)
	if err != nil {
		return err
	}
	if err := httpx.Decode(r, &struct{}{}, nil); err != nil {
		return err
	}
	unlock := s.lockEnv(e.ID)
	defer unlock()
	if e, err = s.getEnv(ctx, e.ID); err != nil {
		return err
	}
	from, verb, op := taskenv.StateReady, "paused", sandbox.PhasePausing
	if !pause {
		from, verb, op = taskenv.StatePaused, "resumed", sandbox.PhaseResuming
	}
	if e.State != from {
		return httpx.Conflict(fmt.Sprintf("environment %s is %s; only a %s environment can be %s", e.ID, e.State, from, verb))
	}
	e, err = s.apply(ctx, e.ID, change{expect: from, rec: op, cause: sandbox.CauseUser})
	switch {
	case errors.Is(err, errConflict):
		return httpx.Conflict(fmt.Sprintf("environment %s is %s now; it was not %s", e.ID, e.State, verb))
	case errors.Is(err, errRecordConflict):
		s.Kick()
		return httpx.Conflict(fmt.Sprintf("environment %s is being torn down (its ledger record was ended)", e.ID))
	case err != nil:
		return err
	}
	e, err = s.pauseResume(context.WithoutCancel(ctx), e.ID)
	var oe *opError
	switch {
	case errors.As(err, &oe):
		return providerHTTPError(oe.err)
	case errors.Is(err, errConflict):
		return httpx.Conflict(fmt.Sprintf("environment %s is %s now; it was not %s", e.ID, e.State, verb))
	case errors.Is(err, errRecordConflict):
		s.Kick()
		return httpx.Conflict(fmt.Sprintf("environment %s is being torn down (its ledger record was ended)", e.ID))
	case err != nil:
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, s.envView(e))
	return nil
}

func providerHTTPError(err error) error {
	var pe *compute.ProviderError
	if errors.As(err, &pe) {
		return httpx.NewError(http.StatusBadGateway, "provider_error", pe.Error())
	}
	return err
}

func (s *Service) deleteEnv(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	e, err := s.lookup(r)
	if err != nil {
		return err
	}
	unlock := s.lockEnv(e.ID)
	defer unlock()
	if !e.State.Terminal() {
		if e, err = s.teardown(ctx, e.ID, sandbox.CauseUser, sandbox.KillTornDown, "deleted", ""); err != nil {
			return err
		}
	} else {
		// Already over: make sure nothing is left (idempotent).
		rctx, cancel := s.bg(time.Minute)
		defer cancel()
		if err := s.engine.Remove(rctx, e.ID); err != nil {
			s.log.Warn("removing leftovers of an environment that is over", "environment", e.ID, "error", err)
		}
	}
	if e, err = s.getEnv(ctx, e.ID); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, s.envView(e))
	return nil
}

// ---- execute ----

type execRequest struct {
	Command    json.RawMessage `json:"command"`
	TimeoutSec *int            `json:"timeout_sec"`
}

// ExecResponse is the answer of POST /execute (the document's TaskExecResult).
type ExecResponse = apitypes.TaskExecResult

const maxCommandLen = 64 * 1024

func (s *Service) execute(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lookup(r)
	if err != nil {
		return err
	}
	token := r.Header.Get(TokenHeader)
	if token == "" {
		return httpx.NewError(http.StatusUnauthorized, "missing_token", "the "+TokenHeader+" header is required: send the execute_token returned when the environment was created")
	}
	if !ids.Matches(token, e.TokenHash) {
		return httpx.NewError(http.StatusForbidden, "invalid_token", "the "+TokenHeader+" header does not match this environment's execute token")
	}
	var req execRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	argv, herr := parseCommand(req.Command)
	if herr != nil {
		return herr
	}
	timeout := DefaultExecTimeoutSec
	if req.TimeoutSec != nil {
		timeout = *req.TimeoutSec
		if timeout < 1 || timeout > MaxExecTimeoutSec {
			return bodyErr([]any{"timeout_sec"}, fmt.Sprintf("must be between 1 and %d seconds, not %d", MaxExecTimeoutSec, timeout))
		}
	}
	if e.State != taskenv.StateReady {
		msg := fmt.Sprintf("environment %s is %s; commands run only in a ready environment", e.ID, e.State)
		if e.State == taskenv.StatePaused {
			msg += " (resume it first)"
		}
		return httpx.Conflict(msg)
	}
	if ndjson.Wanted(r) {
		return s.executeStream(w, r, e, argv, time.Duration(timeout)*time.Second)
	}
	res, err := s.engine.Exec(r.Context(), e.ID, e.ExecuteService, argv, time.Duration(timeout)*time.Second, DefaultMaxExecOutput)
	if errors.Is(err, compute.ErrNotRunning) {
		return httpx.Conflict(fmt.Sprintf("environment %s cannot run commands now: %v", e.ID, err))
	}
	if err != nil {
		if r.Context().Err() != nil {
			return nil // the client left
		}
		return providerHTTPError(err)
	}
	out := ExecResponse{ExitCode: res.ExitCode, Output: strings.ToValidUTF8(string(res.Output), "\uFFFD"), TimedOut: res.TimedOut,
		Truncated: res.Truncated, DurationMs: res.Duration.Milliseconds(), Service: e.ExecuteService}
	if res.TimedOut {
		out.Note = fmt.Sprintf("the command exceeded timeout_sec (%d s) and was killed; exit_code 124 means timed out", timeout)
	}
	if res.Truncated {
		note := fmt.Sprintf("output truncated to the first %d bytes", DefaultMaxExecOutput)
		if out.Note != "" {
			out.Note += "; " + note
		} else {
			out.Note = note
		}
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// parseCommand accepts a string (run with sh -c) or an array of strings.
func parseCommand(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, bodyErr([]any{"command"}, "required: a string (run with sh -c) or an array of strings")
	}
	if len(raw) > maxCommandLen {
		return nil, bodyErr([]any{"command"}, fmt.Sprintf("longer than %d bytes", maxCommandLen))
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		if strings.TrimSpace(str) == "" {
			return nil, bodyErr([]any{"command"}, "must not be empty")
		}
		if strings.ContainsRune(str, 0) {
			return nil, bodyErr([]any{"command"}, "must not contain NUL bytes")
		}
		return []string{"sh", "-c", str}, nil
	}
	var argv []string
	if err := json.Unmarshal(raw, &argv); err != nil {
		return nil, bodyErr([]any{"command"}, "must be a string or an array of strings")
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, bodyErr([]any{"command"}, "must be a non-empty array whose first element names the program")
	}
	for i, a := range argv {
		if strings.ContainsRune(a, 0) {
			return nil, bodyErr([]any{"command", i}, "must not contain NUL bytes")
		}
	}
	return argv, nil
}
