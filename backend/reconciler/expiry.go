package reconciler

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// expiryBatch bounds the stops committed in one transaction (on SQLite it
// holds the one writer meanwhile).
const expiryBatch = 256

// decideExpiries commits the stop of the expired sandboxes among ids at
// once (database writes, no engine call), so each counts as ended in every
// view from its endAt on, however busy the workers that remove instances
// are. The stops of one sweep share a transaction: when many TTLs pass
// together (10k live records, a fan-out's batch expiring) they cost one
// commit, not one each. Each still goes through the transition gate
// (store.TransitionTx, cause ttl), conditional on the record's version.
func (rc *Reconciler) decideExpiries(ctx context.Context, ids []string) {
	var due []string
	for _, id := range ids {
		r, err := rc.db.GetRecord(ctx, id) // usually cached: no query
		if err == nil && !r.AutoPause && rc.expired(r) && (r.Phase == sandbox.PhaseRunning || r.Phase == sandbox.PhasePaused) {
			due = append(due, id)
		}
	}
	for start := 0; start < len(due); start += expiryBatch {
		var stopped []*store.Record
		err := rc.db.Tx(ctx, func(tx *sql.Tx) error {
			stopped = stopped[:0]
			for _, id := range due[start:min(start+expiryBatch, len(due))] {
				r, err := store.TransitionTx(ctx, tx, id, sandbox.PhaseStopping, sandbox.CauseTTL, rc.expire)
				switch {
				case err == nil:
					stopped = append(stopped, r)
				case errors.Is(err, store.ErrConflict), errors.Is(err, errNoProgress), errors.Is(err, store.ErrIllegalTransition), errors.Is(err, store.ErrNotFound):
					// moved meanwhile (extended, paused, deleted): the Drive loop decides
				default:
					return err
				}
			}
			return nil
		})
		if err != nil {
			if ctx.Err() == nil {
				rc.log.Warn("stopping expired sandboxes failed; the next sweep retries", "records", len(due[start:min(start+expiryBatch, len(due))]), "err", err)
			}
			continue
		}
		for _, r := range stopped {
			rc.Changed(r)
		}
	}
}

// expire is the mutation of a TTL stop, applied to the record as read in
// the stop's transaction: only a running or paused record whose TTL (still)
// passed is stopped, billed up to its endAt.
func (rc *Reconciler) expire(r *store.Record) error {
	if r.AutoPause || !rc.expired(r) || (r.Phase != sandbox.PhaseRunning && r.Phase != sandbox.PhasePaused) {
		return errNoProgress // extended, auto-paused or moved meanwhile
	}
	r.StopAt(r.EndAt)
	r.KillReason = sandbox.KillTimeout
	return nil
}
