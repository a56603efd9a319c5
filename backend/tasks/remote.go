package tasks

import (
	"context"
	"time"
)

// RemoteChanged wakes the waiters (GET …/status?wait=) of environment id,
// which another replica sharing the database changed. When this replica's
// worker is building or provisioning id and the change ended it (a delete
// or a credits kill on the other replica), the worker is stopped and what it
// brought up after the other replica removed the environment's resources is
// removed too, rather than left for the orphan sweep. It never blocks.
func (s *Service) RemoteChanged(id string) {
	s.hub.Notify(id)
	s.mu.Lock()
	if s.closed || s.workers[id] == nil {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1) // Close waits for it
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.stopEnded(id)
	}()
}

// stopEnded stops id's worker if the environment is no longer being built
// or provisioned (its record left starting: its end was decided, and the
// environment still shows building or provisioning until it ended), and
// removes its resources once it is over.
func (s *Service) stopEnded(id string) {
	ctx, cancel := s.bg(2 * time.Minute)
	defer cancel()
	e, err := s.getEnv(ctx, id)
	if err != nil {
		return // unreadable: the sweep looks again
	}
	if e.State.Transitional() {
		if r, err := s.db.FreshRecord(ctx, e.RecordID); err != nil || r.Phase.Starting() {
			return // still ours to drive
		}
	}
	s.stopWorker(ctx, id, errStopped)
	if !e.State.Terminal() {
		return
	}
	if err := s.engine.Remove(ctx, id); err != nil && context.Cause(ctx) == nil {
		s.log.Warn("removing the resources of an environment another replica ended; the sweep will retry", "environment", id, "error", err)
	}
}

// Resync wakes every waiter: changes of other replicas may have been missed.
func (s *Service) Resync() { s.hub.NotifyAll() }
