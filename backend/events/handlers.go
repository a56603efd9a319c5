package events

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Register adds the §12 event routes to r, whose requests are already
// authenticated.
func (s *Service) Register(r *mux.Router) {
	r.Handle("/events", httpx.Handler(s.handleList)).Methods(http.MethodGet)
	r.Handle("/events/stream", httpx.Handler(s.handleStream)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}/events", httpx.Handler(s.handleSandboxList)).Methods(http.MethodGet)
	s.registerWebhooks(r)
}

const cursorKind = "events"

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) error {
	return s.list(w, r, "")
}

// handleSandboxList lists one sandbox's events: 404 for an unknown id,
// another org's sandbox, or a task environment's record (not a sandbox of
// this API; its events are in GET /events).
func (s *Service) handleSandboxList(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["id"]
	rec, err := s.db.GetOrgRecord(r.Context(), httpx.Org(r), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !sandbox.AddressedAsSandbox(rec.Kind)) {
		return httpx.NotFound("sandbox", id)
	}
	if err != nil {
		return err
	}
	return s.list(w, r, id)
}

func (s *Service) list(w http.ResponseWriter, r *http.Request, sandboxID string) error {
	q, err := httpx.Query(r, "type", "since", "cursor", "limit", "order")
	if err != nil {
		return err
	}
	f := store.EventFilter{OrgID: httpx.Org(r), SandboxID: sandboxID}
	if f.Desc, err = httpx.ParseOrder(q.Get("order")); err != nil {
		return err
	}
	kind := httpx.CursorKind(cursorKind, f.Desc) // a cursor of one order is refused by the other
	if f.Types, err = parseTypes(q["type"]); err != nil {
		return err
	}
	if v := q.Get("since"); v != "" {
		if f.Since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return httpx.InvalidQuery("since", "must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z")
		}
	}
	if f.AfterSeq, err = httpx.DecodeCursor(kind, q.Get("cursor")); err != nil {
		return err
	}
	if f.Limit, err = httpx.ParseLimit(q.Get("limit"), apitypes.ParamEventLimitDefault, apitypes.ParamEventLimitMaximum); err != nil {
		return err
	}
	limit := f.Limit
	f.Limit++ // one more tells whether there is a next page
	evs, err := s.db.ListEvents(r.Context(), f)
	if err != nil {
		return err
	}
	page := apitypes.EventPage{Items: make([]apitypes.LifecycleEvent, 0, len(evs))}
	if len(evs) > limit {
		evs = evs[:limit]
		c := httpx.EncodeCursor(kind, evs[limit-1].Seq)
		page.NextCursor = &c
	}
	for _, e := range evs {
		page.Items = append(page.Items, View(e))
	}
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

// parseTypes reads the type filter (repeated or comma-separated).
func parseTypes(vals []string) ([]string, error) {
	types := httpx.SplitValues(vals)
	for _, t := range types {
		if !slices.Contains(Types, t) {
			return nil, httpx.InvalidQuery("type", "unknown event type "+t+"; use one of sandbox.lifecycle.{created,updated,paused,resumed,killed,completed,failed} or environment.lifecycle.*")
		}
	}
	return types, nil
}
