package admission

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Register adds GET /api/v1/org/{org}/quotas (the org's key).
func (a *Admitter) Register(r *mux.Router) {
	r.Handle("/api/v1/org/{org}/quotas", httpx.Handler(func(w http.ResponseWriter, r *http.Request) error {
		org, err := httpx.PathOrg(r)
		if err != nil {
			return err
		}
		return a.writeQuotas(w, r.Context(), org)
	})).Methods(http.MethodGet)
}

// RegisterAdmin adds PUT and GET /admin/orgs/{org}/quotas (the admin key).
func (a *Admitter) RegisterAdmin(r *mux.Router) {
	r.Handle("/orgs/{org}/quotas", httpx.Handler(a.handleAdminSet)).Methods(http.MethodPut)
	r.Handle("/orgs/{org}/quotas", httpx.Handler(func(w http.ResponseWriter, r *http.Request) error {
		return a.writeQuotas(w, r.Context(), mux.Vars(r)["org"])
	})).Methods(http.MethodGet)
}

func (a *Admitter) handleAdminSet(w http.ResponseWriter, r *http.Request) error {
	org := mux.Vars(r)["org"]
	var q Quotas
	if err := httpx.Decode(r, &q, nil); err != nil {
		return err
	}
	if name, _ := negative(q); name != "" {
		return httpx.Invalid(name, "must be 0 or more; omit it (or send null) for unlimited")
	}
	err := SetQuotas(r.Context(), a.cfg.DB, org, q)
	if errors.Is(err, store.ErrNotFound) {
		return httpx.NotFound("organization", org)
	}
	if err != nil {
		return err
	}
	a.cfg.Logger.Info("quotas set by an operator", "org", org, "max_running", show(q.MaxRunning), "max_cpu", show(q.MaxCPU), "max_memory_mb", show(q.MaxMemoryMB))
	a.Wake() // a raised limit may admit queued creates
	return a.writeQuotas(w, r.Context(), org)
}

func show(p *int) any {
	if p == nil {
		return "unlimited"
	}
	return *p
}

// Report is an org's quotas with its current use and queue, and the
// providers' capacity (the document's QuotaReport).
type Report = apitypes.QuotaReport

// ReportOf reads org's quotas, use and queue length.
func (a *Admitter) ReportOf(ctx context.Context, org string) (Report, error) {
	db := a.cfg.DB.Reader()
	rep := Report{Organization: org, Capacity: map[string]apitypes.ProviderCapacity{}}
	var err error
	if rep.Quotas, err = QuotasOf(ctx, db, org); err != nil {
		return rep, err
	}
	use, err := UseOf(ctx, db, org)
	if err != nil {
		return rep, err
	}
	rep.Use = apitypes.QuotaUse(use)
	var oldest sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(created_at) FROM sandboxes WHERE org_id = ? AND `+isQueued, org).Scan(&rep.Queued, &oldest); err != nil {
		return rep, err
	}
	if oldest.Valid {
		rep.OldestWaitSeconds = max(0, time.Since(time.Unix(0, oldest.Int64)).Seconds())
	}
	for name, c := range a.cfg.Capacity {
		rep.Capacity[name] = apitypes.ProviderCapacity(c)
	}
	return rep, nil
}

func (a *Admitter) writeQuotas(w http.ResponseWriter, ctx context.Context, org string) error {
	if _, err := a.cfg.DB.OrgByName(ctx, org); errors.Is(err, store.ErrNotFound) {
		return httpx.NotFound("organization", org)
	} else if err != nil {
		return err
	}
	rep, err := a.ReportOf(ctx, org)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, rep)
	return nil
}

// providers lists the configured providers in a stable order.
func (a *Admitter) providers() []string {
	out := make([]string, 0, len(a.cfg.Capacity))
	for n := range a.cfg.Capacity {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
