package store

import (
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// A record stopping because its main process exited shows where it is going;
// one stopped by a delete, a TTL or credits shows deleted.
func TestRecordPublicStateWhileStopping(t *testing.T) {
	for _, c := range []struct {
		phase  sandbox.Phase
		reason string
		want   sandbox.State
	}{
		{sandbox.PhaseStopping, sandbox.KillCompleted, sandbox.StateCompleted},
		{sandbox.PhaseStopping, sandbox.KillFailed, sandbox.StateFailed},
		{sandbox.PhaseStopping, sandbox.KillDeleted, sandbox.StateDeleted},
		{sandbox.PhaseStopping, "", sandbox.StateDeleted},
		{sandbox.PhaseRunning, "", sandbox.StateRunning},
		{sandbox.PhaseCompleted, sandbox.KillCompleted, sandbox.StateCompleted},
		{sandbox.PhaseDeleted, sandbox.KillDeleted, sandbox.StateDeleted},
	} {
		r := &Record{Phase: c.phase, KillReason: c.reason}
		if got := r.PublicState(); got != c.want {
			t.Errorf("%s with kill reason %q: %s, want %s", c.phase, c.reason, got, c.want)
		}
	}
}
