package orgmetrics

import (
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// Register adds the native routes (API.md §17) to r, whose requests are
// already authenticated by an org API key; another org's path answers 404.
func (s *Service) Register(r *mux.Router) {
	r.Handle("/api/v1/org/{org}/metrics", httpx.OrgHandler(s.handleSeries)).Methods(http.MethodGet)
	r.Handle("/api/v1/org/{org}/metrics/max", httpx.OrgHandler(s.handleMax)).Methods(http.MethodGet)
}

type pointJSON struct {
	Timestamp           time.Time `json:"timestamp"`
	ConcurrentSandboxes int       `json:"concurrent_sandboxes"`
	SandboxStarts       int       `json:"sandbox_starts"`
	SandboxStartRate    float64   `json:"sandbox_start_rate"`
}

func (s *Service) handleSeries(w http.ResponseWriter, r *http.Request, org string) error {
	q, err := httpx.Query(r, "start", "end")
	if err != nil {
		return err
	}
	from, to, err := s.Window(q.Get("start"), q.Get("end"))
	if err != nil {
		return err
	}
	step, points, err := s.Series(r.Context(), org, from, to)
	if err != nil {
		return err
	}
	out := make([]pointJSON, len(points))
	for i, p := range points {
		out[i] = pointJSON{p.At, p.Concurrent, p.Starts, p.StartRate}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"start": from, "end": to, "step_seconds": int64(step / time.Second), "points": out})
	return nil
}

func (s *Service) handleMax(w http.ResponseWriter, r *http.Request, org string) error {
	q, err := httpx.Query(r, "start", "end", "metric")
	if err != nil {
		return err
	}
	metric := q.Get("metric")
	if metric == "" {
		return httpx.InvalidQuery("metric", "is required: "+ConcurrentSandboxes+" or "+SandboxStartRate)
	}
	from, to, err := s.Window(q.Get("start"), q.Get("end"))
	if err != nil {
		return err
	}
	m, err := s.Max(r.Context(), org, metric, from, to)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"metric": metric, "value": m.Value, "timestamp": m.At})
	return nil
}
