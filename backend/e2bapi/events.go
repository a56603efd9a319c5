package e2bapi

// E2B's lifecycle events API (https://e2b.dev/docs/sandbox/lifecycle-events-api
// and .../lifecycle-events-webhooks; absent from openapi.yml): the event
// listings and the webhooks, over the events service behind the native
// §12 routes (the same events, webhooks, deliveries and attempt log), in
// E2B's shapes: events as E2B's SandboxEvent, offset paging newest first,
// DELETE answering 200, and the delivery log as attempts grouped by event.

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2bevents"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/events"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// registerEvents adds E2B's /events routes.
func (e *Edge) registerEvents(r *mux.Router) {
	if e.cfg.Events == nil {
		return
	}
	h := func(f httpx.Handler) http.Handler { return f }
	r.Handle("/events/sandboxes", h(e.handleEvents)).Methods(http.MethodGet)
	r.Handle("/events/sandboxes/{sandboxID}", h(e.handleSandboxEvents)).Methods(http.MethodGet)
	r.Handle("/events/webhooks", h(e.handleWebhookCreate)).Methods(http.MethodPost)
	r.Handle("/events/webhooks", h(e.handleWebhookList)).Methods(http.MethodGet)
	r.Handle("/events/webhooks/{webhookID}", h(e.handleWebhookGet)).Methods(http.MethodGet)
	r.Handle("/events/webhooks/{webhookID}", h(e.handleWebhookPatch)).Methods(http.MethodPatch)
	r.Handle("/events/webhooks/{webhookID}", h(e.handleWebhookDelete)).Methods(http.MethodDelete)
	r.Handle("/events/webhooks/{webhookID}/deliveries", h(e.handleWebhookDeliveries)).Methods(http.MethodGet)
	r.Handle("/events/webhooks/{webhookID}/stats", h(e.handleWebhookStats)).Methods(http.MethodGet)
}

// E2B's paging of event listings.
const (
	eventsDefaultLimit = apitypes.ParamE2BEventsLimitDefault
	eventsMaxLimit     = apitypes.ParamE2BEventsLimitMaximum
	// eventsMaxOffset bounds how deep an offset reads (a deeper page is
	// past any retention's worth of a listing a client pages through).
	eventsMaxOffset = apitypes.ParamE2BEventsOffsetMaximum
)

func (e *Edge) handleEvents(w http.ResponseWriter, r *http.Request) error {
	return e.listEvents(w, r, "")
}

// handleSandboxEvents lists one sandbox's events, ended sandboxes' included
// (E2B keeps them for the retention): 404 for an unknown id, another org's
// sandbox or a task environment.
func (e *Edge) handleSandboxEvents(w http.ResponseWriter, r *http.Request) error {
	id := pathID(r)
	rec, err := e.db.GetOrgRecord(r.Context(), httpx.Org(r), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !sandbox.AddressedAsSandbox(rec.Kind)) {
		return notFound(id, "")
	}
	if err != nil {
		return err
	}
	return e.listEvents(w, r, id)
}

