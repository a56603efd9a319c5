package sandbox

import "testing"

func TestEventOf(t *testing.T) {
	cases := []struct {
		m    Move
		want string
	}{
		{Move{From: PhaseCreating, To: PhaseRunning, FirstRun: true}, EventCreated},
		{Move{From: PhasePending, To: PhaseRunning, FirstRun: true}, EventCreated}, // task records
		{Move{From: PhaseResuming, To: PhaseRunning}, EventResumed},
		{Move{From: PhasePausing, To: PhaseRunning}, ""}, // pause refused
		{Move{From: PhasePausing, To: PhasePaused}, EventPaused},
		{Move{From: PhaseResuming, To: PhasePaused}, ""}, // resume refused
		{Move{From: PhaseStopping, To: PhaseDeleted}, EventKilled},
		{Move{From: PhaseRunning, To: PhaseDeleted}, EventKilled}, // task records
		{Move{From: PhaseStopping, To: PhaseCompleted}, EventCompleted},
		{Move{From: PhaseStopping, To: PhaseFailed}, EventFailed},
		{Move{From: PhaseRunning, To: PhaseStopping}, ""},
		{Move{From: PhaseQueued, To: PhasePending}, ""},
		{Move{From: PhaseCreating, To: PhaseQueued}, ""},
		{Move{From: PhaseRunning, Configured: true}, EventUpdated},
		{Move{From: PhaseRunning}, ""},
		{Move{From: PhaseDeleted, Configured: true}, ""},
	}
	for _, c := range cases {
		if got := EventOf(c.m); got != c.want {
			t.Errorf("EventOf(%+v) = %q, want %q", c.m, got, c.want)
		}
	}
	if EventPrefix(KindTask) != "environment.lifecycle." || EventPrefix(KindRuntime) != "sandbox.lifecycle." {
		t.Error("prefixes")
	}
}
