package events

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

func (s *Service) registerWebhooks(r *mux.Router) {
	r.Handle("/events/webhooks", httpx.Handler(s.handleWebhookCreate)).Methods(http.MethodPost)
	r.Handle("/events/webhooks", httpx.Handler(s.handleWebhookList)).Methods(http.MethodGet)
	r.Handle("/events/webhooks/{id}", httpx.Handler(s.handleWebhookGet)).Methods(http.MethodGet)
	r.Handle("/events/webhooks/{id}", httpx.Handler(s.handleWebhookPatch)).Methods(http.MethodPatch)
	r.Handle("/events/webhooks/{id}", httpx.Handler(s.handleWebhookDelete)).Methods(http.MethodDelete)
	r.Handle("/events/webhooks/{id}/deliveries", httpx.Handler(s.handleDeliveries)).Methods(http.MethodGet)
	r.Handle("/events/webhooks/{id}/deliveries/{deliveryId}/redeliver", httpx.Handler(s.handleRedeliver)).Methods(http.MethodPost)
}

// WebhookBody is E2B's webhook body (the document's WebhookBody); on PATCH
// every field is optional.
type WebhookBody = apitypes.WebhookBody

// WebhookViewOf renders w as shown (the document's Webhook): never its
// secret.
func WebhookViewOf(w *store.Webhook) apitypes.Webhook {
	ev := w.Events
	if ev == nil {
		ev = []string{}
	}
	return apitypes.Webhook{Id: w.ID, TeamId: w.OrgID, Name: w.Name, Url: w.URL, Enabled: w.Enabled, Events: ev,
		CreatedAt: w.CreatedAt, DisabledReason: optString(w.DisabledReason)}
}

// optString is s for an optional property: nil (absent) when empty.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// optInt is n for an optional property: nil (absent) when 0.
func optInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// minSecret is the shortest signature secret accepted: a guessable secret
// lets anyone forge deliveries.
const minSecret = 16

// apply validates b and applies it to w.
func (s *Service) apply(r *http.Request, w *store.Webhook, b *WebhookBody) error {
	if err := checkFields(b); err != nil {
		return err
	}
	if b.Name != nil {
		if len(*b.Name) > 256 {
			return httpx.Invalid("name", "at most 256 characters")
		}
		w.Name = *b.Name
	}
	if b.Enabled != nil {
		w.Enabled = *b.Enabled
		if w.Enabled {
			w.DisabledReason = ""
		}
	}
	if b.Events != nil {
		for _, t := range *b.Events {
			if !slices.Contains(Types, t) {
				return httpx.Invalid("events", "unknown event type "+t+"; use sandbox.lifecycle.{created,updated,paused,resumed,killed,completed,failed} or environment.lifecycle.*")
			}
		}
		w.Events = *b.Events
	}
	if b.SignatureSecret != nil {
		if len(*b.SignatureSecret) < minSecret {
			return httpx.Invalid("signatureSecret", "must be at least 16 characters")
		}
		w.Secret = *b.SignatureSecret
	}
	// Last: the other fields are checked before the URL's host is resolved.
	if b.Url != nil {
		if err := checkTarget(r.Context(), *b.Url, s.cfg.Delivery.AllowPrivate); err != nil {
			return httpx.Invalid("url", err.Error())
		}
		w.URL = *b.Url
	}
	return nil
}

// CreateWebhook validates b and registers it as a webhook of the request's
// org (POST /events/webhooks, here and on the E2B edge).
func (s *Service) CreateWebhook(r *http.Request, b *WebhookBody) (*store.Webhook, error) {
	switch {
	case b.Url == nil:
		return nil, httpx.Invalid("url", "required")
	case b.SignatureSecret == nil:
		return nil, httpx.Invalid("signatureSecret", "required: deliveries are signed with it (e2b-signature)")
	}
	wh := &store.Webhook{ID: "wh_" + randomHex(12), OrgID: httpx.Org(r), Enabled: true, CreatedAt: s.cfg.Now().UTC()}
	if err := s.apply(r, wh, b); err != nil {
		return nil, err
	}
	// Each webhook costs a delivery per event: an org's count is bounded,
	// checked in the insert's transaction (creates at once cannot pass it).
	max := s.cfg.Delivery.MaxPerOrg
	var limit *store.ErrWebhookLimit
	if err := s.db.AddWebhook(r.Context(), wh, max); errors.As(err, &limit) {
		return nil, httpx.NewError(http.StatusConflict, "webhook_limit_reached", fmt.Sprintf(
			"this organization has %d webhooks, the most it may have (DREADNODE_WEBHOOK_MAX_PER_ORG=%d): delete one (DELETE /events/webhooks/{id}) or ask the operator to raise the limit",
			limit.Have, max))
	} else if err != nil {
		return nil, err
	}
	return wh, nil
}

