package billing

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Prefix of the org-scoped routes.
const Prefix = "/api/v1/org/{org}"

// Register adds the ledger (§2) and credits (§5) routes to r, whose
// requests are already authenticated by an org API key.
func (s *Service) Register(r *mux.Router) {
	r.Handle(Prefix+"/sandboxes", httpx.OrgHandler(s.handleList)).Methods(http.MethodGet)
	// usage before {sandbox_id}, so it is not read as an id.
	r.Handle(Prefix+"/sandboxes/usage", httpx.OrgHandler(s.handleUsage)).Methods(http.MethodGet)
	r.Handle(Prefix+"/sandboxes/{sandbox_id}", httpx.OrgHandler(s.handleGet)).Methods(http.MethodGet)
	r.Handle(Prefix+"/sandboxes/{sandbox_id}/logs", httpx.OrgHandler(s.handleLogs)).Methods(http.MethodGet)
	r.Handle(Prefix+"/credits", httpx.OrgHandler(s.handleCredits)).Methods(http.MethodGet)
}

// RegisterAdmin adds the operator routes (mounted under /admin and
// authenticated by the admin key, never an org key).
func (s *Service) RegisterAdmin(r *mux.Router) {
	r.Handle("/orgs/{org}/credits", httpx.Handler(s.handleAdminGrant)).Methods(http.MethodPost)
	r.Handle("/orgs/{org}/credits", httpx.Handler(s.handleAdminShow)).Methods(http.MethodGet)
}

var kinds = sandbox.Kinds

// parseLedgerStates reads the state filter into what it selects: phases,
// and stopping records by what they are leaving (empty both: all).
func parseLedgerStates(vals []string) (sandbox.LedgerSelection, error) {
	var sel sandbox.LedgerSelection
	for _, st := range httpx.SplitValues(vals) {
		one, ok := ledgerStates[sandbox.LedgerState(st)]
		if !ok {
			return sel, httpx.InvalidQuery("state", fmt.Sprintf("unknown state %q; use starting, running, paused or killed (repeat the parameter or separate values with commas)", st))
		}
		for _, p := range one.Phases {
			if !slices.Contains(sel.Phases, p) {
				sel.Phases = append(sel.Phases, p)
			}
		}
		for _, l := range one.Stopping {
			if !slices.Contains(sel.Stopping, l) {
				sel.Stopping = append(sel.Stopping, l)
			}
		}
	}
	return sel, nil
}

func parseKinds(vals []string) ([]string, error) {
	out := httpx.SplitValues(vals)
	for _, k := range out {
		if !slices.Contains(kinds, k) {
			return nil, httpx.InvalidQuery("kind", fmt.Sprintf("unknown sandbox kind %q; use runtime, task or world", k))
		}
	}
	return out, nil
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request, org string) error {
	q, err := httpx.Query(r, "state", "kind", "sandbox_kind", "limit", "cursor", "order")
	if err != nil {
		return err
	}
	sel, err := parseLedgerStates(q["state"])
	if err != nil {
		return err
	}
	ks, err := parseKinds(append(q["kind"], q["sandbox_kind"]...))
	if err != nil {
		return err
	}
	pg, err := httpx.ParsePaging(q, "s")
	if err != nil {
		return err
	}
	items, last, more, err := s.List(r.Context(), store.RecordFilter{OrgID: org, Phases: sel.Phases, Stopping: sel.Stopping, Kinds: ks, AfterSeq: pg.AfterSeq, Limit: pg.Limit, Desc: pg.Desc})
	if err != nil {
		return err
	}
	page := httpx.PageOf(pg, items, last, more)
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request, org string) error {
	rec, err := s.Record(r.Context(), org, mux.Vars(r)["sandbox_id"])
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, s.View(rec))
	return nil
}

func (s *Service) handleLogs(w http.ResponseWriter, r *http.Request, org string) error {
	rec, err := s.Record(r.Context(), org, mux.Vars(r)["sandbox_id"])
	if err != nil {
		return err
	}
	ls, err := s.Logs(r.Context(), rec)
	if err != nil {
		return err
	}
	lines := make([]apitypes.LogLine, 0, len(ls))
	for _, l := range ls {
		lines = append(lines, apitypes.LogLine{Line: l})
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.LedgerLogs{SandboxID: rec.ID, State: apitypes.LedgerState(LedgerState(rec)), Logs: lines})
	return nil
}

func (s *Service) handleUsage(w http.ResponseWriter, r *http.Request, org string) error {
	if _, err := httpx.Query(r); err != nil {
		return err
	}
	u, err := s.Usage(r.Context(), org)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, u)
	return nil
}

func (s *Service) handleCredits(w http.ResponseWriter, r *http.Request, org string) error {
	if _, err := httpx.Query(r); err != nil {
		return err
	}
	b, err := s.Balance(r.Context(), org)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, b)
	return nil
}

func (s *Service) handleAdminGrant(w http.ResponseWriter, r *http.Request) error {
	org := mux.Vars(r)["org"]
	var req apitypes.GrantCredits
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	// The document requires amount (Decode checks the body against it), so
	// 0 here is an explicit 0, refused below as not positive.
	micro, err := MicroFromCredits(req.Amount)
	if err != nil {
		return httpx.Invalid("amount", err.Error())
	}
	if _, err := s.Grant(r.Context(), org, micro); err != nil {
		return err
	}
	b, err := s.Balance(r.Context(), org)
	if err != nil {
		return err
	}
	s.log.Info("credits granted by an operator", "org", org, "credits", Credits(micro).String(), "balance", b.Balance.String())
	httpx.WriteJSON(w, http.StatusOK, apitypes.CreditGrant{Organization: org, Granted: Credits(micro), Balance: b.Balance,
		RunningCredits: b.RunningCredits, EstimatedBalance: b.EstimatedBalance})
	return nil
}

func (s *Service) handleAdminShow(w http.ResponseWriter, r *http.Request) error {
	b, err := s.Balance(r.Context(), mux.Vars(r)["org"])
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, b)
	return nil
}
