package e2bapi

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// logJSON is E2B's SandboxLog; entryJSON its SandboxLogEntry.
type logJSON struct {
	Timestamp time.Time `json:"timestamp"`
	Line      string    `json:"line"`
}

type entryJSON struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

// logs reads the sandbox's output lines. The engine's lines carry no time
// here, so each is stamped with the sandbox's start; limit keeps the first.
func (e *Edge) logs(r *http.Request, maxLimit int) (*store.Record, []entryJSON, error) {
	q := r.URL.Query()
	limit := apitypes.ParamE2BLogsLimitDefault
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < apitypes.ParamE2BLogsLimitMinimum || n > maxLimit {
			return nil, nil, httpx.InvalidQuery("limit", "must be an integer between "+strconv.Itoa(apitypes.ParamE2BLogsLimitMinimum)+" and "+strconv.Itoa(maxLimit))
		}
		limit = n
	}
	rec, err := e.load(r.Context(), r)
	if err != nil {
		return nil, nil, err
	}
	lines, err := e.lc.Logs(r.Context(), rec)
	if err != nil {
		return nil, nil, err
	}
	search := q.Get("search")
	at := startedAt(rec)
	out := make([]entryJSON, 0, min(len(lines), limit))
	for _, l := range lines {
		if len(out) == limit {
			break
		}
		if search == "" || strings.Contains(l, search) {
			out = append(out, entryJSON{Timestamp: at, Level: "info", Message: l, Fields: map[string]string{}})
		}
	}
	return rec, out, nil
}

func (e *Edge) handleLogsV1(w http.ResponseWriter, r *http.Request) error {
	_, entries, err := e.logs(r, 1<<31-1)
	if err != nil {
		return err
	}
	lines := make([]logJSON, len(entries))
	for i, en := range entries {
		lines[i] = logJSON{Timestamp: en.Timestamp, Line: en.Message}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"logs": lines, "logEntries": entries})
	return nil
}

func (e *Edge) handleLogsV2(w http.ResponseWriter, r *http.Request) error {
	_, entries, err := e.logs(r, apitypes.ParamE2BV2LogsLimitMaximum)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"logs": entries})
	return nil
}

// metricJSON is E2B's SandboxMetric.
type metricJSON struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       uint64    `json:"memUsed"`
	MemTotal      uint64    `json:"memTotal"`
	MemCache      uint64    `json:"memCache"`
	DiskUsed      uint64    `json:"diskUsed"`
	DiskTotal     uint64    `json:"diskTotal"`
}

func metricOf(m compute.Metrics, now time.Time) metricJSON {
	return metricJSON{Timestamp: now, TimestampUnix: now.Unix(), CPUCount: m.CPUCount, CPUUsedPct: m.CPUPercent,
		MemUsed: m.MemoryUsedBytes, MemTotal: m.MemoryLimitBytes, DiskUsed: m.DiskUsedBytes}
}

// handleMetrics answers the current sample (this backend keeps no history,
// so start and end are not read); a sandbox that is not running has none.
func (e *Edge) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	rec, err := e.load(r.Context(), r)
	if err != nil {
		return err
	}
	out := []metricJSON{}
	if state(rec) == running && !rec.Phase.Starting() {
		m, err := e.lc.Metrics(r.Context(), rec)
		if err != nil {
			return err
		}
		out = append(out, metricOf(m, time.Now().UTC()))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// handleMetricsMany answers the current sample of each running sandbox
// named in sandbox_ids (unknown, ended and paused ones are left out).
func (e *Edge) handleMetricsMany(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("sandbox_ids")
	if raw == "" {
		return httpx.InvalidQuery("sandbox_ids", "is required: a comma-separated list of sandbox ids")
	}
	ids := strings.Split(raw, ",")
	if len(ids) > 100 {
		return httpx.InvalidQuery("sandbox_ids", "names at most 100 sandboxes")
	}
	out := map[string]metricJSON{}
	for _, id := range ids {
		id, _, _ = strings.Cut(id, "-")
		rec, err := e.db.GetOrgRecord(r.Context(), httpx.Org(r), id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (rec.Phase != sandbox.PhaseRunning || rec.Kind == sandbox.KindTask)) {
			continue
		}
		if err != nil {
			return err
		}
		m, err := e.lc.Metrics(r.Context(), rec)
		if err != nil {
			continue // it stopped meanwhile: left out, as an ended one
		}
		out[id] = metricOf(m, time.Now().UTC())
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
	return nil
}
