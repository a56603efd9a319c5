package app

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

const e2bCallbackPath = "/callbacks/e2b/lifecycle"

// e2bHooksApp is an app on the E2B fake with E2B_WEBHOOK_URL pointing at
// itself and the reconciler's observation slowed to once a minute: a change
// seen within seconds came through the webhook, not a poll.
func e2bHooksApp(t *testing.T, db string) (*testApp, *e2bfake.Server, e2b.Config, string) {
	t.Helper()
	var h atomic.Value
	cb := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(cb.Close)
	url := "http://" + cb.Listener.Addr().String() + e2bCallbackPath
	var ec e2b.Config
	ta, fake := eventsApp(t, db, func(c *Config) {
		c.E2B.WebhookURL = url
		c.ObserveEvery = time.Minute
		ec = *c.E2B
	})
	h.Store(ta.app.Handler)
	cb.Start()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(fake.Webhooks(), url) {
		if time.Now().After(deadline) {
			t.Fatalf("the backend did not register %s with E2B within 10s; E2B has %v", url, fake.Webhooks())
		}
		time.Sleep(10 * time.Millisecond) // poll interval within the deadline
	}
	return ta, fake, ec, cb.URL
}

// e2bSandboxOf is the E2B sandbox id of a record.
func e2bSandboxOf(t *testing.T, fake *e2bfake.Server, id string) e2bfake.Sandbox {
	t.Helper()
	for _, sb := range fake.Sandboxes() {
		if sb.Metadata["dev.dreadnode.record"] == id {
			return sb
		}
	}
	t.Fatalf("no E2B sandbox carries record %s", id)
	return e2bfake.Sandbox{}
}

// stillRunning asserts the sandbox stays running for a second.
func (ta *testApp) stillRunning(id, why string) {
	ta.t.Helper()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if st := ta.req("GET", "/sandboxes/"+id, nil).json(ta.t)["state"]; st != "running" {
			ta.t.Fatalf("%s: sandbox %s became %v", why, id, st)
		}
	}
}

// Issue 24 item 3: E2B kills a sandbox on its side and the backend shows it
// ended at once through E2B's signed webhook, with observation once a
// minute; a callback with a bad signature, or a replayed delivery id, changes
// nothing.
func TestE2BWebhookAppliesKill(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			ta, fake, ec, cbURL := e2bHooksApp(t, db)
			a, _ := ta.create(map[string]any{"waitReady": true})
			b, _ := ta.create(map[string]any{"waitReady": true})
			sa, sb := e2bSandboxOf(t, fake, a), e2bSandboxOf(t, fake, b)

			// E2B kills a: its webhook ends the record within 1 s.
			start := time.Now()
			fake.Kill(sa.ID)
			got := ta.waitState(a, time.Second, "failed")
			t.Logf("E2B kill applied through the webhook in %v", time.Since(start))
			if d, _ := got["diagnostic"].(string); d == "" {
				t.Fatalf("no diagnostic on the ended record: %v", got)
			}
			evs := ta.waitEvents(a, "sandbox.lifecycle.failed")
			if last := evs[len(evs)-1]; last.Cause != "provider" {
				t.Fatalf("the end of a sandbox E2B killed has cause %q, want provider", last.Cause)
			}
			var first e2bfake.WebhookDelivery
			for _, d := range fake.Deliveries() {
				if d.Status == http.StatusOK {
					first = d
				}
			}
			if first.DeliveryID == "" {
				t.Fatalf("no delivery answered 200: %+v", fake.Deliveries())
			}

			// From here E2B sends nothing: b vanishes silently, and only a
			// callback the test makes can tell the backend.
			disable, _ := http.NewRequest(http.MethodPatch, fake.URL+"/events/webhooks/"+first.WebhookID, bytes.NewReader([]byte(`{"enabled":false}`)))
			disable.Header.Set("X-API-Key", fake.APIKey)
			disable.Header.Set("Content-Type", "application/json")
			if res, err := http.DefaultClient.Do(disable); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("disabling the webhook at the fake: %v %v", res, err)
			}
			sent := len(fake.Deliveries())
			fake.Kill(sb.ID)
			body, _ := json.Marshal(map[string]any{"version": "v2", "id": "ev-b", "type": "sandbox.lifecycle.killed",
				"sandboxId": sb.ID, "sandboxTemplateId": sb.TemplateID, "timestamp": time.Now().UTC(),
				"eventData": map[string]any{"sandbox_metadata": sb.Metadata}})
			post := func(delivery, sig string) int {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, cbURL+e2bCallbackPath, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("e2b-webhook-id", first.WebhookID)
				req.Header.Set("e2b-delivery-id", delivery)
				req.Header.Set("e2b-signature-version", "v1")
				if sig != "" {
					req.Header.Set("e2b-signature", sig)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode
			}
			secret := e2b.WebhookSecret(ec)
			if code := post("dl-forged", e2bfake.Sign("not-the-secret", body)); code != http.StatusUnauthorized {
				t.Fatalf("a callback signed with another secret: %d, want 401", code)
			}
			if code := post("dl-unsigned", ""); code != http.StatusUnauthorized {
				t.Fatalf("an unsigned callback: %d, want 401", code)
			}
			ta.stillRunning(b, "after callbacks with bad signatures")
			// A delivery id already applied is ignored, even correctly signed.
			if code := post(first.DeliveryID, e2bfake.Sign(secret, body)); code != http.StatusOK {
				t.Fatalf("a replayed delivery: %d, want 200 (acknowledged, ignored)", code)
			}
			ta.stillRunning(b, "after a replayed delivery id")
			if n := len(fake.Deliveries()); n != sent {
				t.Fatalf("the disabled webhook still delivered (%d → %d)", sent, n)
			}
			// The same event under a new delivery id, signed: applied at once.
			start = time.Now()
			if code := post("dl-fresh", e2bfake.Sign(secret, body)); code != http.StatusOK {
				t.Fatalf("a valid callback: %d", code)
			}
			ta.waitState(b, time.Second, "failed")
			t.Logf("signed callback applied in %v", time.Since(start))
		})
	}
}

// E2B pausing a sandbox whose record says running is drift: the webhook
// wakes the reconciler, which resumes it at once, as its periodic
// comparison would a minute later.
func TestE2BWebhookAppliesPause(t *testing.T) {
	ta, fake, _, _ := e2bHooksApp(t, "sqlite")
	id, _ := ta.create(map[string]any{"waitReady": true})
	sb := e2bSandboxOf(t, fake, id)
	start := time.Now()
	if !fake.Pause(sb.ID) {
		t.Fatal("the fake could not pause the sandbox")
	}
	for {
		if now, _ := fake.Sandbox(sb.ID); now.State == "running" && now.Resumes == 1 {
			break
		}
		if time.Since(start) > time.Second {
			now, _ := fake.Sandbox(sb.ID)
			t.Fatalf("E2B's pause was not undone within 1s through the webhook: %+v", now)
		}
		time.Sleep(10 * time.Millisecond) // poll interval within the deadline
	}
	t.Logf("E2B pause undone through the webhook in %v", time.Since(start))
	ta.stillRunning(id, "after E2B's pause was undone")
}
