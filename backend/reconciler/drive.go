package reconciler

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// OpError is an operation the user asked for (pause, resume) that the
// provider refused; the record stays where it was and the caller reports it.
type OpError struct {
	Op  string
	Err error
}

func (e *OpError) Error() string { return e.Op + " failed: " + e.Err.Error() }
func (e *OpError) Unwrap() error { return e.Err }

// Drive advances record id until it is stable (a non-transitional phase that
// is not due) and returns it. An *OpError reports a refused pause or resume.
// It drives under the record's lease: while another replica holds it, Drive
// waits for that replica to make the record stable (or for ctx to end, with
// ctx's error and the record as it is).
func (rc *Reconciler) Drive(ctx context.Context, id string) (*store.Record, error) {
	for {
		var r *store.Record
		var lost bool
		ran, err := rc.withLease(ctx, id, func(ctx context.Context) error {
			var err error
			r, err = rc.drive(ctx, id)
			lost = errors.Is(err, store.ErrLeaseLost)
			return err
		})
		if ran && lost {
			return rc.db.GetRecord(ctx, id) // taken over mid-way: the other replica finishes
		}
		if ran || err != nil {
			return r, err
		}
		cur, err := rc.db.GetRecord(ctx, id)
		if err != nil || !cur.Phase.Transitional() {
			return cur, err
		}
		changed, done := rc.Subscribe(id)
		select {
		case <-changed:
		case <-time.After(leasePoll):
		case <-ctx.Done():
			done()
			return cur, ctx.Err()
		}
		done()
	}
}

// leasePoll is how often Drive tries again for a record another replica
// holds, when no change of the record wakes it sooner.
const leasePoll = 200 * time.Millisecond

// drive is Drive under the record's lease (in ctx).
func (rc *Reconciler) drive(ctx context.Context, id string) (*store.Record, error) {
	unlock := rc.locks.Lock(id)
	defer unlock()
	var opErr error
	for range 16 {
		r, err := rc.db.FreshRecord(ctx, id) // another replica may have written it: not the cache
		if err != nil {
			return nil, err
		}
		if !sandbox.OwnInstance(r.Kind) {
			return r, nil
		}
		if err := rc.MayAct(ctx); err != nil {
			return r, err
		}
		err = rc.step(ctx, r)
		switch {
		case errors.Is(err, errNoProgress):
			return r, opErr
		case errors.Is(err, store.ErrConflict):
			continue // someone else moved it: re-read and decide again
		case errors.As(err, new(*OpError)):
			opErr = err
			continue
		case err != nil:
			return r, err
		}
	}
	r, err := rc.db.GetRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	return r, opErr
}

// transition commits a phase change (the table decides which are legal) and
// wakes waiters. During start-up recovery, the reconciler's own moves are
// recorded with cause recovery.
func (rc *Reconciler) transition(ctx context.Context, id string, to sandbox.Phase, cause sandbox.Cause, mutate func(r *store.Record)) (*store.Record, error) {
	return rc.transitionIf(ctx, id, to, cause, func(r *store.Record) error {
		if mutate != nil {
			mutate(r)
		}
		return nil
	})
}

// transitionIf is transition with a mutate that may refuse (see store.Expect).
func (rc *Reconciler) transitionIf(ctx context.Context, id string, to sandbox.Phase, cause sandbox.Cause, mutate func(r *store.Record) error) (*store.Record, error) {
	if cause == sandbox.CauseReconciler && recovering(ctx) {
		cause = sandbox.CauseRecovery
	}
	r, err := rc.db.Transition(ctx, id, to, cause, mutate)
	if err == nil {
		rc.Changed(r)
	}
	return r, err
}

// fail sends a record to stopping with a diagnostic; stopping removes the
// instance and ends the record in failed. expect, when set, is the phase
// the failure was observed in (store.Expect).
func (rc *Reconciler) fail(ctx context.Context, r *store.Record, cause sandbox.Cause, expect sandbox.Phase, diagnostic string) error {
	now := rc.now()
	mutate := func(r *store.Record) error {
		r.StopAt(now)
		r.KillReason = sandbox.KillFailed
		r.Diagnostic = sandbox.WithEgress(diagnostic, sandbox.EgressLineOf(r.Diagnostic)) // violations stay on record
		return nil
	}
	if expect != "" {
		mutate = store.Expect(expect, mutate)
	}
	_, err := rc.transitionIf(ctx, r.ID, sandbox.PhaseStopping, cause, mutate)
	return err
}

