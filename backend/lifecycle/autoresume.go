package lifecycle

import (
	"context"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// autoResume resumes a paused sandbox for the traffic router. A sandbox
// with store.Spec.AutoResumeTimeoutSec (created through /e2b) then ends
// that long after the resume, as E2B's auto-resume sets it (its
// calculateAutoResumeTimeout: the create's timeout, at least 300 s,
// whatever a later timeout call set); any other keeps its end.
func (s *Service) autoResume(ctx context.Context, rec *store.Record) (*store.Record, error) {
	cur, resumed, err := s.Resume(ctx, rec)
	if err != nil || !resumed {
		return cur, err
	}
	if secs := cur.Spec.AutoResumeTimeoutSec; secs > 0 {
		return s.SetEnd(ctx, cur, time.Duration(secs)*time.Second, false)
	}
	return cur, nil
}
