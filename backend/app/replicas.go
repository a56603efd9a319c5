package app

import (
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// wireReplicas hands the changes other replicas commit (PostgreSQL; nothing
// on SQLite) to what waits on them here: the record's long polls and the
// reconciler (RemoteChanged), the admission queue when a record ended (room
// freed) or was queued, and task environment waiters. When changes may have
// been missed, everything waiting re-reads and a sweep runs.
func (a *App) wireReplicas() {
	a.DB.OnRemoteChange(func(c store.RemoteChange) {
		a.Reconciler.RemoteChanged(c)
		if c.Phase.Terminal() || c.Phase == sandbox.PhaseQueued {
			a.Admission.Wake()
		}
	})
	a.DB.OnRemoteTaskEnvChange(a.Tasks.RemoteChanged)
	a.DB.OnResync(func() {
		a.Reconciler.Resync()
		a.Admission.Wake()
		a.Tasks.Resync()
	})
}
