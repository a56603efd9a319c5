package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// driver is the reconciler's Driver of task environments, which moves their
// ledger records like every other kind: pending → creating (the build and
// provision, run off the lanes in the build pool) → running, and every end
// through stopping, committed as ended only once the engine confirmed that
// everything of the environment is gone. Everything it decides is read from
// the database (the record's phase, the environment's step, persisted
// deadlines, expires_at), so a restarted backend picks up where a killed one
// stopped:
//   - a record left stopping (a crash between the decision and the removal,
//     or the credits system ending it) has its environment removed, then
//     ends;
//   - a record left pausing or resuming finishes its pause or resume;
//   - building/provisioning past their persisted deadline fail, the others
//     are built and provisioned (after a restart: resumed);
//   - ready/paused past expires_at are torn down (reason timeout);
//   - ready/paused whose containers died or vanished fail, with logs (Observe);
//   - containers and networks of this owner whose environment is over or
//     unknown are removed (Observe).
type driver struct{ s *Service }

var _ reconciler.Driver = driver{}

func (driver) Name() string { return "task environments" }

// Watch follows the engine's events (they wake GET /status?wait= callers).
func (d driver) Watch(ctx context.Context) { d.s.engine.Watch(ctx) }

// Recover fails the builds and provisions whose deadline passed while no
// backend ran (saying so), then compares the engine with the environments.
// Everything else a killed process left is due and goes through the lanes.
func (d driver) Recover(ctx context.Context) error {
	s := d.s
	s.engine.Negotiate(ctx)
	envs, err := s.liveEnvs(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	for _, le := range envs {
		if le.State.Transitional() && !recordEnded(le.RecordPhase) && s.pastDeadline(le.Env, now) {
			s.fail(le.ID, le.State, sandbox.CauseRecovery, s.deadlineMessage(le.State, nil)+" (the backend restarted while it was in progress)")
		}
	}
	return d.Observe(ctx)
}

func (s *Service) pastDeadline(e *Env, now time.Time) bool {
	return !e.Deadline.IsZero() && !now.Before(e.Deadline)
}

func (s *Service) expired(e *Env, now time.Time) bool {
	return !e.ExpiresAt.IsZero() && !now.Before(e.ExpiresAt)
}

// opInFlight: the record waits for the engine to pause or resume.
func opInFlight(p sandbox.Phase) bool { return p == sandbox.PhasePausing || p == sandbox.PhaseResuming }

// due reports whether the driver owes le work at now.
func (s *Service) due(le liveEnv, now time.Time) bool {
	if le.RecordPhase == sandbox.PhaseQueued {
		return false // admission moves it on (Admitted)
	}
	return recordEnded(le.RecordPhase) || opInFlight(le.RecordPhase) || le.State.Transitional() || s.expired(le.Env, now)
}

// Due lists the environments owed work.
func (d driver) Due(ctx context.Context, now time.Time) ([]string, error) {
	envs, err := d.s.liveEnvs(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, le := range envs {
		if d.s.due(le, now) {
			ids = append(ids, le.ID)
		}
	}
	return ids, nil
}

// liveEnv reads one environment with its record's phase; nil when it is over.
func (s *Service) liveEnv(ctx context.Context, id string) (*liveEnv, error) {
	e, err := s.getEnv(ctx, id)
	if err != nil {
		return nil, err
	}
	if !e.State.Live() {
		return nil, nil
	}
	le := &liveEnv{Env: e}
	r, err := s.db.GetRecord(ctx, e.RecordID)
	switch {
	case err == nil:
		le.RecordPhase, le.KillReason = r.Phase, r.KillReason
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return le, nil
}

// Lane: ends and passed deadlines before builds and provisions.
func (d driver) Lane(ctx context.Context, id string) reconciler.Lane {
	le, err := d.s.liveEnv(ctx, id)
	now := d.s.now()
	switch {
	case err != nil || le == nil:
		return reconciler.LaneDeadline
	case recordEnded(le.RecordPhase), le.State.Transitional() && d.s.pastDeadline(le.Env, now), d.s.expired(le.Env, now):
		return reconciler.LaneDeadline
	case le.State.Transitional():
		return reconciler.LaneCreate
	}
	return reconciler.LaneOther
}

// Step drives environment id: its end, its pause or resume, its build and
// provision, or its expiry.
func (d driver) Step(ctx context.Context, id string, _ reconciler.Lane) error {
	s := d.s
	le, err := s.liveEnv(ctx, id)
	if err != nil || le == nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	now := s.now()
	switch {
	case recordEnded(le.RecordPhase):
		// Its end is decided (a delete, an expiry, a failure, or someone
		// else such as the credits system): stop the worker, remove what is
		// left, then end the record. Under the environment's lock, as the
		// API's operations: a pause in flight finishes first.
		unlock := s.lockEnv(id)
		defer unlock()
		if msg := endedMessage(le.KillReason); msg != "" && le.Error == "" && le.State.Live() {
			if _, err := s.apply(ctx, id, change{env: func(e *Env) {
				e.Error = msg
				e.Deadline = time.Time{}
			}}); err != nil {
				return err
			}
		}
		s.stopWorker(ctx, id, errStopped)
		if s.workerRunning(id) {
			return nil // the next step finishes once it stopped
		}
		_, err := s.finishStop(ctx, id, sandbox.CauseReconciler, "")
		return err
	case opInFlight(le.RecordPhase):
		unlock := s.lockEnv(id)
		defer unlock()
		_, err := s.pauseResume(ctx, id)
		var op *opError
		if errors.As(err, &op) {
			s.log.Warn("a pause or resume left by an earlier request was refused", "environment", id, "error", op.err)
			return nil
		}
		return err
	case le.State.Transitional():
		if s.pastDeadline(le.Env, now) {
			if s.cancelWorker(id, deadlineError{le.State}) {
				return nil // the worker fails it, describing what was not ready
			}
			if err := s.mayAct(ctx); err != nil {
				return err
			}
			s.fail(id, le.State, sandbox.CauseReconciler, s.deadlineMessage(le.State, nil))
			return nil
		}
		if le.RecordPhase == sandbox.PhaseQueued {
			return nil // waits for admission, which kicks it (Admitted)
		}
		if le.Deadline.IsZero() {
			if err := s.startClock(ctx, id); err != nil {
				return err
			}
		}
		return s.startWorker(ctx, id)
	case s.expired(le.Env, now):
		unlock := s.lockEnv(id)
		defer unlock()
		_, err := s.teardown(ctx, id, sandbox.CauseTTL, sandbox.KillTimeout, "expired (timeout_sec)", "")
		return err
	}
	return nil
}

// opError is a pause or resume the engine refused; the record went back to
// where it was and the request that asked answers with err.
type opError struct{ err error }

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// pauseResume finishes the pause or resume environment id's record is in
// (pausing, resuming): the engine call, then the environment paused (ready)
// with its record. A refusal moves the record back and is an *opError.
// Callers hold lockEnv(id).
func (s *Service) pauseResume(ctx context.Context, id string) (*Env, error) {
	e, err := s.getEnv(ctx, id)
	if err != nil {
		return nil, err
	}
	r, err := s.db.FreshRecord(ctx, e.RecordID) // not the cache: another replica may have moved it
	if err != nil {
		return e, err
	}
	switch r.Phase {
	case sandbox.PhasePausing:
		if err := s.mayAct(ctx); err != nil {
			return e, err
		}
		if err := s.engine.Pause(ctx, id); err != nil {
			return s.refused(ctx, e, sandbox.PhaseRunning, err)
		}
		return s.apply(ctx, id, change{expect: taskenv.StateReady,
			rec: sandbox.PhasePaused, cause: sandbox.CauseReconciler, recMut: func(r *store.Record) {
				now := s.now()
				r.MarkStopped(now)
				r.LastPausedAt = now
			}})
	case sandbox.PhaseResuming:
		if err := s.mayAct(ctx); err != nil {
			return e, err
		}
		if err := s.engine.Unpause(ctx, id); err != nil {
			return s.refused(ctx, e, sandbox.PhasePaused, err)
		}
		if ka, ok := s.engine.(KeepAliver); ok {
			// The instances run again: keep them alive until the environment expires.
			if left := e.ExpiresAt.Sub(s.now()); left > 0 {
				if err := ka.KeepAlive(ctx, id, left); err != nil {
					s.log.Warn("extending a resumed environment's instances; they may end before it expires", "environment", id, "error", err)
				}
			}
		}
		return s.apply(ctx, id, change{expect: taskenv.StatePaused,
			rec: sandbox.PhaseRunning, cause: sandbox.CauseReconciler, recMut: func(r *store.Record) { r.MarkRunning(s.now()) }})
	case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating, sandbox.PhaseRunning, sandbox.PhasePaused, sandbox.PhaseStopping, sandbox.PhaseDeleted, sandbox.PhaseCompleted, sandbox.PhaseFailed:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return e, nil // finished meanwhile
}

// refused moves a record whose pause or resume the engine refused back to
// back (running, paused); the environment's state never changed.
func (s *Service) refused(ctx context.Context, e *Env, back sandbox.Phase, err error) (*Env, error) {
	if ctx.Err() != nil {
		return e, ctx.Err() // shutting down: the next process finishes the move
	}
	if e2, terr := s.apply(ctx, e.ID, change{rec: back, cause: sandbox.CauseProvider}); terr != nil && !errors.Is(terr, errConflict) && !errors.Is(terr, errRecordConflict) {
		return e, terr
	} else if terr == nil {
		e = e2
	}
	return e, &opError{err}
}

// cancelWorker cancels a running worker with cause; false when none runs.
func (s *Service) cancelWorker(id string, cause error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.workers[id]; w != nil {
		w.cancel(cause)
		return true
	}
	return false
}

// Observe compares the engine with the environments: a ready or paused
// environment whose service died fails, leftovers of environments that are
// over are removed. The engine is read first: every resource in its
// snapshot belongs to an environment inserted before it, so the
// environments read next include it unless it is over (no race with a
// worker creating resources).
func (d driver) Observe(ctx context.Context) error {
	s := d.s
	snapAt := s.now()
	snap, snapErr := s.engine.Snapshot(ctx)
	s.noteDocker(ctx, snapErr)
	envs, err := s.liveEnvs(ctx)
	if err != nil {
		return err
	}
	if snapErr != nil {
		return nil // noted once above; the next period retries
	}
	now := s.now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	do := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			f()
		}()
	}
	live := map[string]bool{}
	for _, le := range envs {
		live[le.ID] = true
		if s.due(le, now) {
			continue // the lanes handle it
		}
		if le.UpdatedAt.After(snapAt) {
			// Became ready after the engine was read: the snapshot may show
			// its services as they were before they started ("created").
			// The next period judges it.
			continue
		}
		if msg := s.deadService(ctx, le.Env, snap.Containers[le.ID]); msg != "" {
			id, state := le.ID, le.State
			do(func() {
				unlock := s.lockEnv(id)
				defer unlock()
				s.fail(id, state, sandbox.CauseProvider, msg)
			})
		}
	}
	s.collectOrphans(ctx, snap, live, do)
	wg.Wait()
	return nil
}

// userError is a failure already worded for the environment's error field.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

// work drives environment id through building and provisioning, in the
// build pool (startWorker), off the reconciler's lanes. It is idempotent and
// restartable: the content-hash cache makes a rebuild a no-op and
// provisioning adopts what an earlier attempt started.
func (s *Service) work(ctx context.Context, id string) {
	for ctx.Err() == nil {
		e, err := s.getEnv(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("task environment worker: reading the environment", "environment", id, "error", err)
			}
			return
		}
		if !e.State.Transitional() || s.mayAct(ctx) != nil {
			return // done, or another replica took it over
		}
		if r, err := s.db.FreshRecord(ctx, e.RecordID); err == nil && (!r.Phase.Starting() || r.Phase == sandbox.PhaseQueued) {
			return // its end is decided (the driver stops it), or it waits for admission
		}
		remaining := e.Deadline.Sub(s.now())
		if e.Deadline.IsZero() {
			remaining = s.cfg.ReadyDeadline
		}
		if remaining <= 0 {
			s.failTransitional(e, s.deadlineMessage(e.State, nil))
			return
		}
		wctx, cancel := context.WithTimeoutCause(ctx, remaining, deadlineError{e.State})
		switch e.State {
		case taskenv.StateBuilding:
			err = s.build(wctx, e)
		case taskenv.StateProvisioning:
			err = s.provision(wctx, e)
		case taskenv.StateReady, taskenv.StatePaused, taskenv.StateTornDown, taskenv.StateFailed:
			// as below the switch; named so that a value added to the enum is decided here
		}
		cause := context.Cause(wctx)
		cancel()
		if s.mayAct(ctx) != nil {
			return // another replica may have taken it over: the outcome is its to act on
		}
		switch {
		case err == nil:
			continue // next state
		case errors.Is(err, errConflict):
			continue // someone else moved it (e.g. torn down): re-read
		case errors.Is(err, store.ErrLeaseLost):
			return // another replica took it over: its worker goes on
		case errors.Is(err, errRecordConflict):
			s.Kick() // the record was killed (credits): the sweep tears down
			return
		case errors.Is(cause, errShutdown), errors.Is(cause, errStopped):
			return // Close or a teardown: leave the state as it is
		case errors.Is(cause, context.DeadlineExceeded):
			s.failTransitional(e, s.deadlineMessage(e.State, err))
			return
		}
		msg := failureMessage(err)
		if msg == "" {
			// Not the task's fault (database, programming error): retry from
			// the next sweep until the deadline says otherwise.
			s.log.Error("task environment worker failed; will retry", "environment", id, "state", e.State, "error", err)
			return
		}
		s.failTransitional(e, msg)
		return
	}
}

// failureMessage words err for the environment's error field, "" when err is
// not a failure of the task or the provider.
func failureMessage(err error) string {
	var ue *userError
	var be *compute.BuildError
	var pe *compute.ProviderError
	var se *compute.ServiceError
	switch {
	case errors.As(err, &ue):
		return ue.msg
	case errors.As(err, &be):
		return "task build failed: " + be.Error()
	case errors.As(err, &se):
		return se.Error()
	case errors.As(err, &pe):
		return pe.Error()
	}
	return ""
}

func (s *Service) deadlineMessage(state taskenv.State, err error) string {
	var se *compute.ServiceError
	if err != nil && errors.As(err, &se) {
		return fmt.Sprintf("the environment was not ready within %s: %s", s.cfg.ReadyDeadline, se.Error())
	}
	if state == taskenv.StateBuilding {
		return fmt.Sprintf("task build failed: building did not finish within %s", s.cfg.BuildDeadline)
	}
	return fmt.Sprintf("provisioning did not finish within %s", s.cfg.ReadyDeadline)
}

// prepare loads the environment's task and compose project and computes its
// images.
func (s *Service) prepare(ctx context.Context, e *Env) (*catalog.Task, *types.Project, map[string]*compute.Image, error) {
	task := s.catalog.Exact(e.TaskOrg, e.TaskName, e.TaskVersion)
	if task == nil {
		s.catalog.Rescan(ctx)
		if task = s.catalog.Exact(e.TaskOrg, e.TaskName, e.TaskVersion); task == nil {
			return nil, nil, nil, &userError{fmt.Sprintf("task build failed: task %s/%s@%s is no longer in the catalog", e.TaskOrg, e.TaskName, e.TaskVersion)}
		}
	}
	p, err := task.Project(ctx, projectName(e.ID), e.Resolved)
	if err != nil {
		return nil, nil, nil, &userError{"task build failed: " + err.Error()}
	}
	imgs := map[string]*compute.Image{}
	if s.engine.BuildsImages() {
		if imgs, err = images(p, task.Name); err != nil {
			return nil, nil, nil, err
		}
	}
	return task, p, imgs, nil
}

func projectName(envID string) string { return "dn-" + envID }

// forkImages are the checkpoint images a forked environment's services
// start from (nil for an environment that is not a fork).
func (s *Service) forkImages(ctx context.Context, e *Env) (map[string]string, error) {
	r, err := s.db.GetRecord(ctx, e.RecordID)
	if err != nil {
		return nil, err
	}
	return r.Spec.ServiceImages, nil
}

// build makes sure every image of the environment exists, then moves it to
// provisioning.
func (s *Service) build(ctx context.Context, e *Env) error {
	_, _, imgs, err := s.prepare(ctx, e)
	if err != nil {
		return err
	}
	fork, err := s.forkImages(ctx, e)
	if err != nil {
		return err
	}
	var missing []*compute.Image
	if fork == nil {
		if missing, err = s.engine.Missing(ctx, imgs); err != nil {
			return err
		}
	}
	detail := "images cached"
	switch {
	case fork != nil:
		detail = "nothing to build: forked, its services start from the parent's checkpoint"
	case len(imgs) == 0:
		detail = "nothing to build (the services start from prebuilt templates)"
	}
	if len(missing) > 0 {
		n, err := s.engine.Build(ctx, imgs)
		if err != nil {
			return err
		}
		detail = "built " + strconv.Itoa(n) + " image(s)"
		if n == 0 {
			detail = "images built concurrently by another environment"
		}
	}
	deadline := s.now().Add(s.cfg.ReadyDeadline)
	_, err = s.apply(ctx, e.ID, change{step: taskenv.StateProvisioning, detail: detail,
		env:    func(e *Env) { e.Deadline = deadline },
		recMut: func(r *store.Record) { r.PhaseDeadline = deadline }})
	return err
}

// provision brings the services up and marks the environment ready.
func (s *Service) provision(ctx context.Context, e *Env) error {
	task, p, imgs, err := s.prepare(ctx, e)
	if err != nil {
		return err
	}
	g := toGroup(compute.GroupTarget{ID: e.ID, RecordID: e.RecordID, OrgID: e.OrgID, TaskRef: task.Ref()}, task, p, imgs)
	fork, err := s.forkImages(ctx, e)
	if err != nil {
		return err
	}
	if fork != nil {
		g = forkGroup(g, fork)
	}
	res, err := s.engine.Bring(ctx, g)
	if err != nil {
		return err
	}
	if ka, ok := s.engine.(KeepAliver); ok {
		if err := ka.KeepAlive(ctx, e.ID, time.Duration(e.TimeoutSec)*time.Second); err != nil {
			return err
		}
	}
	vars := map[string]string{}
	for k, v := range e.Resolved {
		vars[k] = v
	}
	for svc, ep := range res.Endpoints {
		vars[svc+"_url"] = ep.URL
		vars[svc+"_host"] = ep.Host
		vars[svc+"_port"] = strconv.Itoa(ep.Port)
	}
	instruction := catalog.Render(task.Instruction, vars)
	detail := "services healthy"
	if res.Adopted > 0 {
		detail += fmt.Sprintf(" (%d container(s) adopted after a restart)", res.Adopted)
	}
	_, err = s.apply(ctx, e.ID, change{
		detail: detail,
		env: func(e *Env) {
			now := s.now()
			e.ServiceURLs = res.Endpoints
			e.Containers = res.Containers
			e.OneShots = res.OneShots
			e.Instruction = instruction
			e.ExpiresAt = now.Add(time.Duration(e.TimeoutSec) * time.Second)
			e.Deadline = time.Time{}
		},
		rec: sandbox.PhaseRunning, cause: sandbox.CauseReconciler,
		recMut: func(r *store.Record) {
			now := s.now()
			r.MarkRunning(now)
			r.PhaseDeadline = time.Time{}
			r.EndAt = now.Add(time.Duration(e.TimeoutSec) * time.Second)
			r.ProviderID = compute.GroupNetworkName(e.ID)
			r.Endpoints = map[int]compute.Endpoint{}
			for svc, ep := range res.Endpoints {
				r.Endpoints[task.Expose[svc]] = compute.Endpoint{Host: ep.Host, Port: ep.Port, URL: ep.URL}
			}
		},
	})
	return err
}

// failTransitional removes whatever the environment started and marks it
// failed with msg. Only the worker moves an environment on from building or
// provisioning, so after its own failure the environment is still there or
// already over (which the table refuses to fail).
func (s *Service) failTransitional(e *Env, msg string) {
	s.fail(e.ID, "", sandbox.CauseReconciler, msg)
}

// noteDocker logs when Docker stops or starts answering (not every sweep).
func (s *Service) noteDocker(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	was := s.dockerDown
	s.dockerDown = err != nil
	s.mu.Unlock()
	switch {
	case err != nil && !was:
		s.log.Warn("task environments: Docker does not answer; task environments cannot be checked or cleaned up until it does", "error", err)
	case err == nil && was:
		s.log.Info("task environments: Docker answers again")
	}
}

func recordEnded(p sandbox.Phase) bool {
	return p == sandbox.PhaseStopping || p.Terminal()
}

// deadService checks a ready or paused environment's containers: each
// service (one-shots excepted) must exist and be running or paused. It
// returns the failure message, "" when all is well.
func (s *Service) deadService(ctx context.Context, e *Env, cs []compute.GroupMember) string {
	if len(e.Containers) == 0 {
		return ""
	}
	names := make([]string, 0, len(e.Containers))
	for svc := range e.Containers {
		names = append(names, svc)
	}
	slices.Sort(names)
	for _, svc := range names {
		if slices.Contains(e.OneShots, svc) {
			continue
		}
		var found *compute.GroupMember
		for i := range cs {
			if cs[i].Service == svc {
				found = &cs[i]
				break
			}
		}
		switch {
		case found == nil:
			return fmt.Sprintf("service %q stopped unexpectedly: its container was removed outside the backend", svc)
		case found.Alive():
			continue
		default:
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			logs := s.engine.LastLogs(lctx, found.ID, 20)
			cancel()
			msg := fmt.Sprintf("service %q stopped unexpectedly (%s)", svc, strings.ToLower(found.Status))
			if len(logs) > 0 {
				msg += "; last log lines:\n" + strings.Join(logs, "\n")
			}
			return msg
		}
	}
	return ""
}

// collectOrphans removes the owner's containers and networks whose
// environment is over or unknown to this database.
func (s *Service) collectOrphans(ctx context.Context, snap *compute.GroupSnapshot, live map[string]bool, do func(func())) {
	candidates := map[string]bool{}
	for env := range snap.Containers {
		if env != "" && !live[env] {
			candidates[env] = true
		}
	}
	for env := range snap.Networks {
		if env != "" && !live[env] {
			candidates[env] = true
		}
	}
	if len(candidates) == 0 {
		return
	}
	ids := make([]string, 0, len(candidates))
	for id := range candidates {
		ids = append(ids, id)
	}
	states, err := s.envStates(ctx, ids)
	if err != nil {
		return
	}
	for _, id := range ids {
		if st, ok := states[id]; ok && !st.Terminal() {
			continue // became live after the read above
		}
		do(func() {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			n, err := s.engine.RemoveCount(rctx, id)
			switch {
			case err != nil && ctx.Err() == nil:
				s.log.Warn("task environments: removing leftovers", "environment", id, "error", err)
			case err == nil && n > 0:
				state := states[id]
				if state == "" {
					state = "unknown to this database"
				}
				s.log.Info("task environments: removed leftovers of an environment that is over", "environment", id, "state", state, "resources", n)
			}
		})
	}
}
