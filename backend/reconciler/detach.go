package reconciler

import (
	"context"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Detach hands work that outlives the step running under step (a task
// environment's build, which may take minutes) the step's lease, so the
// step can return and free its lane worker while the work goes on off the
// lanes. The returned context derives from parent and carries the lease,
// which this replica keeps and renews until release is called; MayAct
// judges the work as it judges a step. ok is false when the lease was
// already lost (the record is another replica's: start nothing). A step
// without a lease (tests calling a driver directly) detaches without one.
func (rc *Reconciler) Detach(step, parent context.Context) (ctx context.Context, release func(), ok bool) {
	f, held := store.FenceFrom(step)
	if !held {
		return parent, func() {}, true
	}
	release, ok = rc.leases.retain(f)
	if !ok {
		return nil, nil, false
	}
	return store.WithFence(parent, f), release, true
}

// retain adds one local use to lease f while this replica still holds it
// (it is then given back only when every use, this one included, ended).
func (t *leaseTable) retain(f store.Fence) (release func(), ok bool) {
	unlock := t.locks.Lock(f.ID)
	defer unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.held[f.ID]
	if h == nil || h.fence != f {
		return nil, false
	}
	h.refs++
	return func() { t.release(f.ID) }, true
}
