package tasks

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ndjson"
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

// The handlers translate HTTP only: they read the path, the headers and the
// body, call the Service's use case (Create, Get, List, Pause, Resume,
// Delete, Execute in usecase_*.go) and write its result; the use cases
// answer with domain errors, which httpx maps to status codes in one place.

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
	r.Handle(PathEnvironment+"/fork", h(s.forkEnv)).Methods(http.MethodPost)
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
	return s.Get(r.Context(), org, ws, mux.Vars(r)["id"])
}

func queryErr(name, msg string) *httpx.Error {
	return &httpx.Error{Code: http.StatusBadRequest, Type: "validation_error", Detail: name + ": " + msg,
		Errors: []httpx.FieldError{{Loc: []any{"query", name}, Msg: msg, Type: "value_error"}}}
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
	out := make([]apitypes.Task, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, taskView(t, latest[t]))
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.TaskList{Tasks: out})
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

func (s *Service) createEnv(w http.ResponseWriter, r *http.Request) error {
	org, ws, err := scope(r)
	if err != nil {
		return err
	}
	var body apitypes.CreateTaskEnvironment
	if err := httpx.Decode(r, &body, nil); err != nil {
		return err
	}
	c, err := s.Create(r.Context(), CreateRequest{Org: org, Workspace: ws, Body: body, IdempotencyKey: r.Header.Get("Idempotency-Key")})
	if err != nil {
		return err
	}
	v := s.envView(c.Env)
	if c.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		httpx.WriteJSON(w, http.StatusOK, v)
		return nil
	}
	v.ExecuteToken = c.ExecuteToken
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+c.Env.ID)
	httpx.WriteJSON(w, http.StatusCreated, v)
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
		if k != "state" && k != "page" && k != "limit" && k != "order" {
			return queryErr(k, "unknown query parameter (use state, page, limit, order)")
		}
	}
	var states []taskenv.State
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if st = strings.TrimSpace(st); st == "" {
				continue
			}
			if !taskenv.State(st).Valid() {
				return queryErr("state", fmt.Sprintf("unknown state %q; use %s", st, stateNames()))
			}
			states = append(states, taskenv.State(st))
		}
	}
	page, err := intParam(q.Get("page"), "page", apitypes.ParamEnvironmentsPageDefault, apitypes.ParamEnvironmentsPageMinimum, apitypes.ParamEnvironmentsPageMaximum)
	if err != nil {
		return err
	}
	limit, err := intParam(q.Get("limit"), "limit", apitypes.ParamEnvironmentsLimitDefault, apitypes.ParamEnvironmentsLimitMinimum, apitypes.ParamEnvironmentsLimitMaximum)
	if err != nil {
		return err
	}
	desc, err := httpx.ParseOrder(q.Get("order"))
	if err != nil {
		return err
	}
	got, err := s.List(r.Context(), ListRequest{Org: org, Workspace: ws, States: states, Offset: (page - 1) * limit, Limit: limit, Desc: desc})
	if err != nil {
		return err
	}
	envs, hasNext := got.Envs, got.HasNext
	out := make([]EnvView, 0, len(envs))
	for _, e := range envs {
		out = append(out, s.envView(e))
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.TaskEnvironmentPage{Environments: out, HasNext: hasNext, Page: page, Limit: limit})
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
	if e, err = s.WaitState(r.Context(), e, WaitRequest{Since: taskenv.State(since), Wait: time.Duration(wait) * time.Second}); err != nil {
		if r.Context().Err() != nil {
			return nil // the client left
		}
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, statusView(e))
	return nil
}

// ---- pause / resume / delete ----

func (s *Service) pauseEnv(w http.ResponseWriter, r *http.Request) error {
	return s.pauseResumeEnv(w, r, s.Pause)
}

func (s *Service) resumeEnv(w http.ResponseWriter, r *http.Request) error {
	return s.pauseResumeEnv(w, r, s.Resume)
}

// pauseResumeEnv answers once the pause (resume) is done, with the
// environment paused (ready) or the engine's refusal.
func (s *Service) pauseResumeEnv(w http.ResponseWriter, r *http.Request, op func(context.Context, *Env) (*Env, error)) error {
	e, err := s.lookup(r)
	if err != nil {
		return err
	}
	if err := httpx.Decode(r, &struct{}{}, nil); err != nil {
		return err
	}
	if e, err = op(r.Context(), e); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, s.envView(e))
	return nil
}

func (s *Service) deleteEnv(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lookup(r)
	if err != nil {
		return err
	}
	if e, err = s.Delete(r.Context(), e); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, s.envView(e))
	return nil
}

// ---- execute ----

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
	var req ExecRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if ndjson.Wanted(r) {
		return s.executeStream(w, r, e, req)
	}
	res, err := s.Execute(r.Context(), e, req)
	if err != nil {
		if r.Context().Err() != nil {
			return nil // the client left
		}
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, res)
	return nil
}
