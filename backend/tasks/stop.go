package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// An environment ends as a sandbox does: its record moves to stopping (the
// decision, with its kill reason; billing ends there), the engine removes
// everything of the environment, and only once the engine confirmed that
// does the record move to the end its kill reason names (deleted, failed).
// A record past stopping with containers still present never exists; a
// crash or a refused removal in between leaves the record stopping, which
// the driver finishes from the database (Step → finishStop).

// fail ends environment id for a failure worded msg: its record to stopping
// (kill reason failed, msg as diagnostic and as the environment's error),
// then its removal and end (the environment then shows failed). expect, when set, is the
// state the failure was decided in: the change applies only while the
// environment is still there. An environment whose record is already
// ending for another reason keeps that end.
func (s *Service) fail(id string, expect taskenv.State, cause sandbox.Cause, msg string) {
	ctx, cancel := s.bg(2 * time.Minute)
	defer cancel()
	now := s.now()
	_, err := s.apply(ctx, id, change{expect: expect, env: func(e *Env) {
		e.Error = msg
		e.Deadline = time.Time{}
	}, rec: sandbox.PhaseStopping, cause: cause, recMut: func(r *store.Record) {
		r.StopAt(now)
		r.KillReason = sandbox.KillFailed
		r.Diagnostic = msg
	}})
	switch {
	case errors.Is(err, errConflict), errors.Is(err, errRecordConflict):
		return // it moved on, or is ending already: that end stands
	case err != nil:
		s.log.Error("marking a task environment failed", "environment", id, "error", err)
		return
	}
	s.log.Info("task environment failed", "environment", id, "error", msg)
	if _, err := s.finishStop(ctx, id, cause, ""); err != nil {
		s.log.Warn("removing a failed environment's resources; the driver retries", "environment", id, "error", err)
	}
}

// teardown ends a live environment: its record to stopping with reason
// (errMsg, when set, as the environment's error), its worker stopped, then
// its removal and end, when the environment shows torn_down with detail. It
// returns the environment as it is after the change (or as it was, when it
// was already over). A removal that fails is logged and left to the
// driver: the record stays stopping until the engine confirms, and the
// environment shows what it showed until then.
func (s *Service) teardown(ctx context.Context, id string, cause sandbox.Cause, reason, detail, errMsg string) (*Env, error) {
	now := s.now()
	e, err := s.apply(ctx, id, change{envIfMoved: true, // a record already ending keeps that end's error
		env: func(e *Env) {
			e.Error = errMsg
			e.Deadline = time.Time{}
		},
		rec: sandbox.PhaseStopping, cause: cause, recTolerant: true, recMut: func(r *store.Record) {
			r.StopAt(now)
			if r.KillReason == "" {
				r.KillReason = reason
			}
		}})
	if err != nil && !errors.Is(err, errConflict) {
		return nil, err
	}
	s.stopWorker(ctx, id, errStopped)
	if s.workerRunning(id) {
		// Still bringing services up (ctx ended first): removing now could
		// leave what it starts next. The driver finishes once it stopped.
		return e, nil
	}
	if e2, err := s.finishStop(ctx, id, cause, detail); err != nil {
		s.log.Warn("removing a torn down environment's resources; the driver retries", "environment", id, "error", err)
	} else if e2 != nil {
		e = e2
	}
	return e, nil
}

// finishStop carries out the stop of environment id: the engine removes
// everything of it, and once the engine confirmed, its stopping record moves
// to the end its kill reason names (with cause), the environment's timeline
// noting detail (by default what the kill reason says). A record already
// ended is left as it is (the environment shows its end). The error is the
// engine's refusal or a database failure; the record then stays stopping.
func (s *Service) finishStop(ctx context.Context, id string, cause sandbox.Cause, detail string) (*Env, error) {
	e, err := s.getEnv(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.mayAct(ctx); err != nil {
		return e, err
	}
	rctx, cancel := s.bg(2 * time.Minute)
	defer cancel()
	if err := s.engine.Remove(rctx, id); err != nil {
		return e, fmt.Errorf("removing environment %s: %w", id, err)
	}
	ctx = context.WithoutCancel(ctx) // what was removed is committed, whoever stopped waiting
	r, err := s.db.FreshRecord(ctx, e.RecordID)
	if errors.Is(err, store.ErrNotFound) {
		return e, nil
	}
	if err != nil {
		return e, err
	}
	switch {
	case r.Phase.Terminal() && e.State.Live():
		return s.apply(ctx, id, change{}) // ended by someone else: show it
	case r.Phase != sandbox.PhaseStopping:
		return e, nil
	}
	if detail == "" {
		detail = endDetail(r.KillReason)
	}
	now := s.now()
	e2, err := s.apply(ctx, id, change{detail: detail, rec: sandbox.FinalPhase(r.KillReason), cause: cause, recMut: func(r *store.Record) {
		r.MarkKilled(now, sandbox.KillDeleted)
		r.PhaseDeadline = time.Time{}
	}})
	if errors.Is(err, errRecordConflict) {
		return e2, nil // ended meanwhile by another step
	}
	if err == nil {
		s.ReleaseCheckpoint(r) // a fork's: its checkpoint's images go with the last fork of it
	}
	return e2, err
}

// endDetail is the timeline note of an environment's end by kill reason.
func endDetail(killReason string) string {
	switch killReason {
	case sandbox.KillTornDown:
		return "deleted through the API"
	case sandbox.KillTimeout:
		return "expired (timeout_sec)"
	case sandbox.KillFailed:
		return ""
	}
	return "ledger record ended"
}

// endedMessage is the error of an environment whose record someone else
// ended (the credits system), by kill reason; "" for the ends the
// environment's own stops decide (a delete, its timeout, a failure), which
// word their own.
func endedMessage(killReason string) string {
	switch killReason {
	case sandbox.KillTornDown, sandbox.KillTimeout, sandbox.KillFailed:
		return ""
	case sandbox.KillInsufficientCredits:
		return "torn down: the organization ran out of credits (insufficient_credits)"
	case "":
		return "torn down: its ledger record was ended"
	}
	return "torn down: its ledger record was ended (" + killReason + ")"
}
