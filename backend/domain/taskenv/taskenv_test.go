package taskenv

import "testing"

// Every (from, to) pair of states: monotonic, with paused → ready
// the one move backwards.
func TestTransitionsEveryPair(t *testing.T) {
	allowed := map[[2]State]bool{}
	for _, m := range [][2]State{
		{StateBuilding, StateProvisioning}, {StateBuilding, StateFailed}, {StateBuilding, StateTornDown},
		{StateProvisioning, StateReady}, {StateProvisioning, StateFailed}, {StateProvisioning, StateTornDown},
		{StateReady, StatePaused}, {StateReady, StateFailed}, {StateReady, StateTornDown},
		{StatePaused, StateReady}, {StatePaused, StateFailed}, {StatePaused, StateTornDown},
	} {
		allowed[m] = true
	}
	order := map[State]int{}
	for i, s := range States {
		order[s] = i
	}
	n := 0
	for _, from := range States {
		for _, to := range States {
			want := allowed[[2]State{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
			if want && order[to] <= order[from] && (from != StatePaused || to != StateReady) {
				t.Errorf("%s → %s goes backwards", from, to)
			}
			n++
		}
	}
	if n != 36 {
		t.Fatalf("covered %d pairs", n)
	}
}

func TestSets(t *testing.T) {
	if len(AllowedTransitions) != len(States) {
		t.Fatalf("table has %d rows for %d states", len(AllowedTransitions), len(States))
	}
	for _, s := range States {
		if s.Terminal() != (len(AllowedTransitions[s]) == 0) {
			t.Errorf("%s: terminal %v disagrees with the table", s, s.Terminal())
		}
		if s.Live() == s.Terminal() {
			t.Errorf("%s is both or neither live and terminal", s)
		}
		if s.Live() && !CanTransition(s, StateTornDown) {
			t.Errorf("a live %s environment cannot be torn down", s)
		}
		if s.Transitional() != (s == StateBuilding || s == StateProvisioning) {
			t.Errorf("transitional %s", s)
		}
	}
	if State("bogus").Valid() || CanTransition("bogus", StateReady) {
		t.Error("unknown states accepted")
	}
}