func (rc *Reconciler) expired(r *store.Record) bool {
	return !r.EndAt.IsZero() && !rc.now().Before(r.EndAt)
}

func (rc *Reconciler) pastDeadline(r *store.Record) bool {
	return !r.PhaseDeadline.IsZero() && rc.now().After(r.PhaseDeadline)
}

func (rc *Reconciler) step(ctx context.Context, r *store.Record) error {
	now := rc.now()
	switch r.Phase {
	case sandbox.PhasePending:
		_, err := rc.transition(ctx, r.ID, sandbox.PhaseCreating, sandbox.CauseReconciler, func(r *store.Record) {
			r.PhaseDeadline = now.Add(rc.cfg.CreateDeadline)
		})
		return err
	case sandbox.PhaseCreating:
		return rc.create(ctx, r)
	case sandbox.PhaseRunning:
		if !rc.expired(r) {
			return errNoProgress
		}
		if r.AutoPause {
			_, err := rc.transition(ctx, r.ID, sandbox.PhasePausing, sandbox.CauseTTL, func(r *store.Record) {
				r.PhaseDeadline = now.Add(rc.cfg.OpDeadline)
				r.Spec.PauseKind = sandbox.PauseMemory
				if r.Spec.AutoPauseFilesystem {
					r.Spec.PauseKind = sandbox.PauseFilesystem
				}
			})
			return err
		}
		_, err := rc.transition(ctx, r.ID, sandbox.PhaseStopping, sandbox.CauseTTL, func(r *store.Record) {
			r.StopAt(r.EndAt) // the moment it should have stopped, not when we got to it
			r.KillReason = sandbox.KillTimeout
		})
		return err
	case sandbox.PhasePausing:
		return rc.pause(ctx, r)
	case sandbox.PhasePaused:
		if !rc.expired(r) {
			return errNoProgress
		}
		if r.AutoPause { // a paused auto-pause sandbox waits for connect, without a TTL
			// Only while still paused: a resumed sandbox must keep its TTL.
			_, err := rc.transitionIf(ctx, r.ID, "", "", store.Expect(sandbox.PhasePaused, func(r *store.Record) error {
				r.EndAt = time.Time{}
				return nil
			}))
			return err
		}
		_, err := rc.transition(ctx, r.ID, sandbox.PhaseStopping, sandbox.CauseTTL, func(r *store.Record) {
			r.StopAt(r.EndAt)
			r.KillReason = sandbox.KillTimeout
		})
		return err
	case sandbox.PhaseResuming:
		return rc.resume(ctx, r)
	case sandbox.PhaseStopping:
		return rc.stop(ctx, r)
	case sandbox.PhaseQueued, sandbox.PhaseDeleted, sandbox.PhaseCompleted, sandbox.PhaseFailed:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return errNoProgress
}

func (rc *Reconciler) create(ctx context.Context, r *store.Record) error {
	if rc.pastDeadline(r) {
		return rc.fail(ctx, r, sandbox.CauseReconciler, "",
			fmt.Sprintf("the sandbox did not start within %s (the backend may have restarted mid-create); delete it and create a new one", rc.cfg.CreateDeadline))
	}
	cctx, cancel := context.WithDeadline(ctx, r.PhaseDeadline)
	defer cancel()
	// A delete or kill meanwhile cancels the create (see Changed): the stop
	// then removes whatever the engine made, without waiting for it.
	rc.creating.Store(r.ID, cancel)
	defer rc.creating.Delete(r.ID)
	if err := rc.MayAct(ctx); err != nil {
		return err
	}
	inst, err := rc.prov.Create(cctx, specOf(r, rc.now()))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // shutting down: the next process resumes the create
		}
		if err := rc.MayAct(ctx); err != nil {
			return err // taken over meanwhile: what the create left is the new holder's
		}
		if cur, gerr := rc.db.FreshRecord(ctx, r.ID); gerr == nil && cur.Phase != sandbox.PhaseCreating {
			return store.ErrConflict // stopped meanwhile: re-read and stop it
		}
		if rc.cfg.RequeueDelay > 0 && compute.AtCapacity(err) {
			rc.log.Info("the provider is at its concurrency limit; the create waits in the queue and retries", "record", r.ID, "err", err)
			retry := rc.now().Add(rc.cfg.RequeueDelay)
			_, err := rc.transition(ctx, r.ID, sandbox.PhaseQueued, sandbox.CauseProvider, func(r *store.Record) {
				r.PhaseDeadline = retry // a queued record's deadline is when it may be admitted again
			})
			return err
		}
		return rc.fail(ctx, r, sandbox.CauseProvider, "", Diagnostic(err))
	}
	now := rc.now()
	_, err = rc.transition(ctx, r.ID, sandbox.PhaseRunning, sandbox.CauseReconciler, func(r *store.Record) {
		adoptInstance(r, inst)
		r.MarkRunning(now)
		r.PhaseDeadline = time.Time{}
		// The TTL buys running time: a slow start does not eat into it.
		if end := now.Add(time.Duration(r.TimeoutSec) * time.Second); r.TimeoutSec > 0 && end.After(r.EndAt) {
			r.EndAt = end
		}
	})
	if errors.Is(err, store.ErrConflict) {
		// A delete won the race: remember the instance so stopping removes it.
		_, err = rc.transition(ctx, r.ID, "", "", func(r *store.Record) {
			if r.ProviderID == "" {
				adoptInstance(r, inst)
			}
		})
	}
	return err
}

