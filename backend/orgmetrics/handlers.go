package orgmetrics

import (
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// Register adds the native routes (API.md §17) to r, whose requests are
// already authenticated by an org API key; another org's path answers 404.
func (s *Service) Register(r *mux.Router) {
	r.Handle("/api/v1/org/{org}/metrics", httpx.OrgHandler(s.handleSeries)).Methods(http.MethodGet)
	r.Handle("/api/v1/org/{org}/metrics/max", httpx.OrgHandler(s.handleMax)).Methods(http.MethodGet)
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
	out := make([]apitypes.OrgMetricPoint, len(points))
	for i, p := range points {
		out[i] = apitypes.OrgMetricPoint{Timestamp: p.At, ConcurrentSandboxes: p.Concurrent, SandboxStarts: p.Starts, SandboxStartRate: p.StartRate}
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.OrgMetrics{Start: from, End: to, StepSeconds: int64(step / time.Second), Points: out})
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
	httpx.WriteJSON(w, http.StatusOK, apitypes.OrgMetricMax{Metric: apitypes.OrgMetricMaxMetric(metric), Value: m.Value, Timestamp: m.At})
	return nil
}
