package e2b_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

// hooked is a provider whose callback is served on a test server registered
// with the fake as E2B_WEBHOOK_URL.
func hooked(t *testing.T, mutate func(*e2b.Config)) (env, string, <-chan compute.Event) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	url := srv.URL + "/callbacks/e2b/lifecycle"
	e := setup(t, func(c *e2b.Config) {
		c.WebhookURL = url
		if mutate != nil {
			mutate(c)
		}
	})
	mux.Handle(e.p.WebhookPath(), e.p.CallbackHandler())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := e.p.RegisterWebhook(ctx); err != nil {
		t.Fatalf("registering the webhook: %v", err)
	}
	return e, url, e.p.Watch(ctx)
}

func nextEvent(t *testing.T, ch <-chan compute.Event) compute.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event from the webhook within 5s")
	}
	return compute.Event{}
}

// E2B's kills and pauses of our sandboxes reach Watch through the signed
// webhook, as their record ids; another deployment's sandboxes do not.
func TestWebhookEventsReachWatch(t *testing.T) {
	e, _, events := hooked(t, nil)
	ctx := ctxT(t)
	other := e.fake.AddSandbox(e2bfake.SandboxSpec{Metadata: map[string]string{compute.LabelManaged: "true", compute.LabelDeployment: "dep-other", compute.LabelRecord: "rec-other"}})
	e.fake.Kill(other) // another deployment's: ignored
	inst, err := e.prov.Create(ctx, spec("rec-1"))
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Pause(inst.Ref.ID)
	if ev := nextEvent(t, events); ev.RecordID != "rec-1" || ev.Status != compute.StatusPaused || ev.Ref.ID != inst.Ref.ID {
		t.Fatalf("after E2B paused it: %+v (another deployment's kill must not come through)", ev)
	}
	e.fake.Kill(inst.Ref.ID)
	if ev := nextEvent(t, events); ev.RecordID != "rec-1" || ev.Status != compute.StatusExited {
		t.Fatalf("after E2B killed it: %+v", ev)
	}
	for _, d := range e.fake.Deliveries() {
		for _, h := range []string{"e2b-webhook-id", "e2b-delivery-id", "e2b-signature-version", "e2b-signature"} {
			if d.Header.Get(h) == "" {
				t.Fatalf("delivery without %s: %v", h, d.Header)
			}
		}
		if d.Status != http.StatusOK {
			t.Fatalf("the callback answered %d to a signed delivery", d.Status)
		}
	}
}

// Registration is idempotent (a second replica reuses the first one's) and
// a registration made with another secret is replaced, not reused.
func TestRegisterWebhookIsIdempotent(t *testing.T) {
	e, url, _ := hooked(t, nil)
	ctx := ctxT(t)
	if err := e.p.RegisterWebhook(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := e2b.New(e2b.Config{APIKey: e.fake.APIKey, APIURL: e.fake.URL, HTTPClient: e.fake.HTTPClient(), Retry: fastRetry, WebhookURL: url})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.RegisterWebhook(ctx); err != nil {
		t.Fatal(err)
	}
	if hooks := e.fake.Webhooks(); len(hooks) != 1 || hooks[0] != url {
		t.Fatalf("after three registrations E2B has %v, want one of %s", hooks, url)
	}
	rotated, err := e2b.New(e2b.Config{APIKey: e.fake.APIKey, APIURL: e.fake.URL, HTTPClient: e.fake.HTTPClient(), Retry: fastRetry,
		WebhookURL: url, WebhookSecret: "rotated-secret-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rotated.RegisterWebhook(ctx); err != nil {
		t.Fatal(err)
	}
	if hooks := e.fake.Webhooks(); len(hooks) != 1 {
		t.Fatalf("after a new secret E2B has %v, want the old registration replaced", hooks)
	}
	// The old provider's secret is no longer the one E2B signs with: its
	// callback refuses what E2B now sends (it would have to be restarted).
	inst, err := e.prov.Create(ctx, spec("rec-2"))
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Kill(inst.Ref.ID)
	eventually(t, "a delivery refused with 401", func() bool {
		for _, d := range e.fake.Deliveries() {
			if d.Status == http.StatusUnauthorized {
				return true
			}
		}
		return false
	})
}

// The callback refuses oversized bodies, other signature versions and
// deliveries without an id, and is not served without a webhook URL.
func TestCallbackRefusesBadRequests(t *testing.T) {
	e, url, _ := hooked(t, nil)
	post := func(body []byte, hdr map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	big := []byte(`{"type":"` + strings.Repeat("x", 70<<10) + `"}`)
	if code := post(big, nil); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 70 KiB body: %d, want 413", code)
	}
	if code := post([]byte(`{}`), map[string]string{"e2b-signature-version": "v9"}); code != http.StatusUnauthorized {
		t.Fatalf("signature version v9: %d, want 401", code)
	}
	plain, err := e2b.New(e2b.Config{APIKey: "k", APIURL: e.fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	plain.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/callbacks/e2b/lifecycle", nil))
	if rec.Code != http.StatusNotFound || plain.WebhookPath() != "" {
		t.Fatalf("without E2B_WEBHOOK_URL the callback answered %d (path %q)", rec.Code, plain.WebhookPath())
	}
	if err := plain.RegisterWebhook(ctxT(t)); err != nil || len(e.fake.Webhooks()) != 1 {
		t.Fatalf("without E2B_WEBHOOK_URL RegisterWebhook must do nothing: %v %v", err, e.fake.Webhooks())
	}
	for _, bad := range []string{"ftp://x/cb", "https://example.com", "not a url"} {
		if _, err := e2b.New(e2b.Config{APIKey: "k", WebhookURL: bad}); err == nil || !strings.Contains(err.Error(), "E2B_WEBHOOK_URL") {
			t.Fatalf("E2B_WEBHOOK_URL=%q: %v, want an error naming it", bad, err)
		}
	}
}
