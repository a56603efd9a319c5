package sandbox

import "testing"

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
