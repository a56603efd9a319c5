package sandbox

import "testing"

// Every (from, to) pair of phases: the table allows exactly these moves and
// refuses every other, staying in a phase included.
func TestTransitionsEveryPair(t *testing.T) {
	allowed := map[[2]Phase]bool{}
	for _, m := range [][2]Phase{
		{PhaseQueued, PhasePending}, {PhaseQueued, PhaseStopping},
		{PhasePending, PhaseCreating}, {PhasePending, PhaseStopping},
		{PhaseCreating, PhaseRunning}, {PhaseCreating, PhaseQueued}, {PhaseCreating, PhaseStopping},
		{PhaseRunning, PhasePausing}, {PhaseRunning, PhaseStopping},
		{PhasePausing, PhasePaused}, {PhasePausing, PhaseRunning}, {PhasePausing, PhaseStopping},
		{PhasePaused, PhaseResuming}, {PhasePaused, PhaseStopping},
		{PhaseResuming, PhaseRunning}, {PhaseResuming, PhasePaused}, {PhaseResuming, PhaseStopping},
		{PhaseStopping, PhaseDeleted}, {PhaseStopping, PhaseCompleted}, {PhaseStopping, PhaseFailed},
	} {
		allowed[m] = true
	}
	n := 0
	for _, from := range Phases {
		for _, to := range Phases {
			want := allowed[[2]Phase{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
			n++
		}
	}
	if n != len(Phases)*len(Phases) || len(Phases) != 11 {
		t.Fatalf("covered %d pairs of %d phases", n, len(Phases))
	}
	if CanTransition("", PhaseRunning) || CanTransition(PhaseRunning, "") || CanTransition("bogus", PhaseStopping) {
		t.Error("unknown phases must not move")
	}
}

// The table and the sets agree: every phase has a row, terminal phases have
// no way out, every other phase can be deleted (stopping, or for stopping
// itself an end), and every non-terminal phase is reachable.
func TestTableAndSetsAgree(t *testing.T) {
	if len(AllowedTransitions) != len(Phases) {
		t.Fatalf("table has %d rows for %d phases", len(AllowedTransitions), len(Phases))
	}
	reached := map[Phase]bool{PhaseQueued: true, PhasePending: true} // where creates begin
	for _, from := range Phases {
		tos, ok := AllowedTransitions[from]
		if !ok {
			t.Errorf("%s has no row", from)
		}
		if from.Terminal() != (len(tos) == 0) {
			t.Errorf("%s: terminal %v but %d moves out", from, from.Terminal(), len(tos))
		}
		if !from.Terminal() && from != PhaseStopping && !CanTransition(from, PhaseStopping) {
			t.Errorf("a %s record cannot be deleted", from)
		}
		for _, to := range tos {
			if !to.Valid() || to == from {
				t.Errorf("%s → %s: not a move between two phases", from, to)
			}
			reached[to] = true
		}
	}
	for _, p := range Phases {
		if !reached[p] {
			t.Errorf("%s is unreachable", p)
		}
	}
	for _, c := range []struct {
		name string
		set  []Phase
		is   func(Phase) bool
	}{{"terminal", Terminal, Phase.Terminal}, {"live", Live, Phase.Live}, {"starting", Starting, Phase.Starting},
		{"transitional", Transitional, Phase.Transitional}} {
		for _, p := range Phases {
			if c.is(p) != in(p, c.set) {
				t.Errorf("%s: %s disagrees with its set", c.name, p)
			}
		}
	}
	for _, p := range Phases {
		if p.Terminal() == in(p, NonTerminal) {
			t.Errorf("%s is both or neither terminal and non-terminal", p)
		}
		if p.Live() != (in(p, NonTerminal) && p != PhaseStopping) {
			t.Errorf("live %s: every non-terminal phase but stopping", p)
		}
		if in(p, Holding) != (in(p, NonTerminal) && p != PhaseQueued) {
			t.Errorf("holding %s: every non-terminal phase but queued", p)
		}
	}
	for _, r := range []string{KillDeleted, KillTimeout, KillCompleted, KillFailed, KillInsufficientCredits, KillReset, KillTornDown, ""} {
		if f := FinalPhase(r); !CanTransition(PhaseStopping, f) {
			t.Errorf("kill reason %q ends in %s, which stopping cannot reach", r, f)
		}
	}
}

func TestCauses(t *testing.T) {
	for _, c := range []Cause{"user", "ttl", "credits", "reconciler", "recovery", "provider", "admission"} {
		if !c.Valid() {
			t.Errorf("%s should be a cause", c)
		}
	}
	if Cause("").Valid() || Cause("cron").Valid() {
		t.Error("unknown causes must be refused")
	}
}

// A record starts before the provider's create (queued or pending), so no
// record is born mid-life (creating, running, ended).
func TestStartPhases(t *testing.T) {
	for _, p := range Phases {
		if CanStartIn(p) != in(p, StartPhases) {
			t.Errorf("CanStartIn(%s) disagrees with StartPhases", p)
		}
		if CanStartIn(p) && (!p.Starting() || p == PhaseCreating) {
			t.Errorf("%s is a start phase but not a phase before the provider's create", p)
		}
	}
	if CanStartIn("") || CanStartIn(PhaseRunning) {
		t.Error("an empty or running phase is no start")
	}
}

// A record of any kind (task environments' included) ends only through
// stopping: no phase but stopping moves to a terminal phase, so a record
// never reads ended before its stop (the provider's removal) was carried
// out, and no live phase jumps from pending to running without a create.
func TestEndsOnlyThroughStopping(t *testing.T) {
	for _, from := range Phases {
		for _, to := range AllowedTransitions[from] {
			if to.Terminal() && from != PhaseStopping {
				t.Errorf("%s → %s ends a record without stopping", from, to)
			}
		}
	}
	for _, to := range []Phase{PhaseRunning, PhaseFailed, PhaseDeleted} {
		if CanTransition(PhasePending, to) {
			t.Errorf("pending → %s skips creating and stopping", to)
		}
	}
}
