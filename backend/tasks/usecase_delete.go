package tasks

import (
	"context"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Delete tears a live environment down (torn_down, its record killed by
// the user) and removes its resources; an environment already over has
// whatever is left of it removed again, so a second delete is answered
// like the first. It returns the environment as it is afterwards.
func (s *Service) Delete(ctx context.Context, e *Env) (*Env, error) {
	unlock := s.lockEnv(e.ID)
	defer unlock()
	if !e.State.Terminal() {
		if _, err := s.teardown(ctx, e.ID, sandbox.CauseUser, sandbox.KillTornDown, "deleted", ""); err != nil {
			return nil, err
		}
	} else {
		rctx, cancel := s.bg(time.Minute)
		defer cancel()
		if err := s.engine.Remove(rctx, e.ID); err != nil {
			s.log.Warn("removing leftovers of an environment that is over", "environment", e.ID, "error", err)
		}
	}
	return s.getEnv(ctx, e.ID)
}
