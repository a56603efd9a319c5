package ledger

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Record is the ledger (§2) projection of a store.Record, in snake_case.
type Record struct {
	ID                    string            `json:"id"`
	SandboxKind           string            `json:"sandbox_kind"`
	Provider              string            `json:"provider"`
	ProviderSandboxID     *string           `json:"provider_sandbox_id"`
	State                 string            `json:"state"`
	KillReason            *string           `json:"kill_reason"`
	TemplateID            string            `json:"template_id"`
	CPUCount              int               `json:"cpu_count"`
	MemoryMB              int               `json:"memory_mb"`
	CreatedAt             time.Time         `json:"created_at"`
	LastStartedAt         *time.Time        `json:"last_started_at"`
	LastPausedAt          *time.Time        `json:"last_paused_at"`
	KilledAt              *time.Time        `json:"killed_at"`
	ExpiresAt             *time.Time        `json:"expires_at"`
	Metadata              map[string]string `json:"metadata"`
	BilledCredits         Credits           `json:"billed_credits"`
	RunningCredits        Credits           `json:"running_credits"`
	EstimatedTotalCredits Credits           `json:"estimated_total_credits"`
	CreditsPerSecond      float64           `json:"credits_per_second"`
	TotalRuntimeSeconds   float64           `json:"total_runtime_seconds"`
	Sessions              int               `json:"sessions_count"`
	RuntimeID             string            `json:"runtime_id,omitempty"`
	EnvironmentID         string            `json:"environment_id,omitempty"`
	Diagnostic            string            `json:"diagnostic,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// View projects r at the service's now.
func (s *Service) View(r *store.Record) *Record {
	return s.viewAt(r, s.now())
}

func (s *Service) viewAt(r *store.Record, now time.Time) *Record {
	rate := s.rates.For(r.CPUCount, r.MemoryMB)
	running := cost(int64(r.RuntimeAt(now))-r.BilledNs, rate)
	state := r.Phase.LedgerState()
	v := &Record{
		ID: r.ID, SandboxKind: r.Kind, Provider: r.Provider, ProviderSandboxID: strPtr(r.ProviderID), State: state,
		KillReason: strPtr(r.KillReason), TemplateID: r.TemplateID, CPUCount: r.CPUCount, MemoryMB: r.MemoryMB,
		CreatedAt: r.CreatedAt, LastStartedAt: timePtr(r.LastStartedAt), LastPausedAt: timePtr(r.LastPausedAt),
		KilledAt: timePtr(r.KilledAt), ExpiresAt: timePtr(r.EndAt), Metadata: r.Metadata,
		BilledCredits: Credits(r.BilledMicro), RunningCredits: Credits(running), EstimatedTotalCredits: Credits(r.BilledMicro + running),
		TotalRuntimeSeconds: seconds(r.RuntimeAt(now)), Sessions: r.Sessions,
		RuntimeID: r.RuntimeID, EnvironmentID: r.EnvironmentID, Diagnostic: r.Diagnostic,
	}
	if r.Phase == store.PhaseRunning || r.Phase == store.PhasePausing || r.Phase == store.PhaseStopping && !r.RunningSince.IsZero() {
		v.CreditsPerSecond = float64(rate) / NanoPerCredit
	}
	if state == "killed" {
		v.ExpiresAt = nil
	}
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	return v
}

// seconds renders a duration as seconds with millisecond precision.
func seconds(d time.Duration) float64 {
	return math.Round(d.Seconds()*1000) / 1000
}

// ledgerStates maps each ledger state to the phases it projects, derived
// from Phase.LedgerState so the two never disagree.
var ledgerStates = func() map[string][]store.Phase {
	all := []store.Phase{store.PhaseQueued, store.PhasePending, store.PhaseCreating, store.PhaseRunning, store.PhasePausing, store.PhasePaused,
		store.PhaseResuming, store.PhaseStopping, store.PhaseDeleted, store.PhaseCompleted, store.PhaseFailed}
	m := map[string][]store.Phase{}
	for _, p := range all {
		m[p.LedgerState()] = append(m[p.LedgerState()], p)
	}
	return m
}()

var kinds = []string{store.KindRuntime, store.KindTask, store.KindWorld}

// splitValues accepts repeated and comma-separated query values.
func splitValues(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func parseLedgerStates(vals []string) ([]store.Phase, error) {
	var phases []store.Phase
	for _, st := range splitValues(vals) {
		ps, ok := ledgerStates[st]
		if !ok {
			return nil, queryErr("state", fmt.Sprintf("unknown state %q; use starting, running, paused or killed (repeat the parameter or separate values with commas)", st))
		}
		phases = append(phases, ps...)
	}
	return phases, nil
}

func parseKinds(vals []string) ([]string, error) {
	out := splitValues(vals)
	for _, k := range out {
		if !slices.Contains(kinds, k) {
			return nil, queryErr("kind", fmt.Sprintf("unknown sandbox kind %q; use runtime, task or world", k))
		}
	}
	return out, nil
}

// query parses the query string strictly (a malformed one is 400, not
// silently dropped) and rejects parameters outside allowed.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, queryErr("query", "the query string is malformed: "+err.Error())
	}
	for k := range q {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, queryErr(k, "unknown query parameter; this route takes none")
			}
			return nil, queryErr(k, "unknown query parameter; use "+strings.Join(allowed, ", "))
		}
	}
	return q, nil
}

// queryErr is a 400 naming a query parameter.
func queryErr(param, msg string) error {
	return &httpx.Error{Code: 400, Type: "validation_error", Detail: param + ": " + msg,
		Errors: []httpx.FieldError{{Loc: []any{"query", param}, Msg: msg, Type: "value_error"}}}
}

// Cursors are opaque to clients: base64url of "<kind>:<seq>", where seq is
// the last row of the page. Paging by seq keeps a cursor stable while rows
// are inserted (new rows get larger seqs and appear on later pages).
func encodeCursor(kind string, seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strconv.FormatInt(seq, 10)))
}

func decodeCursor(kind, c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), kind+":"); ok {
			if seq, err := strconv.ParseInt(rest, 10, 64); err == nil && seq >= 0 {
				return seq, nil
			}
		}
	}
	return 0, queryErr("cursor", "not a cursor returned as next_cursor by this listing; restart the listing without it")
}

// parseLimit reads limit (1..max, default def).
func parseLimit(v string, def, maxLimit int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, queryErr("limit", fmt.Sprintf("must be an integer between 1 and %d", maxLimit))
	}
	return n, nil
}

// monthSeconds is how long the record ran inside [from, now), from its
// timeline: it accrues from entering running until it is paused or ends
// (pausing and stopping still run), capped by its accounted runtime.
func monthSeconds(u store.UsageSpan, from, now time.Time) time.Duration {
	var total time.Duration
	var since time.Time
	add := func(a, b time.Time) {
		if a.Before(from) {
			a = from
		}
		if b.After(now) {
			b = now
		}
		if b.After(a) {
			total += b.Sub(a)
		}
	}
	for _, e := range u.Timeline {
		switch store.Phase(e.Phase) {
		case store.PhaseRunning:
			if since.IsZero() {
				since = e.At
			}
		case store.PhasePaused, store.PhaseDeleted, store.PhaseCompleted, store.PhaseFailed:
			if !since.IsZero() {
				add(since, e.At)
				since = time.Time{}
			}
		}
	}
	if !since.IsZero() && !u.RunningSince.IsZero() {
		add(since, now)
	}
	runtime := time.Duration(u.RuntimeNs)
	if !u.RunningSince.IsZero() && now.After(u.RunningSince) {
		runtime += now.Sub(u.RunningSince)
	}
	return min(total, runtime)
}
