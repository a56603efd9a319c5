package sandbox

import (
	"slices"
	"testing"
	"time"
)

func TestPublicAndLedgerStates(t *testing.T) {
	want := map[Phase][2]string{
		PhaseQueued: {"starting", "starting"}, PhasePending: {"starting", "starting"}, PhaseCreating: {"starting", "starting"},
		PhaseRunning: {"running", "running"}, PhasePausing: {"running", "running"},
		PhasePaused: {"paused", "paused"}, PhaseResuming: {"paused", "paused"},
		PhaseStopping: {"deleted", "killed"}, PhaseDeleted: {"deleted", "killed"},
		PhaseCompleted: {"completed", "killed"}, PhaseFailed: {"failed", "killed"},
	}
	for _, p := range Phases {
		if got := [2]string{string(p.PublicState()), string(p.LedgerState())}; got != want[p] {
			t.Errorf("%s projects to %v, want %v", p, got, want[p])
		}
		// Every phase is found again through the public state it projects to.
		ps, ok := PhasesOf(p.PublicState())
		if !ok || !in(p, ps) {
			t.Errorf("PhasesOf(%s) misses %s", p.PublicState(), p)
		}
		if !in(p, LedgerPhases()[p.LedgerState()]) {
			t.Errorf("LedgerPhases misses %s", p)
		}
	}
	for _, c := range []struct {
		reason string
		want   State
	}{{KillCompleted, StateCompleted}, {KillFailed, StateFailed}, {KillDeleted, StateDeleted}, {KillTimeout, StateDeleted}, {"", StateDeleted}} {
		if got := PublicState(PhaseStopping, c.reason); got != c.want {
			t.Errorf("stopping with kill reason %q shows %s, want %s", c.reason, got, c.want)
		}
		ps, _ := PhasesOf(c.want)
		if !in(PhaseStopping, ps) {
			t.Errorf("listing %s must read stopping records", c.want)
		}
	}
	if _, ok := PhasesOf("bogus"); ok {
		t.Error("unknown public state accepted")
	}
}

// A stopping task record reads as the state it is leaving, by its clocks;
// other kinds read killed. Every reading is found again through the
// selection of the state it reads.
func TestLedgerStateOfStopping(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		kind                string
		lastStart, lastStop time.Time
		want                LedgerState
	}{
		{KindTask, time.Time{}, time.Time{}, LedgerStarting},
		{KindTask, t0, time.Time{}, LedgerRunning},
		{KindTask, t0.Add(time.Second), t0, LedgerRunning}, // resumed
		{KindTask, t0, t0.Add(time.Second), LedgerPaused},
		{KindRuntime, t0, time.Time{}, LedgerKilled},
		{KindWorld, time.Time{}, time.Time{}, LedgerKilled},
	} {
		got := LedgerStateOf(c.kind, PhaseStopping, c.lastStart, c.lastStop)
		if got != c.want {
			t.Errorf("stopping %s (started %v, paused %v) reads %s, want %s", c.kind, c.lastStart, c.lastStop, got, c.want)
		}
		if l := LeavingOf(c.kind, c.lastStart, c.lastStop); !slices.Contains(LedgerSelections()[got].Stopping, l) {
			t.Errorf("the selection of %s misses stopping records leaving %d", got, l)
		}
		if in(PhaseStopping, LedgerSelections()[got].Phases) {
			t.Errorf("%s selects every stopping record", got)
		}
	}
	// Other phases read as their phase does, whatever the kind.
	for _, p := range Phases {
		if p == PhaseStopping {
			continue
		}
		if got := LedgerStateOf(KindTask, p, t0, time.Time{}); got != p.LedgerState() || !in(p, LedgerSelections()[got].Phases) {
			t.Errorf("%s reads %s", p, got)
		}
	}
}
