package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ndjson"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// streamRecheck bounds how long a stream can outlive its sandbox's
// running phase if a change notification is lost: changes on this replica
// and (through the store's listener, reconciler.RemoteChanged) on others
// wake the guard at once; this re-read is only the backstop, kept rare as
// there is one guard per open stream.
const streamRecheck = 15 * time.Second

// streamGuard ties an open stream (follow, watch, streaming exec) to its
// sandbox's record: when the record leaves running (pause, delete, a TTL
// or credit kill), the stream's context is cancelled and the handler ends
// the stream with {"type":"end","reason":...} instead of hanging on a
// frozen or removed sandbox.
type streamGuard struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	left   *store.Record // the record as it left running; nil while running
}

// guardStream watches record id from the change notifications (the
// reconciler's hub, woken by every committed transition here or on another
// replica), re-reading the record at each wake-up and every streamRecheck.
func (s *Service) guardStream(parent context.Context, id string) *streamGuard {
	g := &streamGuard{done: make(chan struct{})}
	g.ctx, g.cancel = context.WithCancel(parent)
	go func() {
		defer close(g.done)
		for {
			changed, release := s.rc.Subscribe(id)
			rec, err := s.db.GetRecord(g.ctx, id)
			if g.ctx.Err() != nil {
				release()
				return
			}
			if errors.Is(err, store.ErrNotFound) {
				rec, err = &store.Record{ID: id, Phase: sandbox.PhaseDeleted}, nil
			}
			if err == nil && rec.Phase != sandbox.PhaseRunning {
				release()
				g.mu.Lock()
				g.left = rec
				g.mu.Unlock()
				g.cancel()
				return
			}
			t := time.NewTimer(streamRecheck)
			select {
			case <-changed:
			case <-t.C:
			case <-g.ctx.Done():
			}
			t.Stop()
			release()
		}
	}()
	return g
}

// stop releases the guard; call it when the stream's handler returns.
func (g *streamGuard) stop() {
	g.cancel()
	<-g.done
}

// ended reports whether the stream was ended because the sandbox left
// running, and the last line that says why.
func (g *streamGuard) ended() (ndjson.Event, bool) {
	g.mu.Lock()
	rec := g.left
	g.mu.Unlock()
	if rec == nil {
		return ndjson.Event{}, false
	}
	return endEvent(rec), true
}

// endEvent is the last line of a stream whose sandbox left running:
// reason is "sandbox paused", "sandbox deleted", "sandbox timed out",
// etc.; detail says what to do next.
func endEvent(rec *store.Record) ndjson.Event {
	switch rec.Phase {
	case sandbox.PhasePausing, sandbox.PhasePaused, sandbox.PhaseResuming:
		return ndjson.Event{Type: ndjson.TypeEnd, Reason: "sandbox paused",
			Detail: fmt.Sprintf("sandbox %s was paused; resume it (POST /sandboxes/%s/connect) and open the stream again", rec.ID, rec.ID)}
	case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating, sandbox.PhaseRunning, sandbox.PhaseStopping, sandbox.PhaseDeleted, sandbox.PhaseCompleted, sandbox.PhaseFailed:
		// as below the switch; named so that a value added to the enum is decided here
	}
	reason := "sandbox deleted"
	switch rec.KillReason {
	case sandbox.KillTimeout:
		reason = "sandbox timed out"
	case sandbox.KillInsufficientCredits:
		reason = "sandbox killed: insufficient credits"
	case sandbox.KillCompleted:
		reason = "sandbox completed"
	case sandbox.KillFailed:
		reason = "sandbox failed"
	}
	return ndjson.Event{Type: ndjson.TypeEnd, Reason: reason,
		Detail: fmt.Sprintf("sandbox %s is %s; its processes and watches are gone", rec.ID, rec.PublicState())}
}
