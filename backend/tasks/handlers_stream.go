package tasks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ndjson"
)

// StreamExecer is implemented by engines that stream a command's output;
// others (or an ExecStream answering errors.ErrUnsupported) answer a stream
// with one buffered run.
type StreamExecer interface {
	ExecStream(ctx context.Context, envID, service string, argv []string, timeout time.Duration, emit compute.Emit) (*compute.GroupExecResult, error)
}

// executeStream answers execute with Accept: application/x-ndjson: the
// events of §6 (start, stdout, stderr, exit).
func (s *Service) executeStream(w http.ResponseWriter, r *http.Request, e *Env, argv []string, timeout time.Duration) error {
	out := ndjson.New(w)
	err := errors.ErrUnsupported
	if se, ok := s.engine.(StreamExecer); ok {
		_, err = se.ExecStream(r.Context(), e.ID, e.ExecuteService, argv, timeout, out.Event)
	}
	if errors.Is(err, errors.ErrUnsupported) && !out.Started {
		var res *compute.GroupExecResult
		if res, err = s.engine.Exec(r.Context(), e.ID, e.ExecuteService, argv, timeout, DefaultMaxExecOutput); err == nil {
			for _, ev := range []compute.ProcessEvent{{Type: compute.EventStart}, {Type: compute.EventStdout, Data: res.Output},
				{Type: compute.EventExit, ExitCode: res.ExitCode}} {
				if err = out.Event(ev); err != nil {
					break
				}
			}
		}
	}
	switch {
	case err == nil, r.Context().Err() != nil:
		return nil
	case errors.Is(err, compute.ErrNotRunning):
		return out.Finish(httpx.Conflict(fmt.Sprintf("environment %s cannot run commands now: %v", e.ID, err)))
	}
	return out.Finish(providerHTTPError(err))
}
