package tasks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/compose"
)

// sweep is one level-triggered pass over the database and Docker:
//   - an environment whose ledger record was ended by someone else (the
//     credits system moves it to stopping) is torn down;
//   - building/provisioning past their persisted deadline fail, the others
//     get a worker if none runs (after a restart: resume);
//   - ready/paused past expires_at are torn down (reason timeout);
//   - ready/paused whose containers died or vanished fail, with logs;
//   - containers and networks of this owner whose environment is over or
//     unknown are removed.
func (s *Service) sweep(ctx context.Context, startup bool) {
	// Docker first: every resource in this snapshot belongs to an
	// environment inserted before it, so the environments read next include
	// it unless it is over (no race with a worker creating resources).
	snap, snapErr := s.engine.Snapshot(ctx)
	s.noteDocker(ctx, snapErr)
	envs, err := s.liveEnvs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("task sweep: reading environments", "error", err)
		}
		return
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
		id := le.ID
		switch {
		case recordEnded(le.RecordPhase):
			reason, msg := le.KillReason, "torn down: its ledger record was ended ("+le.KillReason+")"
			if reason == store.KillInsufficientCredits {
				msg = "torn down: the organization ran out of credits (insufficient_credits)"
			}
			if reason == "" {
				reason = store.KillDeleted
				msg = "torn down: its ledger record was ended"
			}
			do(func() {
				if _, err := s.teardown(ctx, id, reason, "ledger record ended", msg); err != nil && ctx.Err() == nil {
					s.log.Error("task sweep: tearing down", "environment", id, "error", err)
				}
			})
		case transitional(le.State):
			if !le.Deadline.IsZero() && !now.Before(le.Deadline) {
				if s.cancelWorker(id, deadlineError{le.State}) {
					continue // the worker fails it, describing what was not ready
				}
				state := le.State
				do(func() {
					msg := s.deadlineMessage(state, nil)
					if startup {
						msg += " (the backend restarted while it was in progress)"
					}
					s.fail(id, []string{state}, msg)
				})
				continue
			}
			s.startWorker(id)
		case !le.ExpiresAt.IsZero() && !now.Before(le.ExpiresAt):
			do(func() {
				if _, err := s.teardown(ctx, id, store.KillTimeout, "expired (timeout_sec)", ""); err != nil && ctx.Err() == nil {
					s.log.Error("task sweep: expiring", "environment", id, "error", err)
				}
			})
		case snapErr == nil:
			if msg := s.deadService(ctx, le.Env, snap.Containers[id]); msg != "" {
				state := le.State
				do(func() { s.fail(id, []string{state}, msg) })
			}
		}
	}
	if snapErr == nil {
		s.collectOrphans(ctx, snap, live, do)
	}
	wg.Wait()
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
		s.log.Warn("task sweep: Docker does not answer; task environments cannot be checked or cleaned up until it does", "error", err)
	case err == nil && was:
		s.log.Info("task sweep: Docker answers again")
	}
}

func recordEnded(p store.Phase) bool {
	return p == store.PhaseStopping || p.Terminal()
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

// deadService checks a ready or paused environment's containers: each
// service (one-shots excepted) must exist and be running or paused. It
// returns the failure message, "" when all is well.
func (s *Service) deadService(ctx context.Context, e *Env, cs []compose.ContainerState) string {
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
		var found *compose.ContainerState
		for i := range cs {
			if cs[i].Service == svc {
				found = &cs[i]
				break
			}
		}
		switch {
		case found == nil:
			return fmt.Sprintf("service %q stopped unexpectedly: its container was removed outside the backend", svc)
		case found.State == "running" || found.State == "paused" || found.State == "restarting":
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
func (s *Service) collectOrphans(ctx context.Context, snap *compose.Snapshot, live map[string]bool, do func(func())) {
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
		if st, ok := states[id]; ok && !terminal(st) {
			continue // became live after the read above
		}
		do(func() {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			n, err := s.engine.RemoveCount(rctx, id)
			switch {
			case err != nil && ctx.Err() == nil:
				s.log.Warn("task sweep: removing leftovers", "environment", id, "error", err)
			case err == nil && n > 0:
				state := states[id]
				if state == "" {
					state = "unknown to this database"
				}
				s.log.Info("task sweep: removed leftovers of an environment that is over", "environment", id, "state", state, "resources", n)
			}
		})
	}
}
