package lifecycle

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// handleSummary answers GET /observability/summary: what the org runs, what
// it may still spend, whether the provider answers, and what to do next.
func (s *Service) handleSummary(w http.ResponseWriter, r *http.Request) error {
	org := httpx.Org(r)
	counts, err := s.db.PhaseCounts(r.Context(), org)
	if err != nil {
		return err
	}
	credits, err := s.db.OrgCredits(r.Context(), org)
	if err != nil {
		return err
	}
	usage := map[sandbox.State]int{}
	for p, n := range counts {
		usage[p.PublicState()] += n
	}
	pctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	perr := s.prov.Ping(pctx)
	cancel()
	prov := apitypes.ProviderStatus{Name: s.prov.Name(), Available: perr == nil}
	if perr != nil {
		prov.Error = perr.Error()
	}
	var next []string
	if perr != nil {
		next = append(next, "the "+s.prov.Name()+" provider does not answer: check it (GET /readyz) before creating sandboxes")
	}
	if credits <= 0 {
		next = append(next, "the organization has no credits left: ask an operator to grant credits (dreadnode-backend credits grant)")
	}
	if usage[sandbox.StateFailed] > 0 {
		next = append(next, "some sandboxes failed: read their diagnostic (GET /sandboxes?state=failed)")
	}
	if usage[sandbox.StatePaused] > 0 {
		next = append(next, "paused sandboxes keep their state but accrue no runtime: connect to resume them or delete them")
	}
	var queue *apitypes.QuotaReport
	if s.cfg.Admission != nil {
		rep, err := s.cfg.Admission.ReportOf(r.Context(), org)
		if err != nil {
			return err
		}
		queue = &rep
		if rep.Queued > 0 {
			next = append(next, fmt.Sprintf("%d creates wait in the admission queue (quota or provider capacity full; oldest %.0f s): they start as sandboxes end; delete those you no longer need, or ask an operator to raise the quotas (GET /api/v1/org/%s/quotas)",
				rep.Queued, rep.OldestWaitSeconds, org))
		}
	}
	if len(next) == 0 {
		next = []string{}
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.ObservabilitySummary{
		Organization:     org,
		Usage:            usageByState(usage),
		Quota:            apitypes.SummaryQuota{Credits: float64(credits) / 1e6, MinTimeoutSeconds: s.cfg.MinTimeout, MaxTimeoutSeconds: MaxTimeout},
		Provider:         prov,
		Admission:        queue,
		SuggestedActions: next,
	})
	return nil
}

// usageByState reports a count for every public state, zero included.
func usageByState(usage map[sandbox.State]int) map[string]int {
	out := make(map[string]int, len(sandbox.States))
	for _, st := range sandbox.States {
		out[string(st)] = usage[st]
	}
	return out
}
