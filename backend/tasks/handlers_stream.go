package tasks

import (
	"context"
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
// events of §6 (start, stdout, stderr, exit). A failure before the first
// event is an ordinary JSON error; after it, the stream's last line.
func (s *Service) executeStream(w http.ResponseWriter, r *http.Request, e *Env, req ExecRequest) error {
	out := ndjson.New(w, r)
	kctx, kcancel := httpx.KeyContext(r) // the stream, and the command, end with the key
	defer kcancel()
	err := s.ExecuteStream(kctx, e, req, out.Event)
	if kerr := httpx.KeyEnded(kctx); kerr != nil && !out.Exited {
		return out.EndKey(kerr)
	}
	if err == nil || r.Context().Err() != nil {
		return nil
	}
	return out.Finish(err)
}
