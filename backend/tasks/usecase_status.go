package tasks

import (
	"context"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
)

// WaitRequest is a long poll of an environment's state: hold the answer up
// to Wait (at most Config.MaxWait) while the state equals Since when set,
// else while it is transitional (building, provisioning).
type WaitRequest struct {
	Since taskenv.State
	Wait  time.Duration
}

// WaitState returns e as it is once its state stops holding, or when
// req.Wait has passed. A caller that leaves ends the wait with ctx's error.
func (s *Service) WaitState(ctx context.Context, e *Env, req WaitRequest) (*Env, error) {
	holding := func(e *Env) bool {
		if req.Since != "" {
			return e.State == req.Since
		}
		return e.State.Transitional()
	}
	wait := min(req.Wait, s.cfg.MaxWait)
	deadline := time.Now().Add(wait)
	for wait > 0 && holding(e) {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		ch, release := s.hub.Wait(e.ID)
		// Re-read after subscribing so a change in between is not missed;
		// re-read at least every 2 s in case another process changed it.
		cur, err := s.getEnv(ctx, e.ID)
		if err != nil {
			release()
			return nil, err
		}
		e = cur
		if !holding(e) {
			release()
			break
		}
		t := time.NewTimer(min(left, 2*time.Second))
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			release()
			return nil, ctx.Err()
		}
		t.Stop()
		release()
		if e, err = s.getEnv(ctx, e.ID); err != nil {
			return nil, err
		}
	}
	return e, nil
}
