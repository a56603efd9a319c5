package tasks

import (
	"context"
	"errors"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Builds and provisions run off the reconciler's lanes, in the build pool:
// a step of a starting environment moves its record to creating and hands
// the work to a worker goroutine that waits for one of the pool's
// Config.MaxConcurrentJobs slots, then returns, so a build of many minutes
// holds no lane worker (deletes, expiries, pauses and other environments'
// steps go on). The worker keeps the record's lease while it runs
// (reconciler.Detach); the driver checks on it at every sweep (a starting
// environment stays due: its step returns at once while a worker runs, and
// starts one again after a restart or a worker that gave up).

// startWorker moves environment id's record from pending to creating and
// starts its worker unless one runs already; teardown and Close cancel it
// (cancelWorker, stopWorker).
func (s *Service) startWorker(step context.Context, id string) error {
	if s.workerRunning(id) {
		return nil
	}
	if err := s.creating(step, id); err != nil {
		return err
	}
	base, release := s.ctx, func() {}
	if s.rc != nil {
		var ok bool
		if base, release, ok = s.rc.Detach(step, s.ctx); !ok {
			return nil // another replica took it over
		}
	}
	s.mu.Lock()
	if s.closed || s.workers[id] != nil {
		s.mu.Unlock()
		release()
		return nil
	}
	wctx, cancel := context.WithCancelCause(base)
	w := &worker{cancel: cancel, done: make(chan struct{})}
	s.workers[id] = w
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			if s.workers[id] == w {
				delete(s.workers, id)
			}
			s.mu.Unlock()
			cancel(nil)
			release()
			close(w.done)
			s.wg.Done()
		}()
		select {
		case s.pool <- struct{}{}:
			defer func() { <-s.pool }()
		case <-wctx.Done():
			return
		}
		s.work(wctx, id)
	}()
	return nil
}

// creating moves environment id's record from pending to creating (the
// build starts); a record already further along is left as it is.
func (s *Service) creating(ctx context.Context, id string) error {
	e, err := s.getEnv(ctx, id)
	if err != nil {
		return err
	}
	r, err := s.db.FreshRecord(ctx, e.RecordID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || r.Phase != sandbox.PhasePending {
		return err
	}
	_, err = s.apply(ctx, id, change{rec: sandbox.PhaseCreating, cause: sandbox.CauseReconciler})
	if errors.Is(err, errRecordConflict) || errors.Is(err, errConflict) {
		return nil // moved meanwhile (ended): the next step sees it
	}
	return err
}

// workerRunning reports whether a worker of environment id runs in this
// process.
func (s *Service) workerRunning(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workers[id] != nil
}