// UpdateWebhook validates b and applies it to wh (PATCH).
func (s *Service) UpdateWebhook(r *http.Request, wh *store.Webhook, b *WebhookBody) error {
	if err := s.apply(r, wh, b); err != nil {
		return err
	}
	return s.db.PutWebhook(r.Context(), wh)
}

func (s *Service) handleWebhookCreate(w http.ResponseWriter, r *http.Request) error {
	var b WebhookBody
	if err := httpx.Decode(r, &b, nil); err != nil {
		return err
	}
	wh, err := s.CreateWebhook(r, &b)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, WebhookViewOf(wh))
	return nil
}

func (s *Service) handleWebhookList(w http.ResponseWriter, r *http.Request) error {
	hooks, err := s.db.ListWebhooks(r.Context(), httpx.Org(r))
	if err != nil {
		return err
	}
	out := make([]apitypes.Webhook, len(hooks))
	for i, h := range hooks {
		out[i] = WebhookViewOf(h)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// loadWebhook reads the path's webhook: 404 for unknown ids and other orgs'.
func (s *Service) loadWebhook(r *http.Request) (*store.Webhook, error) {
	id := mux.Vars(r)["id"]
	wh, err := s.db.GetWebhook(r.Context(), httpx.Org(r), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, httpx.NotFound("webhook", id)
	}
	return wh, err
}

func (s *Service) handleWebhookGet(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.loadWebhook(r)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, WebhookViewOf(wh))
	return nil
}

func (s *Service) handleWebhookPatch(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.loadWebhook(r)
	if err != nil {
		return err
	}
	var b WebhookBody
	if err := httpx.Decode(r, &b, nil); err != nil {
		return err
	}
	if err := s.UpdateWebhook(r, wh, &b); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, WebhookViewOf(wh))
	return nil
}

func (s *Service) handleWebhookDelete(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["id"]
	if err := s.db.DeleteWebhook(r.Context(), httpx.Org(r), id); errors.Is(err, store.ErrNotFound) {
		return httpx.NotFound("webhook", id)
	} else if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// attemptView renders one attempt of a delivery (the document's
// WebhookAttempt): when the POST started, how long it took, the receiver's
// status (absent: no answer) and why it failed (absent: a 2xx).
func attemptView(a *store.Attempt) apitypes.WebhookAttempt {
	v := apitypes.WebhookAttempt{Id: a.ID, At: a.At.UTC(), DurationMs: a.Duration.Milliseconds(), StatusCode: optInt(a.StatusCode), Error: optString(a.Error)}
	if a.ErrorClass != "" {
		c := apitypes.WebhookAttemptErrorClass(a.ErrorClass)
		v.ErrorClass = &c
	}
	return v
}

// deliveryView renders one entry of a webhook's delivery log (the
// document's WebhookDelivery); its attempt log is filled by the caller.
func deliveryView(d *store.Delivery) apitypes.WebhookDelivery {
	v := apitypes.WebhookDelivery{Id: d.ID, EventId: d.EventID, EventType: d.EventType, SandboxId: d.SandboxID,
		Status: apitypes.WebhookDeliveryStatus(d.Status), Attempts: d.Attempts, LastStatus: optInt(d.LastStatus),
		LastError: optString(d.LastError), CreatedAt: d.CreatedAt, AttemptLog: []apitypes.WebhookAttempt{}}
	if d.Status == store.DeliveryPending {
		n := d.NextAt
		v.NextAttemptAt = &n
	}
	if !d.DeliveredAt.IsZero() {
		t := d.DeliveredAt
		v.DeliveredAt = &t
	}
	return v
}

func (s *Service) handleDeliveries(w http.ResponseWriter, r *http.Request) error {
	q, err := httpx.Query(r, "limit")
	if err != nil {
		return err
	}
	limit, err := httpx.ParseLimit(q.Get("limit"), apitypes.ParamEventLimitDefault, apitypes.ParamEventLimitMaximum)
	if err != nil {
		return err
	}
	wh, err := s.loadWebhook(r)
	if err != nil {
		return err
	}
	ds, err := s.db.ListDeliveries(r.Context(), wh.ID, limit)
	if err != nil {
		return err
	}
	out := make([]apitypes.WebhookDelivery, len(ds))
	at := make(map[string]int, len(ds))
	ids := make([]string, len(ds))
	for i, d := range ds {
		out[i], at[d.ID], ids[i] = deliveryView(d), i, d.ID
	}
	tries, err := s.db.AttemptsOf(r.Context(), wh.ID, ids)
	if err != nil {
		return err
	}
	for _, a := range tries {
		v := &out[at[a.DeliveryID]]
		v.AttemptLog = append(v.AttemptLog, attemptView(a))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) handleRedeliver(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.loadWebhook(r)
	if err != nil {
		return err
	}
	id := mux.Vars(r)["deliveryId"]
	d, err := s.db.Redeliver(r.Context(), wh.ID, id, s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return httpx.NotFound("delivery", id)
	} else if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusAccepted, deliveryView(d))
	return nil
}
