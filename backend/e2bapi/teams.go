package e2bapi

import (
	"fmt"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/orgmetrics"
)

// registerTeams adds E2B's team metrics: the org is the team, and its id is
// the teamID E2B's clients send.
func (e *Edge) registerTeams(r *mux.Router) {
	if e.cfg.Metrics == nil {
		return
	}
	h := func(f httpx.Handler) http.Handler { return f }
	r.Handle("/teams/{teamID}/metrics", h(e.handleTeamMetrics)).Methods(http.MethodGet)
	r.Handle("/teams/{teamID}/metrics/max", h(e.handleTeamMetricsMax)).Methods(http.MethodGet)
}

// team checks the path's team against the key's org: another team's id is
// E2B's 403 (E2B answers so whether or not that team exists).
func team(r *http.Request) (string, error) {
	org, id := httpx.Org(r), mux.Vars(r)["teamID"]
	if id != org {
		return "", httpx.NewError(http.StatusForbidden, "forbidden",
			fmt.Sprintf("You (%s) are not authorized to access this team's (%s) metrics", org, id))
	}
	return org, nil
}

// handleTeamMetrics answers the org's concurrency and start rate over
// start..end (default: the last 7 days), in E2B's steps (orgmetrics.Step).
func (e *Edge) handleTeamMetrics(w http.ResponseWriter, r *http.Request) error {
	org, err := team(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	from, to, err := e.cfg.Metrics.Window(q.Get("start"), q.Get("end"))
	if err != nil {
		return err
	}
	_, points, err := e.cfg.Metrics.Series(r.Context(), org, from, to)
	if err != nil {
		return err
	}
	out := make([]e2btypes.TeamMetric, len(points))
	for i, p := range points {
		out[i] = e2btypes.TeamMetric{Timestamp: p.At, TimestampUnix: p.At.Unix(), ConcurrentSandboxes: int32(p.Concurrent), SandboxStartRate: float32(p.StartRate)}
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// handleTeamMetricsMax answers the largest value of metric
// (concurrent_sandboxes or sandbox_start_rate) over start..end.
func (e *Edge) handleTeamMetricsMax(w http.ResponseWriter, r *http.Request) error {
	org, err := team(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	metric := q.Get("metric")
	if metric == "" {
		return httpx.InvalidQuery("metric", "is required: "+orgmetrics.ConcurrentSandboxes+" or "+orgmetrics.SandboxStartRate)
	}
	from, to, err := e.cfg.Metrics.Window(q.Get("start"), q.Get("end"))
	if err != nil {
		return err
	}
	m, err := e.cfg.Metrics.Max(r.Context(), org, metric, from, to)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, e2btypes.MaxTeamMetric{Timestamp: m.At, TimestampUnix: m.At.Unix(), Value: float32(m.Value)})
	return nil
}