// listEvents answers E2B's [SandboxEvent]: newest first unless orderAsc,
// offset/limit paging, types filter.
func (e *Edge) listEvents(w http.ResponseWriter, r *http.Request, sandboxID string) error {
	q := r.URL.Query()
	f := store.EventFilter{OrgID: httpx.Org(r), SandboxID: sandboxID, Desc: true}
	var err error
	if f.Limit, err = httpx.ParseLimit(q.Get("limit"), eventsDefaultLimit, eventsMaxLimit); err != nil {
		return err
	}
	if v := q.Get("offset"); v != "" {
		if f.Offset, err = strconv.Atoi(v); err != nil || f.Offset < 0 || f.Offset > eventsMaxOffset {
			return httpx.InvalidQuery("offset", "must be an integer between 0 and "+strconv.Itoa(eventsMaxOffset))
		}
	}
	if v := q.Get("orderAsc"); v != "" {
		asc, err := strconv.ParseBool(v)
		if err != nil {
			return httpx.InvalidQuery("orderAsc", "must be true or false")
		}
		f.Desc = !asc
	}
	if f.Types, err = eventTypes("types", q["types"]); err != nil {
		return err
	}
	evs, err := e.db.ListEvents(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]e2bevents.SandboxEvent, len(evs))
	for i, ev := range evs {
		out[i] = e2bEventOf(ev)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// e2bEventOf is E2B's SandboxEvent of ev: the native event (events.View,
// also the body of a delivery) without the fields E2B's shape lacks (cause,
// sandboxMetadata: the metadata stays in eventData.sandbox_metadata). The
// deprecated eventCategory and eventLabel are still sent, as E2B does.
func e2bEventOf(ev *store.Event) e2bevents.SandboxEvent {
	v := events.View(ev)
	category, label := string(v.EventCategory), string(v.EventLabel)
	return e2bevents.SandboxEvent{Id: v.Id, Version: string(v.Version), Type: v.Type,
		EventCategory: &category, EventLabel: &label, //nolint:staticcheck // deprecated by E2B, still sent by it (clients read them)
		EventData: e2bEventData(v.EventData), Timestamp: v.Timestamp, SandboxId: v.SandboxId, SandboxExecutionId: v.SandboxExecutionId,
		SandboxTemplateId: v.SandboxTemplateId, SandboxBuildId: v.SandboxBuildId, SandboxTeamId: v.SandboxTeamId}
}

// e2bEventData is the native event data in E2B's SandboxEventData: the
// metadata and the run typed, the keys E2B's pages do not list (end_at,
// exit_code, kill_reason, environment_id) as additional properties, each
// only when set, as the native data leaves them out.
func e2bEventData(d apitypes.LifecycleEventData) *e2bevents.SandboxEventData {
	out := &e2bevents.SandboxEventData{SandboxMetadata: d.SandboxMetadata}
	if d.SandboxMetadata == nil {
		// The generated encoder leaves a nil map out; E2B's field is
		// required, and was always sent (null without metadata).
		out.Set("sandbox_metadata", nil)
	}
	if x := d.Execution; x != nil {
		out.Execution = &e2bevents.SandboxExecution{StartedAt: x.StartedAt, VcpuCount: x.VcpuCount, MemoryMb: x.MemoryMb, ExecutionTime: x.ExecutionTime}
	}
	if d.EndAt != nil {
		out.Set("end_at", *d.EndAt)
	}
	if d.EnvironmentId != nil {
		out.Set("environment_id", *d.EnvironmentId)
	}
	if d.ExitCode != nil {
		out.Set("exit_code", *d.ExitCode)
	}
	if d.KillReason != nil {
		out.Set("kill_reason", *d.KillReason)
	}
	return out
}

// e2bWebhookOf is E2B's WebhookDetail (and WebhookCreation): the native
// view without disabledReason, which E2B's shape lacks (the native GET
// /events/webhooks/{id} shows it).
func e2bWebhookOf(wh *store.Webhook) e2bevents.WebhookDetail {
	v := events.WebhookViewOf(wh)
	return e2bevents.WebhookDetail{Id: v.Id, TeamId: v.TeamId, Name: v.Name, CreatedAt: v.CreatedAt, Url: v.Url, Enabled: v.Enabled, Events: v.Events}
}

// eventTypes reads a filter of event types (repeated or comma-separated).
func eventTypes(param string, vals []string) ([]string, error) {
	types := httpx.SplitValues(vals)
	for _, t := range types {
		if !slices.Contains(events.Types, t) {
			return nil, httpx.InvalidQuery(param, "unknown event type "+t+"; use sandbox.lifecycle.{created,updated,paused,resumed,killed,completed,failed}")
		}
	}
	return types, nil
}

// webhookCreate is E2B's WebhookCreate: every field but enabled required.
func webhookCreate(b *events.WebhookBody) error {
	switch {
	case b.Name == nil:
		return httpx.Invalid("name", "required")
	case b.Url == nil:
		return httpx.Invalid("url", "required")
	case b.Events == nil:
		return httpx.Invalid("events", "required: the event types to send, e.g. [\"sandbox.lifecycle.killed\"]")
	case b.SignatureSecret == nil:
		return httpx.Invalid("signatureSecret", "required: deliveries are signed with it (e2b-signature)")
	}
	return nil
}

func (e *Edge) handleWebhookCreate(w http.ResponseWriter, r *http.Request) error {
	var b events.WebhookBody
	if err := httpx.DecodeLenient(r, &b); err != nil {
		return err
	}
	if err := webhookCreate(&b); err != nil {
		return err
	}
	wh, err := e.cfg.Events.CreateWebhook(r, &b)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, e2bWebhookOf(wh))
	return nil
}

