package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
)

// Pause pauses a ready environment: its record moves to pausing, as a
// sandbox's pause does, then the driver's engine call finishes the move.
// It returns once that is done, with the environment paused, or with the
// engine's refusal (a provider error; the environment stays ready). Any
// other state is a conflict.
func (s *Service) Pause(ctx context.Context, e *Env) (*Env, error) {
	return s.pauseOrResume(ctx, e.ID, true)
}

// Resume is Pause's reverse: a paused environment becomes ready again.
func (s *Service) Resume(ctx context.Context, e *Env) (*Env, error) {
	return s.pauseOrResume(ctx, e.ID, false)
}

func (s *Service) pauseOrResume(ctx context.Context, id string, pause bool) (*Env, error) {
	unlock := s.lockEnv(id)
	defer unlock()
	e, err := s.getEnv(ctx, id)
	if err != nil {
		return nil, err
	}
	from, verb, op := taskenv.StateReady, "paused", sandbox.PhasePausing
	if !pause {
		from, verb, op = taskenv.StatePaused, "resumed", sandbox.PhaseResuming
	}
	if e.State != from {
		return nil, domain.ConflictIn(string(e.State), fmt.Sprintf("environment %s is %s; only a %s environment can be %s", e.ID, e.State, from, verb))
	}
	e, err = s.apply(ctx, e.ID, change{expect: from, rec: op, cause: sandbox.CauseUser})
	if err != nil {
		return nil, s.opConflict(e, verb, err)
	}
	// The engine call is not cut short by a caller that leaves: the move
	// it starts is finished either way.
	e, err = s.pauseResume(context.WithoutCancel(ctx), e.ID)
	var oe *opError
	if errors.As(err, &oe) {
		return nil, providerErr(oe.err)
	}
	if err != nil {
		return nil, s.opConflict(e, verb, err)
	}
	return e, nil
}

// opConflict words err of a pause or resume of e: a conflict when e left
// the state it was in or its record was ended meanwhile (the sweep is asked
// to finish that); any other error as it is.
func (s *Service) opConflict(e *Env, verb string, err error) error {
	switch {
	case errors.Is(err, errConflict):
		return domain.ConflictIn(string(e.State), fmt.Sprintf("environment %s is %s now; it was not %s", e.ID, e.State, verb))
	case errors.Is(err, errRecordConflict):
		s.Kick()
		return domain.ConflictIn(string(e.State), fmt.Sprintf("environment %s is being torn down (its ledger record was ended)", e.ID))
	}
	return err
}
