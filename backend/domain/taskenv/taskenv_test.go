package taskenv

import (
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Every phase of the record projects onto one state; the starting phases
// onto the environment's step, a stopping record onto what it showed (its
// containers may still run: it shows an end only once the record ended).
func TestOfEveryPhase(t *testing.T) {
	want := map[sandbox.Phase]State{
		sandbox.PhaseQueued: StateBuilding, sandbox.PhasePending: StateBuilding, sandbox.PhaseCreating: StateBuilding,
		sandbox.PhaseRunning: StateReady, sandbox.PhasePausing: StateReady,
		sandbox.PhasePaused: StatePaused, sandbox.PhaseResuming: StatePaused,
		sandbox.PhaseStopping: StateTornDown, sandbox.PhaseDeleted: StateTornDown, sandbox.PhaseCompleted: StateTornDown,
		sandbox.PhaseFailed: StateFailed,
	}
	if len(want) != len(sandbox.Phases) {
		t.Fatalf("%d phases projected of %d", len(want), len(sandbox.Phases))
	}
	for _, p := range sandbox.Phases {
		if got := Of(p, "", ""); got != want[p] {
			t.Errorf("Of(%s) = %s, want %s", p, got, want[p])
		}
		// The step matters only while the record is starting (and stopping
		// keeps it).
		prov := Of(p, "", StateProvisioning)
		if (p.Starting() || p == sandbox.PhaseStopping) != (prov == StateProvisioning) {
			t.Errorf("Of(%s, provisioning) = %s", p, prov)
		}
		// A live record shows a live state, an ended one a terminal state.
		if got := Of(p, "", StateReady); p != sandbox.PhaseStopping && got.Live() != p.Live() {
			t.Errorf("%s (live %v) projects onto %s (live %v)", p, p.Live(), got, got.Live())
		}
		if p != sandbox.PhaseStopping && Of(p, "", StateProvisioning).Transitional() != p.Starting() {
			t.Errorf("%s: transitional states are exactly the starting phases", p)
		}
	}
	for _, shown := range Live {
		for _, r := range []string{"", sandbox.KillFailed, sandbox.KillTornDown} {
			if got := Of(sandbox.PhaseStopping, r, shown); got != shown {
				t.Errorf("stopping (%s) after %s shows %s: an environment shows its end only once its record ended", r, shown, got)
			}
		}
	}
	if got := Of(sandbox.PhaseStopping, sandbox.KillFailed, ""); got != StateFailed {
		t.Errorf("a record stopping for a failure shows %s, want failed", got)
	}
	for _, r := range []string{sandbox.KillTornDown, sandbox.KillTimeout, sandbox.KillInsufficientCredits, sandbox.KillDeleted} {
		if got := Of(sandbox.PhaseStopping, r, ""); got != StateTornDown {
			t.Errorf("stopping (%s) shows %s, want torn_down", r, got)
		}
	}
}

// Every state is reached by some phase, and the sets agree.
func TestSets(t *testing.T) {
	reached := map[State]bool{}
	for _, p := range sandbox.Phases {
		for _, step := range []State{"", StateBuilding, StateProvisioning} {
			for _, r := range []string{"", sandbox.KillFailed} {
				reached[Of(p, r, step)] = true
			}
		}
	}
	for _, s := range States {
		if !reached[s] {
			t.Errorf("no phase projects onto %s", s)
		}
		if s.Live() == s.Terminal() {
			t.Errorf("%s is both or neither live and terminal", s)
		}
		if s.Transitional() != (s == StateBuilding || s == StateProvisioning) {
			t.Errorf("transitional %s", s)
		}
	}
	if State("bogus").Valid() {
		t.Error("unknown states accepted")
	}
}
