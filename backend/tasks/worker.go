package tasks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/provider"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/compose"
)

// userError is a failure already worded for the environment's error field.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

// work drives environment id through building and provisioning. It is
// idempotent and restartable: the content-hash cache makes a rebuild a no-op
// and provisioning adopts what an earlier attempt started.
func (s *Service) work(ctx context.Context, id string) {
	select {
	case s.jobs <- struct{}{}:
		defer func() { <-s.jobs }()
	case <-ctx.Done():
		// Still queued for a slot when its deadline passed.
		var de deadlineError
		if errors.As(context.Cause(ctx), &de) {
			if e, err := s.getEnv(context.WithoutCancel(ctx), id); err == nil && transitional(e.State) {
				s.failTransitional(e, s.deadlineMessage(e.State, nil))
			}
		}
		return
	}
	for ctx.Err() == nil {
		e, err := s.getEnv(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("task environment worker: reading the environment", "environment", id, "error", err)
			}
			return
		}
		if !transitional(e.State) {
			return
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
		case StateBuilding:
			err = s.build(wctx, e)
		case StateProvisioning:
			err = s.provision(wctx, e)
		}
		cause := context.Cause(wctx)
		cancel()
		switch {
		case err == nil:
			continue // next state
		case errors.Is(err, errConflict):
			continue // someone else moved it (e.g. torn down): re-read
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
			// the sweep until the deadline says otherwise.
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
	var be *compose.BuildError
	var pe *compose.ProviderError
	var se *compose.ServiceError
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

func (s *Service) deadlineMessage(state string, err error) string {
	var se *compose.ServiceError
	if err != nil && errors.As(err, &se) {
		return fmt.Sprintf("the environment was not ready within %s: %s", s.cfg.ReadyDeadline, se.Error())
	}
	if state == StateBuilding {
		return fmt.Sprintf("task build failed: building did not finish within %s", s.cfg.BuildDeadline)
	}
	return fmt.Sprintf("provisioning did not finish within %s", s.cfg.ReadyDeadline)
}

// prepare loads the environment's task and compose project and computes its
// images.
func (s *Service) prepare(ctx context.Context, e *Env) (*catalog.Task, *types.Project, map[string]*compose.Image, error) {
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
	imgs, err := s.engine.Images(p, task.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	return task, p, imgs, nil
}

func projectName(envID string) string { return "dn-" + envID }

// build makes sure every image of the environment exists, then moves it to
// provisioning.
func (s *Service) build(ctx context.Context, e *Env) error {
	_, _, imgs, err := s.prepare(ctx, e)
	if err != nil {
		return err
	}
	missing, err := s.engine.Missing(ctx, imgs)
	if err != nil {
		return err
	}
	detail := "images cached"
	if len(imgs) == 0 {
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
	_, err = s.apply(ctx, e.ID, change{from: []string{StateBuilding}, to: StateProvisioning, detail: detail,
		env: func(e *Env) { e.Deadline = s.now().Add(s.cfg.ReadyDeadline) }})
	return err
}

// provision brings the services up and marks the environment ready.
func (s *Service) provision(ctx context.Context, e *Env) error {
	task, p, imgs, err := s.prepare(ctx, e)
	if err != nil {
		return err
	}
	res, err := s.engine.Bring(ctx, &compose.Up{
		Target:  compose.Target{EnvID: e.ID, RecordID: e.RecordID, OrgID: e.OrgID, TaskRef: task.Ref()},
		Project: p, Images: imgs, Expose: task.Expose, Templates: task.E2BTemplates,
	})
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
		from: []string{StateProvisioning}, to: StateReady, detail: detail,
		env: func(e *Env) {
			now := s.now()
			e.ServiceURLs = res.Endpoints
			e.Containers = res.Containers
			e.OneShots = res.OneShots
			e.Instruction = instruction
			e.ExpiresAt = now.Add(time.Duration(e.TimeoutSec) * time.Second)
			e.Deadline = time.Time{}
		},
		rec: store.PhaseRunning, recFrom: []store.Phase{store.PhasePending, store.PhaseCreating},
		recMut: func(r *store.Record) {
			now := s.now()
			r.MarkRunning(now)
			r.EndAt = now.Add(time.Duration(e.TimeoutSec) * time.Second)
			r.ProviderID = compose.NetworkName(e.ID)
			r.Endpoints = map[int]provider.Endpoint{}
			for svc, ep := range res.Endpoints {
				r.Endpoints[task.Expose[svc]] = provider.Endpoint{Host: ep.Host, Port: ep.Port, URL: ep.URL}
			}
		},
	})
	return err
}

// failTransitional removes whatever the environment started and marks it
// failed with msg (only if it is still building or provisioning).
func (s *Service) failTransitional(e *Env, msg string) {
	s.fail(e.ID, []string{StateBuilding, StateProvisioning}, msg)
}

// fail removes the environment's containers and network, then marks it
// failed and its record killed (reason failed).
func (s *Service) fail(id string, from []string, msg string) {
	ctx, cancel := s.bg(2 * time.Minute)
	defer cancel()
	if err := s.engine.Remove(ctx, id); err != nil {
		s.log.Warn("removing a failed environment's resources; the sweep will retry", "environment", id, "error", err)
	}
	_, err := s.apply(ctx, id, change{from: from, to: StateFailed, env: func(e *Env) {
		e.Error = msg
		e.Deadline = time.Time{}
	}, rec: store.PhaseFailed, recMut: func(r *store.Record) {
		r.MarkKilled(s.now(), store.KillFailed)
		r.Diagnostic = msg
	}})
	if err != nil && !errors.Is(err, errConflict) {
		s.log.Error("marking a task environment failed", "environment", id, "error", err)
		return
	}
	if err == nil {
		s.log.Info("task environment failed", "environment", id, "error", msg)
	}
}

// teardown ends a live environment: state torn_down (error set when
// errMsg is not empty), its record killed with reason, its worker stopped,
// its containers and network removed. It returns the environment as it is
// after the change (or as it was, when it was already over).
func (s *Service) teardown(ctx context.Context, id, reason, detail, errMsg string) (*Env, error) {
	e, err := s.apply(ctx, id, change{from: liveStates, to: StateTornDown, detail: detail,
		env: func(e *Env) {
			e.Error = errMsg
			e.Deadline = time.Time{}
		},
		rec: store.PhaseDeleted, recMut: func(r *store.Record) { r.MarkKilled(s.now(), reason) }})
	if err != nil && !errors.Is(err, errConflict) {
		return nil, err
	}
	s.stopWorker(ctx, id, errStopped)
	rctx, cancel := s.bg(2 * time.Minute)
	defer cancel()
	if rerr := s.engine.Remove(rctx, id); rerr != nil {
		s.log.Warn("removing a torn down environment's resources; the sweep will retry", "environment", id, "error", rerr)
	}
	return e, nil
}
