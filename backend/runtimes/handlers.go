package runtimes

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// Prefix is where the runtimes API (§4) lives.
const Prefix = "/api/v1/org/{org}/ws/{workspace}/runtimes"

// Register adds the runtimes routes (§4) to r, whose requests are already
// authenticated by an org API key.
func (s *Service) Register(r *mux.Router) {
	r.Handle(Prefix, httpx.OrgHandler(s.handleCreate)).Methods(http.MethodPost)
	r.Handle(Prefix, httpx.OrgHandler(s.handleList)).Methods(http.MethodGet)
	r.Handle(Prefix+"/{runtime_id}", httpx.OrgHandler(s.handleGet)).Methods(http.MethodGet)
	r.Handle(Prefix+"/{runtime_id}", httpx.OrgHandler(s.handleDelete)).Methods(http.MethodDelete)
	r.Handle(Prefix+"/{runtime_id}/start", httpx.OrgHandler(s.handleStart)).Methods(http.MethodPost)
	r.Handle(Prefix+"/{runtime_id}/pause", httpx.OrgHandler(s.handlePause)).Methods(http.MethodPost)
	r.Handle(Prefix+"/{runtime_id}/resume", httpx.OrgHandler(s.handleResume)).Methods(http.MethodPost)
	r.Handle(Prefix+"/{runtime_id}/reset", httpx.OrgHandler(s.handleReset)).Methods(http.MethodPost)
	r.Handle(Prefix+"/{runtime_id}/keepalive", httpx.OrgHandler(s.handleKeepalive)).Methods(http.MethodPost)
}

// workspace reads and checks the {workspace} path variable.
func workspace(r *http.Request) (string, error) {
	ws := mux.Vars(r)["workspace"]
	if !ValidWorkspace(ws) {
		return "", &httpx.Error{Code: 400, Type: "validation_error",
			Detail: "workspace: must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit",
			Errors: []httpx.FieldError{{Loc: []any{"path", "workspace"}, Msg: "invalid workspace", Type: "value_error"}}}
	}
	return ws, nil
}

// loadRuntime reads the runtime named in the path; another org's or another
// workspace's is 404.
func (s *Service) loadRuntime(r *http.Request, org string) (*Runtime, error) {
	ws, err := workspace(r)
	if err != nil {
		return nil, err
	}
	return s.Load(r.Context(), org, ws, mux.Vars(r)["runtime_id"])
}

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request, org string) error {
	ws, err := workspace(r)
	if err != nil {
		return err
	}
	var req NewRuntime
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	v, replayed, err := s.Create(r.Context(), org, ws, req, r.Header.Get("Idempotency-Key"))
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

func (s *Service) handleList(w http.ResponseWriter, r *http.Request, org string) error {
	ws, err := workspace(r)
	if err != nil {
		return err
	}
	q, err := httpx.Query(r, "limit", "cursor", "order")
	if err != nil {
		return err
	}
	pg, err := httpx.ParsePaging(q, "r")
	if err != nil {
		return err
	}
	views, last, more, err := s.List(r.Context(), org, ws, pg.AfterSeq, pg.Limit, pg.Desc)
	if err != nil {
		return err
	}
	page := httpx.PageOf(pg, views, last, more)
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request, org string) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	v, err := s.View(r.Context(), rt)
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

// StartRequest is the optional body of POST /runtimes/{id}/start
// (StartRuntime): TimeoutSec overrides the runtime's timeout_sec.
type StartRequest = apitypes.StartRuntime

func (s *Service) handleStart(w http.ResponseWriter, r *http.Request, org string) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	var req StartRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	v, err := s.Start(r.Context(), rt, req.TimeoutSec)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, v)
	return nil
}

// action serves a route that takes no body and answers the runtime.
func (s *Service) action(w http.ResponseWriter, r *http.Request, org string, op func(rt *Runtime) (*View, error)) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}
	v, err := op(rt)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, v)
	return nil
}

func (s *Service) handlePause(w http.ResponseWriter, r *http.Request, org string) error {
	return s.action(w, r, org, func(rt *Runtime) (*View, error) { return s.Pause(r.Context(), rt) })
}

func (s *Service) handleResume(w http.ResponseWriter, r *http.Request, org string) error {
	return s.action(w, r, org, func(rt *Runtime) (*View, error) { return s.Resume(r.Context(), rt) })
}

func (s *Service) handleReset(w http.ResponseWriter, r *http.Request, org string) error {
	return s.action(w, r, org, func(rt *Runtime) (*View, error) { return s.Reset(r.Context(), rt) })
}

// KeepaliveRequest is the body of POST /runtimes/{id}/keepalive
// (RuntimeKeepaliveRequest): ExtendSeconds (60..3600, default 300), the
// sandbox lives at least this long from now.
type KeepaliveRequest = apitypes.RuntimeKeepaliveRequest

func (s *Service) handleKeepalive(w http.ResponseWriter, r *http.Request, org string) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	var req KeepaliveRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	k, err := s.Keepalive(r.Context(), rt, req.ExtendSeconds)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, k)
	return nil
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request, org string) error {
	rt, err := s.loadRuntime(r, org)
	if err != nil {
		return err
	}
	if err := s.Delete(r.Context(), rt); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
