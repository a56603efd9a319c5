package billing

import (
	"math"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Record is the ledger (§2) projection of a store.Record, in snake_case:
// the document's LedgerRecord (apitypes), so the server, client/ and dn
// share one shape.
type Record = apitypes.LedgerRecord

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
	return s.ViewAt(r, s.now())
}

// ViewAt projects r at now (a runtime's instance, a ledger page).
func (s *Service) ViewAt(r *store.Record, now time.Time) *Record {
	rate := s.rates.For(r.CPUCount, r.MemoryMB)
	running := cost(int64(r.RuntimeAt(now))-r.BilledNs, rate)
	state := LedgerState(r)
	v := &Record{
		ID: r.ID, SandboxKind: r.Kind, Provider: r.Provider, ProviderSandboxID: strPtr(r.ProviderID), State: apitypes.LedgerState(state),
		KillReason: strPtr(r.KillReason), TemplateID: r.TemplateID, CPUCount: r.CPUCount, MemoryMB: r.MemoryMB,
		CreatedAt: r.CreatedAt, LastStartedAt: timePtr(r.LastStartedAt), LastPausedAt: timePtr(r.LastPausedAt),
		KilledAt: timePtr(r.KilledAt), ExpiresAt: timePtr(r.EndAt), Metadata: r.Metadata,
		BilledCredits: Credits(r.BilledMicro), RunningCredits: Credits(running), EstimatedTotalCredits: Credits(r.BilledMicro + running),
		TotalRuntimeSeconds: seconds(r.RuntimeAt(now)), SessionsCount: r.Sessions,
		RuntimeID: r.RuntimeID, EnvironmentID: r.EnvironmentID, Diagnostic: r.Diagnostic, ParentID: r.ParentID,
	}
	if r.Phase == sandbox.PhaseRunning || r.Phase == sandbox.PhasePausing || r.Phase == sandbox.PhaseStopping && !r.RunningSince.IsZero() {
		v.CreditsPerSecond = float64(rate) / NanoPerCredit
	}
	if state == sandbox.LedgerKilled {
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

// LedgerState is what r reads in the ledger: a task record stopping reads
// as the state it is leaving until its provider confirmed the removal, so
// "killed" means nothing of it is left (sandbox.LedgerStateOf).
func LedgerState(r *store.Record) sandbox.LedgerState {
	return sandbox.LedgerStateOf(r.Kind, r.Phase, r.LastStartedAt, r.LastPausedAt)
}

// ledgerStates maps each ledger state to what it selects, derived from the
// same projection as LedgerState so a filter and a read never disagree.
var ledgerStates = sandbox.LedgerSelections()

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
		switch sandbox.Phase(e.Phase) {
		case sandbox.PhaseRunning:
			if since.IsZero() {
				since = e.At
			}
		case sandbox.PhasePaused, sandbox.PhaseDeleted, sandbox.PhaseCompleted, sandbox.PhaseFailed:
			if !since.IsZero() {
				add(since, e.At)
				since = time.Time{}
			}
		case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating, sandbox.PhasePausing, sandbox.PhaseResuming, sandbox.PhaseStopping:
			// as below the switch; named so that a value added to the enum is decided here
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
