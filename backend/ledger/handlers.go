package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Prefix of the org-scoped routes.
const Prefix = "/api/v1/org/{org}"

// Limits of the ledger listing.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Register adds the ledger (§2), credits (§5) and runtimes (§4) routes to r,
// whose requests are already authenticated by an org API key.
func (s *Service) Register(r *mux.Router) {
	r.Handle(Prefix+"/sandboxes", s.orgHandler(s.handleList)).Methods(http.MethodGet)
	// usage before {sandbox_id}, so it is not read as an id.
	r.Handle(Prefix+"/sandboxes/usage", s.orgHandler(s.handleUsage)).Methods(http.MethodGet)
	r.Handle(Prefix+"/sandboxes/{sandbox_id}", s.orgHandler(s.handleGet)).Methods(http.MethodGet)
	r.Handle(Prefix+"/sandboxes/{sandbox_id}/logs", s.orgHandler(s.handleLogs)).Methods(http.MethodGet)
	r.Handle(Prefix+"/credits", s.orgHandler(s.handleCredits)).Methods(http.MethodGet)
	s.registerRuntimes(r)
}

// RegisterAdmin adds the operator routes (mounted under /admin and
// authenticated by the admin key, never an org key).
func (s *Service) RegisterAdmin(r *mux.Router) {
	r.Handle("/orgs/{org}/credits", httpx.Handler(s.handleAdminGrant)).Methods(http.MethodPost)
	r.Handle("/orgs/{org}/credits", httpx.Handler(s.handleAdminShow)).Methods(http.MethodGet)
}

// orgHandler checks the {org} path variable against the key's org (404 for
// another org) and passes the org id on.
func (s *Service) orgHandler(h func(w http.ResponseWriter, r *http.Request, org string) error) http.Handler {
	return httpx.Handler(func(w http.ResponseWriter, r *http.Request) error {
		org, err := httpx.PathOrg(r)
		if err != nil {
			return err
		}
		return h(w, r, org)
	})
}

// Page is a page of a listing.
type Page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request, org string) error {
	q, err := query(r, "state", "kind", "sandbox_kind", "limit", "cursor")
	if err != nil {
		return err
	}
	phases, err := parseLedgerStates(q["state"])
	if err != nil {
		return err
	}
	ks, err := parseKinds(append(q["kind"], q["sandbox_kind"]...))
	if err != nil {
		return err
	}
	limit, err := parseLimit(q.Get("limit"), DefaultLimit, MaxLimit)
	if err != nil {
		return err
	}
	after, err := decodeCursor("s", q.Get("cursor"))
	if err != nil {
		return err
	}
	page, err := s.List(r, store.RecordFilter{OrgID: org, Phases: phases, Kinds: ks, AfterSeq: after, Limit: limit})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

// List returns one page of the ledger: f.Limit records after f.AfterSeq.
func (s *Service) List(r *http.Request, f store.RecordFilter) (*Page[*Record], error) {
	limit := f.Limit
	f.Limit = limit + 1
	recs, err := s.db.ListRecords(r.Context(), f)
	if err != nil {
		return nil, err
	}
	page := &Page[*Record]{Items: make([]*Record, 0, min(len(recs), limit))}
	if len(recs) > limit {
		recs = recs[:limit]
		c := encodeCursor("s", recs[limit-1].Seq)
		page.NextCursor = &c
	}
	now := s.now()
	for _, rec := range recs {
		page.Items = append(page.Items, s.viewAt(rec, now))
	}
	return page, nil
}

// loadRecord reads the record named in the path; another org's is 404.
func (s *Service) loadRecord(r *http.Request, org string) (*store.Record, error) {
	id := mux.Vars(r)["sandbox_id"]
	rec, err := s.db.GetOrgRecord(r.Context(), org, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, httpx.NotFound("sandbox", id)
	}
	return rec, err
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request, org string) error {
	rec, err := s.loadRecord(r, org)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, s.View(rec))
	return nil
}

// LogLine is one line of a sandbox's output.
type LogLine struct {
	Line string `json:"line"`
}

func (s *Service) handleLogs(w http.ResponseWriter, r *http.Request, org string) error {
	rec, err := s.loadRecord(r, org)
	if err != nil {
		return err
	}
	lines := []LogLine{}
	if rec.Kind == store.KindTask || s.lc == nil {
		// Task environments keep their output in the store (if any).
		text, err := s.db.SavedLogs(r.Context(), rec.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			if l != "" {
				lines = append(lines, LogLine{Line: l})
			}
		}
	} else {
		ls, err := s.lc.Logs(r, rec)
		if err != nil {
			return err
		}
		for _, l := range ls {
			lines = append(lines, LogLine{Line: l.Line})
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"sandbox_id": rec.ID, "state": rec.Phase.LedgerState(), "logs": lines})
	return nil
}

// Usage is the answer of GET /sandboxes/usage.
type Usage struct {
	TotalRuntimeSeconds float64   `json:"total_runtime_seconds"`
	SessionsCount       int64     `json:"sessions_count"`
	CurrentMonthSeconds float64   `json:"current_month_seconds"`
	MonthStart          time.Time `json:"current_month_start"`
}

