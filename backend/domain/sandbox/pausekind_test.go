package sandbox

import "testing"

func TestPauseKindAfter(t *testing.T) {
	cases := []struct {
		to   Phase
		kind PauseKind
		want PauseKind
	}{
		{PhasePausing, "", PauseMemory},
		{PhasePausing, PauseFilesystem, PauseFilesystem},
		{PhasePaused, PauseFilesystem, PauseFilesystem},
		{PhaseResuming, PauseFilesystem, PauseFilesystem},
		{PhaseRunning, PauseFilesystem, ""},
		{PhaseStopping, PauseMemory, ""},
		{PhaseDeleted, PauseFilesystem, ""},
	}
	for _, c := range cases {
		if got := PauseKindAfter(c.to, c.kind); got != c.want {
			t.Errorf("PauseKindAfter(%s, %q) = %q, want %q", c.to, c.kind, got, c.want)
		}
	}
	f := false
	if PauseKindOf(nil) != PauseMemory || PauseKindOf(&f) != PauseFilesystem {
		t.Error("PauseKindOf")
	}
	if !StoppedWhilePaused(PhasePaused, PauseFilesystem) || StoppedWhilePaused(PhasePaused, PauseMemory) || StoppedWhilePaused(PhaseRunning, PauseFilesystem) {
		t.Error("StoppedWhilePaused")
	}
}