func adoptInstance(r *store.Record, inst compute.Instance) {
	r.ProviderID, r.ProviderData = inst.Ref.ID, inst.Ref.Data
	if inst.Ref.Provider != "" {
		r.Provider = inst.Ref.Provider
	}
	if inst.Endpoints != nil {
		r.Endpoints = inst.Endpoints
	}
	if inst.CPUCount > 0 {
		r.CPUCount = inst.CPUCount
	}
	if inst.MemoryMB > 0 {
		r.MemoryMB = inst.MemoryMB
	}
}

func specOf(r *store.Record, now time.Time) compute.Spec {
	var ttl time.Duration
	if !r.EndAt.IsZero() {
		ttl = r.EndAt.Sub(now)
	}
	return compute.Spec{
		RecordID: r.ID, OrgID: r.OrgID, Kind: r.Kind, Template: r.TemplateID, Image: r.Spec.Image,
		EnvVars: r.Spec.EnvVars, Metadata: r.Metadata, CPUCount: r.CPUCount, MemoryMB: r.MemoryMB,
		Command: r.Spec.Command, Timeout: ttl, AutoPause: r.AutoPause, AutoResume: r.AutoResume, Network: r.Spec.Network, Volumes: r.Spec.Volumes,
		ExposeLoopback: r.Spec.E2BSecure != nil, // created through /e2b
	}
}

