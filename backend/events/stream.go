package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// keepAlive is how often an idle stream sends a comment, so proxies keep
// it open and a client notices a dead connection.
const keepAlive = 15 * time.Second

// streamPage bounds the events read per pass.
const streamPage = 500

// handleStream streams the org's events as Server-Sent Events (id: the
// event id, event: its type, data: its JSON) from now on, or from after the
// event named by Last-Event-ID. The store wakes it when a record changes
// (here, or on PostgreSQL at another replica); it reads again at least
// every Poll anyway.
func (s *Service) handleStream(w http.ResponseWriter, r *http.Request) error {
	q, err := httpx.Query(r, "type", "sandboxId")
	if err != nil {
		return err
	}
	types, err := parseTypes(q["type"])
	if err != nil {
		return err
	}
	sandboxID, org := q.Get("sandboxId"), httpx.Org(r)
	ctx, cancel := httpx.KeyContext(r) // the stream ends with its key (revoked or expired)
	defer cancel()
	var seq int64
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		seq, err = s.db.EventSeq(ctx, org, last)
		if errors.Is(err, store.ErrNotFound) {
			return httpx.NewError(http.StatusBadRequest, "validation_error",
				"Last-Event-ID: no event "+last+" (expired past the retention, or not this org's); reconnect without it and list the gap with GET /events")
		}
	} else {
		seq, err = s.db.LastEventSeq(ctx)
	}
	if err != nil {
		return err
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("the response writer cannot stream")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	idle := time.NewTimer(keepAlive)
	defer idle.Stop()
	for {
		wake := s.db.EventsChanged() // before the read: a write after it wakes us
		evs, held, err := s.db.EventsAfter(ctx, seq, streamPage, store.EventSettle, s.cfg.Now())
		if err != nil {
			if ctx.Err() != nil {
				keyEnded(ctx, w, flusher)
				return nil
			}
			s.cfg.Logger.Warn("event stream: reading events failed; ending the stream (the client resumes with Last-Event-ID)", "err", err)
			return nil
		}
		wrote := false
		for _, e := range evs {
			seq = e.Seq
			if e.OrgID != org || (sandboxID != "" && e.SandboxID != sandboxID) || (len(types) > 0 && !slices.Contains(types, e.Type)) {
				continue
			}
			body, _ := json.Marshal(View(e))
			if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", e.ID, e.Type, body); err != nil {
				return nil
			}
			wrote = true
		}
		if wrote {
			flusher.Flush()
		}
		if len(evs) == streamPage {
			continue
		}
		poll := s.cfg.Poll
		if held {
			poll = min(poll, 100*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			keyEnded(ctx, w, flusher)
			return nil
		case <-wake:
		case <-time.After(poll):
		case <-idle.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			flusher.Flush()
			idle.Reset(keepAlive)
		}
	}
}

// keyEnded says, when ctx ended because its key was revoked or expired, so
// before the stream closes: SSE has no end event, so it is a comment.
func keyEnded(ctx context.Context, w http.ResponseWriter, f http.Flusher) {
	if err := httpx.KeyEnded(ctx); err != nil {
		_, _ = fmt.Fprintf(w, ": %s; reconnect with a valid key (Last-Event-ID resumes)\n\n", err)
		f.Flush()
	}
}
