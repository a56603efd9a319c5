package e2bapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// logs reads the sandbox's output lines. The engine's lines carry no time
// here, so each is stamped with the sandbox's start; limit keeps the first.
func (e *Edge) logs(r *http.Request, maxLimit int) (*store.Record, []e2btypes.SandboxLogEntry, error) {
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
	out := make([]e2btypes.SandboxLogEntry, 0, min(len(lines), limit))
	for _, l := range lines {
		if len(out) == limit {
			break
		}
		if search == "" || strings.Contains(l, search) {
			out = append(out, e2btypes.SandboxLogEntry{Timestamp: at, Level: e2btypes.LogLevelInfo, Message: l, Fields: map[string]string{}})
		}
	}
	return rec, out, nil
}

func (e *Edge) handleLogsV1(w http.ResponseWriter, r *http.Request) error {
	_, entries, err := e.logs(r, 1<<31-1)
	if err != nil {
		return err
	}
	lines := make([]e2btypes.SandboxLog, len(entries))
	for i, en := range entries {
		lines[i] = e2btypes.SandboxLog{Timestamp: en.Timestamp, Line: en.Message}
	}
	httpx.WriteJSON(w, http.StatusOK, e2btypes.SandboxLogs{Logs: lines, LogEntries: entries})
	return nil
}

func (e *Edge) handleLogsV2(w http.ResponseWriter, r *http.Request) error {
	_, entries, err := e.logs(r, apitypes.ParamE2BV2LogsLimitMaximum)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, e2btypes.SandboxLogsV2Response{Logs: entries})
	return nil
}

// metricOf is E2B's SandboxMetric of a reading: the disk is the sandbox's
// root filesystem, its image's files and what it wrote (E2B's diskUsed is
// the root filesystem's use), of which it may hold the image and the write
// limit (0: no limit known).
func metricOf(m compute.Metrics, now time.Time) e2btypes.SandboxMetric {
	diskTotal := uint64(0)
	if m.DiskLimitBytes > 0 {
		diskTotal = m.ImageBytes + m.DiskLimitBytes
	}
	return e2btypes.SandboxMetric{Timestamp: now, TimestampUnix: now.Unix(), CpuCount: int32(m.CPUCount), CpuUsedPct: float32(m.CPUPercent),
		MemUsed: int64(m.MemoryUsedBytes), MemTotal: int64(m.MemoryLimitBytes), DiskUsed: int64(m.ImageBytes + m.DiskUsedBytes), DiskTotal: int64(diskTotal)}
}

// sampleWait bounds how long a metrics request waits for a sandbox's first
// reading. E2B answers [] until a sandbox has reported; here the first
// reading of a busy engine can take seconds, and it goes on in the
// background (the provider samples off the request path), so a later
// request finds it.
const sampleWait = 2 * time.Second

// sample reads rec's current metrics, waiting at most until ctx's deadline:
// ok false when the reading is not there by then (or the sandbox stopped
// meanwhile), an error only when the request itself ended.
func (e *Edge) sample(ctx context.Context, rec *store.Record) (e2btypes.SandboxMetric, bool, error) {
	wait, cancel := context.WithTimeout(ctx, sampleWait)
	defer cancel()
	m, err := e.lc.Metrics(wait, rec)
	if err != nil {
		return e2btypes.SandboxMetric{}, false, ctx.Err()
	}
	return metricOf(m, time.Now().UTC()), true, nil
}

// handleMetrics answers the current sample (this backend keeps no history,
// so start and end are not read); a sandbox that is not running, or whose
// first reading is not ready, has none yet.
func (e *Edge) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	rec, err := e.load(r.Context(), r)
	if err != nil {
		return err
	}
	out := []e2btypes.SandboxMetric{}
	if state(rec) == running && !rec.Phase.Starting() {
		m, ok, err := e.sample(r.Context(), rec)
		if err != nil {
			return err
		}
		if ok {
			out = append(out, m)
		}
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// handleMetricsMany answers the current sample of each running sandbox
// named in sandbox_ids (unknown, ended and paused ones are left out, and
// those whose first reading is not ready); the readings are taken at once.
func (e *Edge) handleMetricsMany(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("sandbox_ids")
	if raw == "" {
		return httpx.InvalidQuery("sandbox_ids", "is required: a comma-separated list of sandbox ids")
	}
	ids := strings.Split(raw, ",")
	if len(ids) > 100 {
		return httpx.InvalidQuery("sandbox_ids", "names at most 100 sandboxes")
	}
	var recs []*store.Record
	for _, id := range ids {
		id, _, _ = strings.Cut(id, "-")
		rec, err := e.db.GetOrgRecord(r.Context(), httpx.Org(r), id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (rec.Phase != sandbox.PhaseRunning || !sandbox.AddressedAsSandbox(rec.Kind))) {
			continue
		}
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	samples := make([]e2btypes.SandboxMetric, len(recs))
	ready := make([]bool, len(recs))
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Go(func() { samples[i], ready[i], _ = e.sample(r.Context(), rec) })
	}
	wg.Wait()
	if err := r.Context().Err(); err != nil {
		return err
	}
	out := map[string]e2btypes.SandboxMetric{}
	for i, rec := range recs {
		if ready[i] {
			out[rec.ID] = samples[i]
		}
	}
	httpx.WriteJSON(w, http.StatusOK, e2btypes.SandboxesWithMetrics{Sandboxes: out})
	return nil
}