func (rc *Reconciler) pause(ctx context.Context, r *store.Record) error {
	if err := rc.MayAct(ctx); err != nil {
		return err
	}
	err := rc.pauseAs(ctx, r.Ref(), r.Spec.PauseKind)
	switch {
	case err == nil, compute.KindOf(err) == compute.KindConflict:
		now := rc.now()
		_, err := rc.transition(ctx, r.ID, sandbox.PhasePaused, sandbox.CauseReconciler, func(r *store.Record) {
			r.MarkStopped(now)
			r.LastPausedAt = now
			r.PhaseDeadline = time.Time{}
			if r.AutoPause && rc.expired(r) {
				r.EndAt = time.Time{}
			}
		})
		return err
	case compute.IsNotFound(err):
		return rc.fail(ctx, r, sandbox.CauseProvider, "", "the instance disappeared (removed outside the backend) while pausing")
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if _, terr := rc.transition(ctx, r.ID, sandbox.PhaseRunning, sandbox.CauseProvider, func(r *store.Record) {
		r.PhaseDeadline = time.Time{}
	}); terr != nil && !errors.Is(terr, store.ErrConflict) {
		return terr
	}
	return &OpError{Op: "pause", Err: err}
}

// pauseAs pauses the instance the way kind says.
func (rc *Reconciler) pauseAs(ctx context.Context, ref compute.Ref, kind sandbox.PauseKind) error {
	if kind == sandbox.PauseFilesystem {
		return rc.prov.PauseFilesystem(ctx, ref)
	}
	return rc.prov.Pause(ctx, ref)
}

func (rc *Reconciler) resume(ctx context.Context, r *store.Record) error {
	if err := rc.MayAct(ctx); err != nil {
		return err
	}
	inst, err := rc.prov.Resume(ctx, r.Ref())
	switch {
	case err == nil:
		now := rc.now()
		_, err := rc.transition(ctx, r.ID, sandbox.PhaseRunning, sandbox.CauseReconciler, func(r *store.Record) {
			if inst.Ref.ID != "" {
				adoptInstance(r, inst)
			}
			r.MarkRunning(now)
			r.PhaseDeadline = time.Time{}
		})
		return err
	case compute.IsNotFound(err):
		return rc.fail(ctx, r, sandbox.CauseProvider, "", "the instance disappeared (removed outside the backend) while paused")
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if _, terr := rc.transition(ctx, r.ID, sandbox.PhasePaused, sandbox.CauseProvider, func(r *store.Record) {
		r.PhaseDeadline = time.Time{}
	}); terr != nil && !errors.Is(terr, store.ErrConflict) {
		return terr
	}
	return &OpError{Op: "resume", Err: err}
}

// stop removes the instance (keeping its last logs) and ends the record in
// the terminal phase its kill reason names.
func (rc *Reconciler) stop(ctx context.Context, r *store.Record) error {
	refs, err := rc.instancesOf(ctx, r)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if logs, err := rc.prov.Logs(lctx, ref); err == nil && logs != "" {
			if err := rc.db.SaveLogs(ctx, r.ID, logs); err != nil {
				rc.log.Warn("keeping the logs of a stopped sandbox failed", "record", r.ID, "err", err)
			}
		}
		cancel()
		if err := rc.MayAct(ctx); err != nil {
			return err
		}
		rc.keepOutput(ctx, r, ref)
		if err := rc.prov.Delete(ctx, ref); err != nil && !compute.IsNotFound(err) {
			return fmt.Errorf("removing the instance of %s: %w", r.ID, err)
		}
	}
	if s, ok := rc.prov.(compute.RecordSweeper); ok && len(refs) == 0 && r.ProviderID == "" &&
		slices.ContainsFunc(r.Timeline, func(e store.TimelineEntry) bool { return e.Phase == string(sandbox.PhaseCreating) }) {
		// A create stopped (or crashed) before any instance held what it
		// made: nothing lists it, so it is swept by the record.
		if err := s.SweepRecord(ctx, r.ID); err != nil {
			return fmt.Errorf("removing what the stopped create of %s left: %w", r.ID, err)
		}
	}
	now := rc.now()
	_, err = rc.transition(ctx, r.ID, sandbox.FinalPhase(r.KillReason), sandbox.CauseReconciler, func(r *store.Record) {
		r.MarkKilled(now, sandbox.KillDeleted)
		r.PhaseDeadline = time.Time{}
	})
	return err
}

// instancesOf finds the instance(s) of a record: by its provider id, or, when
// a crash lost the id, by the record label.
func (rc *Reconciler) instancesOf(ctx context.Context, r *store.Record) ([]compute.Ref, error) {
	if r.ProviderID != "" {
		return []compute.Ref{r.Ref()}, nil
	}
	if !slices.ContainsFunc(r.Timeline, func(e store.TimelineEntry) bool { return e.Phase == string(sandbox.PhaseCreating) }) {
		return nil, nil // deleted while queued or pending: the provider never saw it
	}
	insts, err := rc.prov.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing instances to remove %s: %w", r.ID, err)
	}
	var refs []compute.Ref
	for _, in := range insts {
		if in.RecordID == r.ID {
			refs = append(refs, in.Ref)
		}
	}
	return refs, nil
}

// Diagnostic turns a provider error into the sentence a user reads in a
// failed sandbox's diagnostic.
func Diagnostic(err error) string {
	label := map[compute.Kind]string{
		compute.KindImageMissing:  "image missing",
		compute.KindResourceLimit: "resource limit",
		compute.KindEntrypoint:    "entrypoint error",
		compute.KindNetwork:       "network policy",
		compute.KindUnavailable:   "provider unavailable",
		compute.KindAuth:          "provider credentials refused",
		compute.KindTimeout:       "timed out",
		compute.KindInvalid:       "invalid request",
	}[compute.KindOf(err)]
	if label == "" {
		label = "provider error"
	}
	return label + ": " + hostPaths.ReplaceAllString(err.Error(), "<engine storage>")
}

// hostPaths matches paths of the engine host (its data and runtime
// directories) that engine errors quote: a user has no use for them and
// they reveal the host's layout.
var hostPaths = regexp.MustCompile(`(/var/lib|/run|/var/run)/(docker|containerd|containers)[^\s"',;)]*`)