// Usage sums an org's running time: all time, sessions (starts and
// resumes), and the current calendar month (UTC).
func (s *Service) Usage(r *http.Request, org string) (*Usage, error) {
	ctx := r.Context()
	now := s.now()
	total, sessions, err := s.db.UsageTotals(ctx, org)
	if err != nil {
		return nil, err
	}
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	spans, err := s.db.UsageSpans(ctx, org, month)
	if err != nil {
		return nil, err
	}
	var monthDur time.Duration
	for _, u := range spans {
		if !u.RunningSince.IsZero() && now.After(u.RunningSince) {
			total += int64(now.Sub(u.RunningSince)) // the live part, not yet folded into runtime_ns
		}
		monthDur += monthSeconds(u, month, now)
	}
	return &Usage{TotalRuntimeSeconds: seconds(time.Duration(total)), SessionsCount: sessions,
		CurrentMonthSeconds: seconds(monthDur), MonthStart: month}, nil
}

func (s *Service) handleUsage(w http.ResponseWriter, r *http.Request, org string) error {
	if _, err := query(r); err != nil {
		return err
	}
	u, err := s.Usage(r, org)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, u)
	return nil
}

// Balance is the answer of the credits routes.
type Balance struct {
	Organization string `json:"organization"`
	// Balance is what is left after the last settlement.
	Balance Credits `json:"balance"`
	// RunningCredits accrued since the last settlement (not yet deducted).
	RunningCredits Credits `json:"running_credits"`
	// EstimatedBalance = balance - running_credits (not below zero).
	EstimatedBalance Credits `json:"estimated_balance"`
	// BurnRatePerSecond is what the org's running sandboxes cost now.
	BurnRatePerSecond float64  `json:"burn_rate_per_second"`
	RunningSandboxes  int      `json:"running_sandboxes"`
	Rates             RateView `json:"rates"`
}

// RateView is the rate table in credits per second.
type RateView struct {
	CPUSecond     float64 `json:"cpu_second"`
	GiBSecond     float64 `json:"gib_second"`
	SandboxSecond float64 `json:"sandbox_second"`
}

// Balance reads an org's credits and its accrual since the last settlement.
func (s *Service) Balance(r *http.Request, org string) (*Balance, error) {
	ctx := r.Context()
	bal, err := s.db.OrgCredits(ctx, org)
	if errors.Is(err, store.ErrNotFound) {
		return nil, httpx.NewError(http.StatusNotFound, "not_found", "organization \""+org+"\" was not found")
	}
	if err != nil {
		return nil, err
	}
	rows, err := s.db.UnsettledRecords(ctx, org)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := &Balance{Organization: org, Balance: Credits(bal), Rates: RateView{
		CPUSecond: float64(s.rates.CPUSecond) / NanoPerCredit, GiBSecond: float64(s.rates.GiBSecond) / NanoPerCredit,
		SandboxSecond: float64(s.rates.SandboxSecond) / NanoPerCredit}}
	var running, burn int64
	for i := range rows {
		b := &rows[i]
		rate := s.rates.For(b.CPUCount, b.MemoryMB)
		running += cost(int64(b.RuntimeAt(now))-b.BilledNs, rate)
		if !b.RunningSince.IsZero() {
			burn += rate
			out.RunningSandboxes++
		}
	}
	out.RunningCredits = Credits(running)
	out.EstimatedBalance = Credits(max(bal-running, 0))
	out.BurnRatePerSecond = float64(burn) / NanoPerCredit
	return out, nil
}

func (s *Service) handleCredits(w http.ResponseWriter, r *http.Request, org string) error {
	if _, err := query(r); err != nil {
		return err
	}
	b, err := s.Balance(r, org)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, b)
	return nil
}

type grantRequest struct {
	Amount *float64 `json:"amount"`
}

func (s *Service) handleAdminGrant(w http.ResponseWriter, r *http.Request) error {
	org := mux.Vars(r)["org"]
	var req grantRequest
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if req.Amount == nil {
		return httpx.Invalid("amount", "is required: the number of credits to add, e.g. {\"amount\": 100}")
	}
	micro, err := MicroFromCredits(*req.Amount)
	if err != nil {
		return httpx.Invalid("amount", err.Error())
	}
	if _, err := s.Grant(r.Context(), org, micro); err != nil {
		return err
	}
	b, err := s.Balance(r, org)
	if err != nil {
		return err
	}
	s.log.Info("credits granted by an operator", "org", org, "credits", Credits(micro).String(), "balance", b.Balance.String())
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"organization": org, "granted": Credits(micro), "balance": b.Balance,
		"running_credits": b.RunningCredits, "estimated_balance": b.EstimatedBalance})
	return nil
}

// Grant adds micro credits to org (an operator action) and returns the new
// balance. Unknown orgs are 404; a balance over MaxBalanceMicro is 400.
func (s *Service) Grant(ctx context.Context, org string, micro int64) (int64, error) {
	bal, err := s.db.GrantCreditsMax(ctx, org, micro, MaxBalanceMicro)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, httpx.NewError(http.StatusNotFound, "not_found", "organization \""+org+"\" was not found")
	case errors.Is(err, store.ErrBalanceCap):
		return 0, httpx.Invalid("amount", fmt.Sprintf("the balance would exceed %s credits", Credits(MaxBalanceMicro)))
	}
	return bal, err
}

func (s *Service) handleAdminShow(w http.ResponseWriter, r *http.Request) error {
	b, err := s.Balance(r, mux.Vars(r)["org"])
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, b)
	return nil
}
