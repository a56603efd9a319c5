package tasks

import (
	"context"
	"errors"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// An environment is driven under the lease of its ledger record (see
// reconciler/lease.go): the reconciler claims it before each step, the
// environment's writes check it (apply), and the engine calls of a step are
// made only while the replica still holds it (mayAct).

// LeaseKey names the record whose lease covers environment id.
func (d driver) LeaseKey(ctx context.Context, id string) (string, error) {
	e, err := d.s.getEnv(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil // nothing to drive: the step finds out
	}
	if err != nil {
		return "", err
	}
	return e.RecordID, nil
}

// mayAct reports whether a step running under ctx may still call the
// engine: store.ErrLeaseLost once another replica may have taken its
// environment over.
func (s *Service) mayAct(ctx context.Context) error {
	if s.rc == nil {
		return nil
	}
	return s.rc.MayAct(ctx)
}
