package store

import "testing"

// A record stopping because its main process exited shows where it is going;
// one stopped by a delete, a TTL or credits shows deleted.
func TestRecordPublicStateWhileStopping(t *testing.T) {
	for _, c := range []struct {
		phase  Phase
		reason string
		want   string
	}{
		{PhaseStopping, KillCompleted, "completed"},
		{PhaseStopping, KillFailed, "failed"},
		{PhaseStopping, KillDeleted, "deleted"},
		{PhaseStopping, "", "deleted"},
		{PhaseRunning, "", "running"},
		{PhaseCompleted, KillCompleted, "completed"},
		{PhaseDeleted, KillDeleted, "deleted"},
	} {
		r := &Record{Phase: c.phase, KillReason: c.reason}
		if got := r.PublicState(); got != c.want {
			t.Errorf("%s with kill reason %q: %s, want %s", c.phase, c.reason, got, c.want)
		}
	}
}