func (e *Edge) handleWebhookList(w http.ResponseWriter, r *http.Request) error {
	hooks, err := e.db.ListWebhooks(r.Context(), httpx.Org(r))
	if err != nil {
		return err
	}
	out := make([]e2bevents.WebhookDetail, len(hooks))
	for i, h := range hooks {
		out[i] = e2bWebhookOf(h)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// loadWebhook reads the path's webhook: 404 for unknown ids and other orgs'.
func (e *Edge) loadWebhook(r *http.Request) (*store.Webhook, error) {
	id := mux.Vars(r)["webhookID"]
	wh, err := e.db.GetWebhook(r.Context(), httpx.Org(r), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, httpx.NotFound("webhook", id)
	}
	return wh, err
}

func (e *Edge) handleWebhookGet(w http.ResponseWriter, r *http.Request) error {
	wh, err := e.loadWebhook(r)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, e2bWebhookOf(wh))
	return nil
}

func (e *Edge) handleWebhookPatch(w http.ResponseWriter, r *http.Request) error {
	wh, err := e.loadWebhook(r)
	if err != nil {
		return err
	}
	var b events.WebhookBody
	if err := httpx.DecodeLenient(r, &b); err != nil {
		return err
	}
	if err := e.cfg.Events.UpdateWebhook(r, wh, &b); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, e2bWebhookOf(wh))
	return nil
}

