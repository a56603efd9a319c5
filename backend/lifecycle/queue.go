package lifecycle

import (
	"context"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// withQueuePosition fills in the place of a queued sandbox in its org's
// queue (§7); other sandboxes have none. The position changes without the
// record changing, so queued records are never served from the render cache.
func (s *Service) withQueuePosition(ctx context.Context, rec *store.Record, out *Sandbox) error {
	if rec.Phase != sandbox.PhaseQueued {
		return nil
	}
	n, err := admission.Position(ctx, s.db.Reader(), rec)
	if err != nil {
		return err
	}
	if n > 0 {
		out.QueuePosition = &n
	}
	return nil
}
