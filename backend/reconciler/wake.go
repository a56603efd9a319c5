package reconciler

import (
	"context"
	"time"
)

// nextSweep is how long the loop waits for its next deadline sweep: the
// interval, or less when a sandbox's TTL passes sooner, so that its stop is
// decided at its endAt rather than up to an interval later. The wait is
// read from the database after every sweep (never kept as per-record
// timers), so it stays level-triggered: a TTL set later, here or on another
// replica, is caught by the next sweep at the latest.
func (rc *Reconciler) nextSweep(ctx context.Context) time.Duration {
	wait := rc.cfg.Interval
	if rc.sb == nil {
		return wait
	}
	now := rc.now()
	next, err := rc.db.NextExpiry(ctx, now)
	if err != nil || next.IsZero() {
		return wait
	}
	return min(wait, max(next.Sub(now), minSweepWait))
}

// minSweepWait spaces sweeps when many TTLs pass close together: their
// stops are then decided in one sweep (one transaction) rather than one
// sweep each.
const minSweepWait = 10 * time.Millisecond
