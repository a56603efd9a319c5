package lifecycle

import (
	"context"
	"net/http"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// withQueuePosition fills in the place of a queued sandbox in its org's
// queue (§7); other sandboxes have none. The position changes without the
// record changing, so queued records are never served from the render cache.
func (s *Service) withQueuePosition(ctx context.Context, rec *store.Record, out *Sandbox) error {
	if rec.Phase != store.PhaseQueued {
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

// writeQueued answers the detail of a queued sandbox, with its position.
func (s *Service) writeQueued(w http.ResponseWriter, r *http.Request, rec *store.Record) error {
	out := view(rec, baseURL(r))
	if err := s.withQueuePosition(r.Context(), rec, out); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}
