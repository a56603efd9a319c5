package reconciler

import (
	"context"
	"errors"
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Observe compares the provider's instances with the records: a live record
// whose instance exited completes or fails, one whose instance vanished
// fails, and an instance whose record is gone or terminal is removed, as is
// a duplicate (see duplicate). Any replica may observe: its transitions are
// conditional on the phase observed, and its removals are of instances no
// record owns.
func (rc *Reconciler) Observe(ctx context.Context) error {
	// Records first, instances second: an instance listed after its record
	// was read as running cannot be missing by accident.
	live, err := rc.db.LiveRecords(ctx)
	if err != nil {
		return err
	}
	insts, err := rc.prov.List(ctx)
	if err != nil {
		return err
	}
	owned := make(map[string]string, len(live)) // record id -> its provider id, as read first
	for _, r := range live {
		owned[r.ID] = r.ProviderID
	}
	ids := make([]string, 0, len(insts))
	byRecord := make(map[string]compute.Instance, len(insts))
	for _, in := range insts {
		ids = append(ids, in.RecordID)
		if _, seen := byRecord[in.RecordID]; !seen || in.Ref.ID == owned[in.RecordID] {
			byRecord[in.RecordID] = in // a record's own instance over a duplicate
		}
	}
	recs, err := rc.db.RecordInstances(ctx, ids)
	if err != nil {
		return err
	}
	for _, in := range insts {
		ri, ok := recs[in.RecordID]
		switch {
		case ok && duplicate(ri, in):
			rc.log.Warn("removing a second instance of a sandbox (a replica that lost the record finished its create late)",
				"instance", in.Ref.ID, "record", in.RecordID, "kept", ri.ProviderID)
		case ok && !ri.Phase.Terminal():
			continue
		default:
			rc.log.Info("removing an instance whose sandbox record is gone or ended", "instance", in.Ref.ID, "record", in.RecordID)
		}
		if err := rc.prov.Delete(ctx, in.Ref); err != nil && !compute.IsNotFound(err) {
			rc.log.Warn("removing an orphaned instance failed; retrying next period", "instance", in.Ref.ID, "err", err)
		}
	}
	if hs, ok := rc.prov.(compute.HelperSweeper); ok {
		if err := hs.SweepHelpers(ctx); err != nil {
			rc.log.Warn("removing leftover helper containers failed; retrying next period", "err", err)
		}
	}
	rc.sweepImages(ctx)
	for _, r := range live {
		if r.Phase != sandbox.PhaseRunning && r.Phase != sandbox.PhasePaused {
			continue
		}
		in, ok := byRecord[r.ID]
		if ok {
			rc.noteEgress(ctx, r, in)
		}
		if err := rc.compare(ctx, r, in, ok); err != nil {
			rc.log.Warn("updating a sandbox from its instance failed", "record", r.ID, "err", err)
		}
	}
	return nil
}

// duplicate reports whether in is an instance labelled with a record that
// owns another one: a create a replica finished after another took the
// record over (with Docker the container name makes the two creates one;
// E2B has no names). Only in phases where the record's instance is settled:
// while it is pending, creating or resuming its provider id is about to
// change.
func duplicate(ri store.RecordInstance, in compute.Instance) bool {
	switch ri.Phase {
	case sandbox.PhaseRunning, sandbox.PhasePaused, sandbox.PhaseStopping:
		return ri.ProviderID != "" && in.Ref.ID != ri.ProviderID
	case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating, sandbox.PhasePausing, sandbox.PhaseResuming, sandbox.PhaseDeleted, sandbox.PhaseCompleted, sandbox.PhaseFailed:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return false
}

func (rc *Reconciler) observeOne(ctx context.Context, id string) {
	unlock := rc.locks.Lock(id)
	r, err := rc.db.GetRecord(ctx, id)
	if err != nil || (r.Phase != sandbox.PhaseRunning && r.Phase != sandbox.PhasePaused) || r.ProviderID == "" {
		unlock()
		return
	}
	in, err := rc.prov.Get(ctx, r.Ref())
	unlock() // compare's transitions are conditional, and repair takes the lock itself
	if err != nil && !compute.IsNotFound(err) {
		return
	}
	if err := rc.compare(ctx, r, in, err == nil); err != nil {
		rc.log.Warn("updating a sandbox from a provider event failed", "record", id, "err", err)
		return
	}
	rc.Kick(id)
}

// compare sends a running or paused record whose instance is gone or exited
// to stopping; the next Drive removes what is left and ends the record.
//
// The moves expect r's phase: they act on an observation of the record and
// its instance together, which says nothing once the record has moved on
// (e.g. resumed onto a new instance meanwhile).
func (rc *Reconciler) compare(ctx context.Context, r *store.Record, in compute.Instance, exists bool) error {
	switch {
	case !exists:
		if err := rc.fail(ctx, r, sandbox.CauseProvider, r.Phase, "the instance disappeared: it was removed outside the backend"); err != nil {
			return ignoreConflict(err)
		}
	case in.Status == compute.StatusExited && sandbox.StoppedWhilePaused(r.Phase, r.Spec.PauseKind):
		return nil // a filesystem-only pause stopped it on purpose
	case (r.Phase == sandbox.PhaseRunning && in.Status == compute.StatusPaused) ||
		(r.Phase == sandbox.PhasePaused && in.Status == compute.StatusRunning):
		return rc.repair(ctx, r.ID)
	case in.Status == compute.StatusExited:
		code := in.ExitCode
		if code != 0 && in.ExitReason == "" {
			// An instance from List has no ExitReason (Docker's list call
			// does not carry it): Get says why it ended, e.g. that the disk
			// watchdog stopped it, which the diagnostic must name.
			if full, err := rc.prov.Get(ctx, in.Ref); err == nil {
				in.ExitReason = full.ExitReason
			}
		}
		now := rc.now()
		_, err := rc.transitionIf(ctx, r.ID, sandbox.PhaseStopping, sandbox.CauseProvider, store.Expect(r.Phase, func(r *store.Record) error {
			r.StopAt(now)
			r.ExitCode = &code
			if code == 0 {
				r.KillReason = sandbox.KillCompleted
				return nil
			}
			r.KillReason = sandbox.KillFailed
			d := fmt.Sprintf("entrypoint error: the main process exited with code %d", code)
			if in.ExitReason != "" {
				d += " (" + in.ExitReason + ")"
			}
			r.Diagnostic = sandbox.WithEgress(d, sandbox.EgressLineOf(r.Diagnostic))
			return nil
		}))
		if err != nil {
			return ignoreConflict(err)
		}
	default:
		return nil
	}
	rc.Kick(r.ID)
	return nil
}

// noteEgress writes the packets the host's egress rules dropped from the
// sandbox into its diagnostic's egress line, when they changed since the
// last observation (one write per change, none while nothing changes).
// The counts come with the pass's List: nothing is read per sandbox.
func (rc *Reconciler) noteEgress(ctx context.Context, r *store.Record, in compute.Instance) {
	line := sandbox.EgressLine(in.EgressDrops)
	if line == "" || line == sandbox.EgressLineOf(r.Diagnostic) {
		return
	}
	_, err := rc.transitionIf(ctx, r.ID, "", "", store.Expect(r.Phase, func(rec *store.Record) error {
		rec.Diagnostic = sandbox.WithEgress(rec.Diagnostic, line)
		return nil
	}))
	if err != nil && !errors.Is(err, store.ErrConflict) {
		rc.log.Warn("recording a sandbox's egress violations failed; retrying next pass", "record", r.ID, "err", err)
	}
}

func ignoreConflict(err error) error {
	if errors.Is(err, store.ErrConflict) { // the record moved on meanwhile
		return nil
	}
	return err
}

// repair brings an instance whose running/paused state drifted from its
// record back to the record's (the desired state), re-checking both under
// the record's lock so it never fights an operation in progress.
// It is a provider call: only the replica holding the record's lease
// repairs (the others skip it).
func (rc *Reconciler) repair(ctx context.Context, id string) error {
	_, err := rc.withLease(ctx, id, func(ctx context.Context) error { return rc.repairLeased(ctx, id) })
	return err
}

func (rc *Reconciler) repairLeased(ctx context.Context, id string) error {
	unlock := rc.locks.Lock(id)
	defer unlock()
	r, err := rc.db.FreshRecord(ctx, id)
	if err != nil || r.ProviderID == "" {
		return err
	}
	in, err := rc.prov.Get(ctx, r.Ref())
	if err != nil {
		return nil // gone or unreachable: the next comparison handles it
	}
	if err := rc.MayAct(ctx); err != nil {
		return err
	}
	switch {
	case r.Phase == sandbox.PhaseRunning && in.Status == compute.StatusPaused:
		rc.log.Warn("the instance was paused while its record is running; resuming it", "record", id)
		_, err = rc.prov.Resume(ctx, r.Ref())
	case r.Phase == sandbox.PhasePaused && in.Status == compute.StatusRunning:
		rc.log.Warn("the instance was running while its record is paused; pausing it", "record", id)
		err = rc.pauseAs(ctx, r.Ref(), r.Spec.PauseKind)
	}
	return err
}
