package e2bapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/e2bapi/internal/e2bevents"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/appenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

const evSecret = "an-e2b-webhook-secret"

// eventsEdge is a client of the backend's /e2b/events routes generated
// from E2B's documented events API (apitypes/e2bevents/events.yml), whose
// every exchange is checked against that document.
type eventsEdge struct {
	t   *testing.T
	env *appenv.Env
	c   *e2bevents.ClientWithResponses
	chk *e2bfake.Checker
	ctx context.Context
}

func newEventsEdge(t *testing.T) *eventsEdge {
	env := appenv.New(t, appenv.Opts{Config: func(c *app.Config) {
		c.Webhooks.AllowPrivate = true // the receiver is on 127.0.0.1
		c.Webhooks.BackoffBase, c.Webhooks.BackoffMax, c.Webhooks.Poll = 20*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	}})
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join("..", "..", "apitypes", "e2bevents", "events.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	chk := &e2bfake.Checker{Base: http.DefaultTransport, Prefix: "/e2b", Spec: &e2bfake.Spec{Doc: doc, Router: router}}
	c, err := e2bevents.NewClientWithResponses(env.Srv.URL+"/e2b", e2bevents.WithHTTPClient(&http.Client{Transport: chk}),
		e2bevents.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if r.Header.Get("X-API-Key") == "" {
				r.Header.Set("X-API-Key", env.Key)
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range chk.Problems() {
			t.Errorf("E2B's events API is not kept: %s", p)
		}
	})
	return &eventsEdge{t: t, env: env, c: c, chk: chk, ctx: context.Background()}
}

// e2bError asserts body is E2B's {code, message} with code, naming sub.
func (e *eventsEdge) e2bError(what string, code int, body []byte, sub string) {
	e.t.Helper()
	var v struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Code != code || !strings.Contains(v.Message, sub) || strings.Contains(string(body), `"detail"`) {
		e.t.Errorf("%s: want E2B's {code: %d, message naming %q}, got %s", what, code, sub, body)
	}
}

// flaky is a webhook receiver on 127.0.0.1 that answers 500 to its first
// request and 204 after, checking E2B's signature on each.
type flaky struct {
	srv  *httptest.Server
	mu   sync.Mutex
	n    int
	got  []string // event types accepted
	bad  []string
	seen map[string]int // event id → requests
}

func newFlaky(t *testing.T) *flaky {
	f := &flaky{seen: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(append([]byte(evSecret), body...))
		var ev struct{ ID, Type string }
		_ = json.Unmarshal(body, &ev)
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Header.Get("e2b-signature") != base64.RawStdEncoding.EncodeToString(sum[:]) {
			f.bad = append(f.bad, "e2b-signature does not verify")
		}
		f.n++
		f.seen[ev.ID]++
		if f.n == 1 {
			http.Error(w, "not yet", http.StatusInternalServerError)
			return
		}
		f.got = append(f.got, ev.Type)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// E2B's events API on the /e2b edge, driven by a client generated from
// E2B's documented contract, on the real backend and Docker: a sandbox's
// events in E2B's shape and paging, a webhook registered, listed, changed
// and deleted in E2B's shapes, its deliveries (a failed attempt, then
// successes) in E2B's delivery log and stats, and E2B's errors.
func TestE2BEventsAndWebhooks(t *testing.T) {
	e := newEventsEdge(t)
	rc := newFlaky(t)
	created := "sandbox.lifecycle.created"
	killed := "sandbox.lifecycle.killed"

	// Registration: E2B's WebhookCreate requires name, url, events and
	// signatureSecret; the secret is never shown.
	miss := e.env.Req("POST", "/e2b/events/webhooks", map[string]any{"name": "n", "url": rc.srv.URL, "signatureSecret": evSecret})
	if miss.Code != 400 {
		t.Fatalf("a create without events: want 400, got %s", miss)
	}
	e.e2bError("create without events", 400, miss.Body, "events")
	reg, err := e.c.WebhookCreateWithResponse(e.ctx, e2bevents.WebhookCreate{Name: "mine", Url: rc.srv.URL,
		Events: []string{created, killed}, SignatureSecret: evSecret})
	if err != nil {
		t.Fatal(err)
	}
	if reg.StatusCode() != 201 || reg.JSON201 == nil || reg.JSON201.Name != "mine" || !reg.JSON201.Enabled ||
		!slices.Equal(reg.JSON201.Events, []string{created, killed}) || strings.Contains(string(reg.Body), evSecret) {
		t.Fatalf("create: %d %s", reg.StatusCode(), reg.Body)
	}
	hook := reg.JSON201.Id

	// A sandbox's life through the edge.
	sb := e.env.Req("POST", "/e2b/sandboxes", map[string]any{"templateID": "base", "timeout": 120})
	if sb.Code != 201 {
		t.Fatalf("create sandbox: %s", sb)
	}
	id := sb.Obj(t)["sandboxID"].(string)
	if r := e.env.Req("DELETE", "/e2b/sandboxes/"+id, nil); r.Code != 204 {
		t.Fatalf("kill: %s", r)
	}
	var evs []e2bevents.SandboxEvent
	poll.Until(t, 60*time.Second, 50*time.Millisecond, func() error {
		res, err := e.c.GetSandboxEventsWithResponse(e.ctx, id, &e2bevents.GetSandboxEventsParams{OrderAsc: ptr(true)})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("GET /events/sandboxes/%s: %v %s", id, err, res.Body)
		}
		evs = *res.JSON200
		if len(evs) == 0 || evs[len(evs)-1].Type != killed {
			return fmt.Errorf("the sandbox's events: %s", res.Body)
		}
		return nil
	})
	if len(evs) != 2 || evs[0].Type != created {
		t.Fatalf("events oldest first: %+v", evs)
	}
	for _, ev := range evs {
		if ev.SandboxId != id || ev.Version != "v1" || ev.SandboxTemplateId != "base" || ev.SandboxExecutionId == "" ||
			ev.SandboxBuildId == "" || ev.SandboxTeamId == "" || ev.Id == "" || ev.Timestamp.IsZero() {
			t.Errorf("event in E2B's shape: %+v", ev)
		}
	}
	// Newest first by default; offset/limit paging; the types filter.
	page := func(p e2bevents.GetSandboxEventsParams) []string {
		t.Helper()
		res, err := e.c.GetSandboxEventsWithResponse(e.ctx, id, &p)
		if err != nil || res.JSON200 == nil {
			t.Fatalf("GET /events/sandboxes/%s %+v: %v %s", id, p, err, res.Body)
		}
		var ids []string
		for _, ev := range *res.JSON200 {
			ids = append(ids, ev.Id)
		}
		return ids
	}
	for _, c := range []struct {
		p    e2bevents.GetSandboxEventsParams
		want []string
	}{
		{e2bevents.GetSandboxEventsParams{}, []string{evs[1].Id, evs[0].Id}},
		{e2bevents.GetSandboxEventsParams{Limit: ptr[int32](1)}, []string{evs[1].Id}},
		{e2bevents.GetSandboxEventsParams{Limit: ptr[int32](1), Offset: ptr[int32](1)}, []string{evs[0].Id}},
		{e2bevents.GetSandboxEventsParams{Offset: ptr[int32](2)}, nil},
		{e2bevents.GetSandboxEventsParams{Types: &[]string{created}}, []string{evs[0].Id}},
	} {
		if got := page(c.p); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.p, got, c.want)
		}
	}
	team, err := e.c.ListSandboxEventsWithResponse(e.ctx, &e2bevents.ListSandboxEventsParams{Limit: ptr[int32](100)})
	if err != nil || team.JSON200 == nil || !slices.ContainsFunc(*team.JSON200, func(ev e2bevents.SandboxEvent) bool { return ev.Id == evs[1].Id }) {
		t.Fatalf("the team's events lack the sandbox's: %v %s", err, team.Body)
	}
	// E2B's errors.
	unknown, _ := e.c.GetSandboxEventsWithResponse(e.ctx, "nope", &e2bevents.GetSandboxEventsParams{})
	if unknown.StatusCode() != 404 {
		t.Errorf("an unknown sandbox: %d %s", unknown.StatusCode(), unknown.Body)
	}
	e.e2bError("unknown sandbox", 404, unknown.Body, "nope")
	bad := e.env.Req("GET", "/e2b/events/sandboxes?limit=0", nil)
	e.e2bError("limit=0", 400, bad.Body, "limit")
	badType := e.env.Req("GET", "/e2b/events/sandboxes?types=sandbox.lifecycle.exploded", nil)
	e.e2bError("an unknown type", 400, badType.Body, "types")
	anon := e.env.ReqKey("", "GET", "/e2b/events/webhooks", nil)
	e.e2bError("no API key", 401, anon.Body, "")

	// The delivery log: the created event's failed attempt (500) then its
	// success, the killed event's success; grouped by event, newest first.
	var groups []e2bevents.WebhookDeliveryGroup
	poll.Until(t, 60*time.Second, 50*time.Millisecond, func() error {
		res, err := e.c.WebhookDeliveriesListWithResponse(e.ctx, hook, &e2bevents.WebhookDeliveriesListParams{OrderAsc: ptr(true)})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("deliveries: %v %s", err, res.Body)
		}
		groups = res.JSON200.Data
		n := 0
		for _, g := range groups {
			for _, a := range g.Attempts {
				if a.Status == e2bevents.WebhookDeliveryStatusSuccess {
					n++
				}
			}
		}
		if n != 2 {
			return fmt.Errorf("%d of 2 events delivered: %s", n, res.Body)
		}
		return nil
	})
	if len(groups) != 2 || groups[0].EventId != evs[0].Id || groups[1].EventId != evs[1].Id || len(groups[0].Attempts) != 2 || len(groups[1].Attempts) != 1 {
		t.Fatalf("delivery groups: %+v", groups)
	}
	first, retry := groups[0].Attempts[0], groups[0].Attempts[1]
	if first.Status != e2bevents.WebhookDeliveryStatusFailed || first.ResponseHttpStatusCode == nil || *first.ResponseHttpStatusCode != 500 ||
		first.ErrorClass == nil || *first.ErrorClass != e2bevents.HttpError || first.ErrorMessage == nil || !strings.Contains(*first.ErrorMessage, "500") {
		t.Errorf("the failed attempt: %+v", first)
	}
	if retry.Status != e2bevents.WebhookDeliveryStatusSuccess || retry.ResponseHttpStatusCode == nil || *retry.ResponseHttpStatusCode != 204 ||
		retry.ErrorClass != nil || !retry.Timestamp.After(first.Timestamp) || retry.Id == first.Id {
		t.Errorf("the retry: %+v after %+v", retry, first)
	}
	for _, a := range append(groups[0].Attempts, groups[1].Attempts...) {
		if a.WebhookId != hook || a.RequestUrl != rc.srv.URL || !strings.Contains(a.RequestBody, a.EventId) || a.DurationMs < 0 ||
			strings.Contains(a.RequestHeaders, evSecret) || a.SandboxId != id || a.TeamId == "" {
			t.Errorf("attempt: %+v", a)
		}
	}
	failed, _ := e.c.WebhookDeliveriesListWithResponse(e.ctx, hook, &e2bevents.WebhookDeliveriesListParams{
		DeliveryStatus: &[]e2bevents.WebhookDeliveriesListParamsDeliveryStatus{e2bevents.WebhookDeliveriesListParamsDeliveryStatusFailed}})
	if failed.JSON200 == nil || len(failed.JSON200.Data) != 1 || len(failed.JSON200.Data[0].Attempts) != 1 || failed.JSON200.Data[0].Attempts[0].Id != first.Id {
		t.Errorf("deliveryStatus=failed: %s", failed.Body)
	}
	p1, _ := e.c.WebhookDeliveriesListWithResponse(e.ctx, hook, &e2bevents.WebhookDeliveriesListParams{Limit: ptr[int32](2)})
	if p1.JSON200 == nil || p1.JSON200.NextCursor == nil {
		t.Fatalf("page 1 of 2 attempts: %s", p1.Body)
	}
	p2, _ := e.c.WebhookDeliveriesListWithResponse(e.ctx, hook, &e2bevents.WebhookDeliveriesListParams{Limit: ptr[int32](2), Cursor: p1.JSON200.NextCursor})
	if p2.JSON200 == nil || len(p2.JSON200.Data) != 1 || p2.JSON200.Data[0].Attempts[0].Id != first.Id || p2.JSON200.NextCursor != nil {
		t.Errorf("page 2: %s", p2.Body)
	}
	stats, err := e.c.WebhookDeliveryStatsWithResponse(e.ctx, hook, &e2bevents.WebhookDeliveryStatsParams{})
	if err != nil || stats.JSON200 == nil || stats.JSON200.Total != 3 || stats.JSON200.Failed != 1 || len(stats.JSON200.Buckets) == 0 ||
		stats.JSON200.DurationMs.Maximum < stats.JSON200.DurationMs.Minimum {
		t.Errorf("stats: %v %s", err, stats.Body)
	}
	rc.mu.Lock()
	if len(rc.bad) > 0 || rc.seen[evs[0].Id] != 2 || rc.seen[evs[1].Id] != 1 {
		t.Errorf("receiver: bad %v, requests per event %v", rc.bad, rc.seen)
	}
	rc.mu.Unlock()

	// PATCH, list, DELETE (200, as E2B), then 404.
	upd, err := e.c.WebhookUpdateWithResponse(e.ctx, hook, e2bevents.WebhookConfiguration{Enabled: ptr(false), Name: ptr("renamed")})
	if err != nil || upd.JSON200 == nil || upd.JSON200.Enabled || upd.JSON200.Name != "renamed" {
		t.Fatalf("patch: %v %s", err, upd.Body)
	}
	list, err := e.c.WebhooksListWithResponse(e.ctx)
	if err != nil || list.JSON200 == nil || len(*list.JSON200) != 1 || (*list.JSON200)[0].Id != hook || (*list.JSON200)[0].Enabled {
		t.Fatalf("list: %v %s", err, list.Body)
	}
	// The native API sees the same webhook.
	if m := e.env.Must(200, "GET", "/events/webhooks/"+hook, nil); m["name"] != "renamed" {
		t.Errorf("native GET: %v", m)
	}
	del, err := e.c.WebhookDeleteWithResponse(e.ctx, hook)
	if err != nil || del.StatusCode() != 200 {
		t.Fatalf("delete: %v %d %s", err, del.StatusCode(), del.Body)
	}
	gone, _ := e.c.WebhookGetWithResponse(e.ctx, hook)
	if gone.StatusCode() != 404 {
		t.Fatalf("a deleted webhook: %d %s", gone.StatusCode(), gone.Body)
	}
	e.e2bError("deleted webhook", 404, gone.Body, hook)
}

// The edge's registration applies the native egress check: a URL to a
// loopback, link-local or private address is refused (400 naming url, in
// E2B's shape) unless the operator allows private targets. The addresses
// are classified, never contacted.
func TestE2BWebhookRefusesPrivateTargets(t *testing.T) {
	env := appenv.New(t, appenv.Opts{NoLoops: true})
	for _, u := range []string{"http://127.0.0.1:9/hook", "http://169.254.169.254/latest", "http://10.1.2.3/", "http://[::1]:9/"} {
		r := env.Req("POST", "/e2b/events/webhooks", map[string]any{"name": "n", "url": u, "events": []string{}, "signatureSecret": evSecret})
		if r.Code != 400 {
			t.Errorf("%s: want 400, got %s", u, r)
			continue
		}
		var v struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(r.Body, &v); err != nil || v.Code != 400 || !strings.Contains(v.Message, "url") {
			t.Errorf("%s: want E2B's {code: 400, message naming url}, got %s", u, r)
		}
	}
	if r := env.Req("GET", "/e2b/events/webhooks", nil); r.Code != 200 || strings.TrimSpace(string(r.Body)) != "[]" {
		t.Errorf("webhooks after the refusals: %s", r)
	}
}