// handleWebhookDelete answers 200 with no body, as E2B does.
func (e *Edge) handleWebhookDelete(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["webhookID"]
	if err := e.db.DeleteWebhook(r.Context(), httpx.Org(r), id); errors.Is(err, store.ErrNotFound) {
		return httpx.NotFound("webhook", id)
	} else if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// redactedHeaders are the request headers of a delivery as E2B shows them:
// the names sent, the signatures redacted (the timestamp is not kept).
var redactedHeaders = func() string {
	b, _ := json.Marshal(map[string]string{"Content-Type": "application/json", "e2b-signature-version": "v1",
		"e2b-signature": "[redacted]", "webhook-signature": "[redacted]"})
	return string(b)
}()

// e2bAttemptOf is E2B's WebhookDelivery: one attempt.
func e2bAttemptOf(org string, a *store.Attempt) e2bevents.WebhookDelivery {
	out := e2bevents.WebhookDelivery{Id: a.ID, TeamId: org, WebhookId: a.WebhookID, EventId: a.EventID, SandboxId: a.SandboxID,
		EventType: a.EventType, Status: e2bevents.WebhookDeliveryStatusSuccess, DurationMs: int32(min(a.Duration.Milliseconds(), math.MaxInt32)), RequestBody: string(a.Body),
		RequestHeaders: redactedHeaders, RequestUrl: a.URL, Timestamp: a.At.UTC()}
	if a.StatusCode != 0 {
		code, body := int32(a.StatusCode), a.ResponseBody
		out.ResponseHttpStatusCode, out.ResponseBody = &code, &body
	}
	if !a.Success() {
		out.Status = e2bevents.WebhookDeliveryStatusFailed
		msg, class := a.Error, e2bevents.WebhookDeliveryErrorClass(a.ErrorClass)
		out.ErrorMessage, out.ErrorClass = &msg, &class
	}
	return out
}

const attemptsCursor = "e2b-attempts"

// handleWebhookDeliveries is E2B's delivery log: attempts, newest first
// unless orderAsc, grouped by event; limit counts attempts; start/end,
// deliveryStatus and eventType filter them; nextCursor pages on.
func (e *Edge) handleWebhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	wh, err := e.loadWebhook(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.AttemptFilter{WebhookID: wh.ID}
	if f.Limit, err = httpx.ParseLimit(q.Get("limit"), apitypes.ParamE2BWebhookDeliveriesLimitDefault, apitypes.ParamE2BWebhookDeliveriesLimitMaximum); err != nil {
		return err
	}
	if v := q.Get("orderAsc"); v != "" {
		if f.Asc, err = strconv.ParseBool(v); err != nil {
			return httpx.InvalidQuery("orderAsc", "must be true or false")
		}
	}
	if f.Cursor, err = httpx.DecodeCursor(attemptsCursor, q.Get("cursor")); err != nil {
		return err
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"start", &f.Start}, {"end", &f.End}} {
		if v := q.Get(p.name); v != "" {
			if *p.to, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return httpx.InvalidQuery(p.name, "must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z")
			}
		}
	}
	switch st := httpx.SplitValues(q["deliveryStatus"]); {
	case len(st) == 0, slices.Contains(st, "success") && slices.Contains(st, "failed"):
	case len(st) == 1 && (st[0] == "success" || st[0] == "failed"):
		ok := st[0] == "success"
		f.Success = &ok
	default:
		return httpx.InvalidQuery("deliveryStatus", "must be success, failed or both")
	}
	if f.Types, err = eventTypes("eventType", q["eventType"]); err != nil {
		return err
	}
	tries, err := e.db.ListAttempts(r.Context(), f)
	if err != nil {
		return err
	}
	page := e2bevents.WebhookDeliveriesListPayload{Data: []e2bevents.WebhookDeliveryGroup{}}
	group := map[string]int{} // delivery id → its group
	for _, a := range tries {
		i, ok := group[a.DeliveryID]
		if !ok {
			i = len(page.Data)
			group[a.DeliveryID] = i
			page.Data = append(page.Data, e2bevents.WebhookDeliveryGroup{EventId: a.EventID, EventType: a.EventType, SandboxId: a.SandboxID})
		}
		page.Data[i].Attempts = append(page.Data[i].Attempts, e2bAttemptOf(wh.OrgID, a))
	}
	if len(tries) == f.Limit {
		c := httpx.EncodeCursor(attemptsCursor, tries[len(tries)-1].Seq)
		page.NextCursor = &c
	}
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

// handleWebhookStats is E2B's WebhookDeliveryStats over [start, end)
// (default: the last 24 h) in hourly buckets.
func (e *Edge) handleWebhookStats(w http.ResponseWriter, r *http.Request) error {
	wh, err := e.loadWebhook(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	end, start := time.Now().UTC(), time.Time{}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"start", &start}, {"end", &end}} {
		if v := q.Get(p.name); v != "" {
			if *p.to, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return httpx.InvalidQuery(p.name, "must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z")
			}
		}
	}
	if start.IsZero() {
		start = end.Add(-24 * time.Hour)
	}
	if !start.Before(end) {
		return httpx.InvalidQuery("start", "must be before end")
	}
	bucket := time.Hour
	if end.Sub(start) > 31*24*time.Hour {
		bucket = 24 * time.Hour // at most a few hundred buckets
	}
	all, buckets, err := e.db.AttemptStats(r.Context(), wh.ID, start, end, bucket)
	if err != nil {
		return err
	}
	ms := func(s store.AttemptStat) e2bevents.WebhookDeliveryDurationStats {
		return e2bevents.WebhookDeliveryDurationStats{Minimum: float64(s.Min) / 1e6, Average: float64(s.Avg) / 1e6, Maximum: float64(s.Max) / 1e6}
	}
	out := e2bevents.WebhookDeliveryStats{Buckets: []e2bevents.WebhookDeliveryStatsBucket{}, Total: all.Total, Failed: all.Failed, DurationMs: ms(all)}
	for _, b := range buckets {
		out.Buckets = append(out.Buckets, e2bevents.WebhookDeliveryStatsBucket{Timestamp: b.Start.UTC(), Total: b.Total, Failed: b.Failed, DurationMs: ms(b)})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}
