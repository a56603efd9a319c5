package reconciler

import (
	"context"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Changes committed by other replicas sharing the database (PostgreSQL),
// reported by the store's listener (store.DB.OnRemoteChange). They reach
// this replica's waiters and loop as its own changes do through Changed,
// except that the hooks of the replica that made the change (OnChange:
// billing, metrics) are not run again here.

// remoteKicks bounds the kicks waiting for the remote kicker; past it a
// sweep catches up instead.
const remoteKicks = 4096

// RemoteChanged is the store listener's hook for a record another replica
// changed. It runs on the listener's goroutine, so it never blocks nor reads
// the store: it wakes the record's waiters (waitReady, ?wait=), cancels a
// create in flight here if the record is now stopping or ended (as Changed
// does), and queues a kick when the record is owed work.
func (rc *Reconciler) RemoteChanged(c store.RemoteChange) {
	if c.Phase == sandbox.PhaseStopping || c.Phase.Terminal() {
		if cancel, ok := rc.creating.Load(c.ID); ok {
			cancel.(context.CancelFunc)()
		}
	}
	rc.notes.Notify(c.ID)
	if c.Phase.Transitional() && rc.sb != nil {
		select {
		case rc.remote <- c.ID:
		default:
			rc.SweepSoon()
		}
	}
}

// Resync is the store listener's hook for changes that may have been
// missed (its connection was lost, or is back): every waiter re-reads, and a
// sweep finds the records owed work.
func (rc *Reconciler) Resync() {
	rc.notes.NotifyAll()
	rc.SweepSoon()
}

// remoteKicker kicks the records RemoteChanged queued, off the listener's
// goroutine (a kick reads the record to pick its lane).
func (rc *Reconciler) remoteKicker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-rc.remote:
			rc.Kick(id)
		}
	}
}
