package worlds

import (
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// Prefix is where the Worlds jobs API (§16) lives.
const Prefix = "/api/v1/org/{org}/worlds/jobs"

// Register adds the routes of §16 to r, whose requests are already
// authenticated by an org API key.
func (s *Service) Register(r *mux.Router) {
	r.Handle(Prefix, httpx.OrgHandler(s.handleStart)).Methods(http.MethodPost)
	r.Handle(Prefix, httpx.OrgHandler(s.handleList)).Methods(http.MethodGet)
	r.Handle(Prefix+"/{id}", httpx.OrgHandler(s.handleGet)).Methods(http.MethodGet)
	r.Handle(Prefix+"/{id}", httpx.OrgHandler(s.handleStop)).Methods(http.MethodDelete)
	r.Handle(Prefix+"/{id}/logs", httpx.OrgHandler(s.handleLogs)).Methods(http.MethodGet)
	r.Handle(Prefix+"/{id}/output", httpx.OrgHandler(s.handleOutput)).Methods(http.MethodGet)
}

func (s *Service) handleStart(w http.ResponseWriter, r *http.Request, org string) error {
	var req NewJob
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	j, replayed, err := s.Start(r.Context(), org, req, r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if replayed {
		status = http.StatusOK
	}
	httpx.WriteJSON(w, status, j)
	return nil
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request, org string) error {
	q, err := httpx.Query(r, "limit", "cursor")
	if err != nil {
		return err
	}
	limit, err := httpx.ParseLimit(q.Get("limit"), httpx.DefaultLimit, httpx.MaxLimit)
	if err != nil {
		return err
	}
	kind := httpx.CursorKind("w", true)
	after, err := httpx.DecodeCursor(kind, q.Get("cursor"))
	if err != nil {
		return err
	}
	jobs, last, more, err := s.List(r.Context(), org, after, limit)
	if err != nil {
		return err
	}
	page := apitypes.WorldJobList{Items: jobs}
	if more {
		c := httpx.EncodeCursor(kind, last)
		page.NextCursor = &c
	}
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request, org string) error {
	j, err := s.Get(r.Context(), org, mux.Vars(r)["id"])
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, j)
	return nil
}

func (s *Service) handleStop(w http.ResponseWriter, r *http.Request, org string) error {
	j, err := s.Stop(r.Context(), org, mux.Vars(r)["id"])
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, j)
	return nil
}

func (s *Service) handleLogs(w http.ResponseWriter, r *http.Request, org string) error {
	id := mux.Vars(r)["id"]
	lines, err := s.Logs(r.Context(), org, id)
	if err != nil {
		return err
	}
	if lines == nil {
		lines = []string{}
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.WorldJobLogs{JobID: id, Logs: lines})
	return nil
}

func (s *Service) handleOutput(w http.ResponseWriter, r *http.Request, org string) error {
	id := mux.Vars(r)["id"]
	o, err := s.Output(r.Context(), org, id)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", `attachment; filename="`+id+`-output.tar"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(o.Archive)))
	w.Header().Set("X-Output-Truncated", strconv.FormatBool(o.Truncated))
	_, _ = w.Write(o.Archive)
	return nil
}
