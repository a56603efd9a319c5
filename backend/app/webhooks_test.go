package app

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

const hookSecret = "a-secret-of-sufficient-length"

// receiver is a webhook receiver on 127.0.0.1 that verifies each
// delivery's signatures with its own implementation of E2B's scheme
// (base64, unpadded, of SHA-256(secret ‖ body)) and of webhook-signature.
type receiver struct {
	t    *testing.T
	srv  *httptest.Server
	code atomic.Int32 // the answer; 0 means 204

	mu       sync.Mutex
	accepted []eventItem         // answered 2xx, in arrival order
	seen     map[string][]string // event id → the delivery ids of every attempt
	bad      []string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t, seen: map[string][]string{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(append([]byte(hookSecret), body...))
		mac := hmac.New(sha256.New, []byte(hookSecret))
		mac.Write([]byte(r.Header.Get("webhook-id") + "." + r.Header.Get("webhook-timestamp") + "."))
		mac.Write(body)
		var ev eventItem
		_ = json.Unmarshal(body, &ev)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		switch {
		case r.Header.Get("e2b-signature") != base64.RawStdEncoding.EncodeToString(sum[:]):
			rc.bad = append(rc.bad, "e2b-signature does not verify: "+string(body))
		case r.Header.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)):
			rc.bad = append(rc.bad, "webhook-signature does not verify")
		case r.Header.Get("e2b-signature-version") != "v1" || r.Header.Get("e2b-webhook-id") == "" || r.Header.Get("e2b-delivery-id") == "":
			rc.bad = append(rc.bad, "missing E2B headers: "+r.Header.Get("e2b-signature-version"))
		}
		if ts := r.Header.Get("webhook-timestamp"); ts == "" {
			rc.bad = append(rc.bad, "no webhook-timestamp")
		}
		rc.seen[ev.ID] = append(rc.seen[ev.ID], r.Header.Get("e2b-delivery-id"))
		code := int(rc.code.Load())
		if code == 0 {
			code = http.StatusNoContent
			rc.accepted = append(rc.accepted, ev)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// waitFor polls until the receiver accepted an event of type last for sandbox id.
func (rc *receiver) waitFor(id, last string) []eventItem {
	rc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		rc.mu.Lock()
		var mine []eventItem
		for _, e := range rc.accepted {
			if e.SandboxID == id {
				mine = append(mine, e)
			}
		}
		rc.mu.Unlock()
		if len(mine) > 0 && mine[len(mine)-1].Type == last {
			return mine
		}
		time.Sleep(20 * time.Millisecond) // poll interval within the deadline
	}
	rc.t.Fatalf("the receiver got no %s for %s within 30s", last, id)
	return nil
}

func (ta *testApp) register(url string, extra map[string]any) string {
	ta.t.Helper()
	body := map[string]any{"name": "test", "url": url, "enabled": true, "events": []string{}, "signatureSecret": hookSecret}
	for k, v := range extra {
		body[k] = v
	}
	r := ta.req("POST", "/events/webhooks", body)
	if r.code != http.StatusCreated {
		ta.t.Fatalf("register: %d %s", r.code, r.body)
	}
	if strings.Contains(string(r.body), hookSecret) {
		ta.t.Fatalf("the secret is shown: %s", r.body)
	}
	return r.json(ta.t)["id"].(string)
}

func fastWebhooks(c *Config) {
	c.Webhooks.AllowPrivate = true // the receiver is on 127.0.0.1
	c.Webhooks.BackoffBase, c.Webhooks.BackoffMax, c.Webhooks.Poll = 20*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
}

func webhookApp(t *testing.T, db string, mutate func(*Config)) *testApp {
	ta, _ := eventsApp(t, db, func(c *Config) {
		fastWebhooks(c)
		if mutate != nil {
			mutate(c)
		}
	})
	return ta
}

// Every event reaches the receiver, signed, in order, with the ids of the
// events API; the secret is never shown again.
func TestWebhookDeliversSignedEvents(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			ta := webhookApp(t, db, nil)
			rc := newReceiver(t)
			hook := ta.register(rc.srv.URL, nil)
			id, _ := ta.create(map[string]any{"waitReady": true, "timeout": 120})
			ta.pauseResumeDelete(id)
			got := rc.waitFor(id, "sandbox.lifecycle.killed")
			want := ta.waitEvents(id, "sandbox.lifecycle.killed")
			if len(got) != len(want) {
				t.Fatalf("delivered %v, want %v", labels(got), labels(want))
			}
			for i := range want {
				if got[i].ID != want[i].ID || got[i].Type != want[i].Type {
					t.Errorf("delivery %d: %s %s, want %s %s", i, got[i].ID, got[i].Type, want[i].ID, want[i].Type)
				}
			}
			rc.mu.Lock()
			if len(rc.bad) > 0 {
				t.Errorf("bad deliveries: %v", rc.bad)
			}
			rc.mu.Unlock()
			g := ta.req("GET", "/events/webhooks/"+hook, nil)
			if g.code != 200 || strings.Contains(string(g.body), hookSecret) || strings.Contains(string(g.body), "signatureSecret") {
				t.Fatalf("GET webhook: %d %s", g.code, g.body)
			}
			// The receiver has the last event before the dispatcher records
			// its answer: the log is read until it says so.
			poll.Until(t, 30*time.Second, 50*time.Millisecond, func() error {
				var log []map[string]any
				l := ta.req("GET", "/events/webhooks/"+hook+"/deliveries", nil)
				if err := json.Unmarshal(l.body, &log); err != nil || len(log) != len(want) || log[0]["status"] != "delivered" {
					return fmt.Errorf("delivery log: %d %s", l.code, l.body)
				}
				return nil
			})
			if r := ta.reqKey("nobody", "GET", "/events/webhooks", nil); r.code != 401 {
				t.Fatalf("unauthenticated list: %d", r.code)
			}
		})
	}
}

// A receiver down, then back, gets every event once per event id (the
// failed attempts reused their delivery id), in order.
func TestWebhookReceiverDownThenBack(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			ta := webhookApp(t, db, nil)
			rc := newReceiver(t)
			rc.code.Store(http.StatusServiceUnavailable)
			hook := ta.register(rc.srv.URL, nil)
			id, _ := ta.create(map[string]any{"waitReady": true})
			if d := ta.req("DELETE", "/sandboxes/"+id, nil); d.code != 204 {
				t.Fatalf("delete: %d %s", d.code, d.body)
			}
			want := ta.waitEvents(id, "sandbox.lifecycle.killed")
			// Down until the first delivery was tried three times.
			deadline := time.Now().Add(30 * time.Second)
			for {
				rc.mu.Lock()
				n := len(rc.seen[want[0].ID])
				rc.mu.Unlock()
				if n >= 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the first delivery was tried %d times in 30s", n)
				}
				time.Sleep(20 * time.Millisecond) // poll interval within the deadline
			}
			rc.mu.Lock()
			if len(rc.seen[want[1].ID]) != 0 {
				t.Fatalf("killed was delivered before created got through")
			}
			rc.mu.Unlock()
			rc.code.Store(0)
			got := rc.waitFor(id, "sandbox.lifecycle.killed")
			if len(got) != 2 || got[0].ID != want[0].ID || got[1].ID != want[1].ID {
				t.Fatalf("accepted %v, want %v once each in order", labels(got), labels(want))
			}
			rc.mu.Lock()
			defer rc.mu.Unlock()
			for _, e := range want {
				ids := rc.seen[e.ID]
				if slices.ContainsFunc(ids, func(d string) bool { return d != ids[0] }) {
					t.Errorf("event %s was sent under several delivery ids %v", e.ID, ids)
				}
			}
			if r := ta.req("GET", "/events/webhooks/"+hook, nil); !r.json(t)["enabled"].(bool) {
				t.Fatalf("a webhook that recovered was disabled: %s", r.body)
			}
			// The delivery log lists each attempt: the first event's
			// failures (503, how long each took), then its success.
			var log []struct {
				EventID    string `json:"eventId"`
				Attempts   int    `json:"attempts"`
				AttemptLog []struct {
					At         time.Time `json:"at"`
					DurationMs *int64    `json:"durationMs"`
					StatusCode int       `json:"statusCode"`
					Error      string    `json:"error"`
					ErrorClass string    `json:"errorClass"`
				} `json:"attemptLog"`
			}
			if err := json.Unmarshal(ta.req("GET", "/events/webhooks/"+hook+"/deliveries", nil).body, &log); err != nil || len(log) != 2 {
				t.Fatalf("delivery log: %v %v", log, err)
			}
			first := log[1] // newest first
			n := len(first.AttemptLog)
			if first.EventID != want[0].ID || n < 4 || n != first.Attempts {
				t.Fatalf("the first event's attempts: %+v", first)
			}
			for i, a := range first.AttemptLog {
				failed := i < n-1
				if a.DurationMs == nil || *a.DurationMs < 0 || a.At.IsZero() || (i > 0 && a.At.Before(first.AttemptLog[i-1].At)) ||
					(failed && (a.StatusCode != 503 || !strings.Contains(a.Error, "503") || a.ErrorClass != "http_error")) ||
					(!failed && (a.StatusCode != 204 || a.Error != "" || a.ErrorClass != "")) {
					t.Errorf("attempt %d of %d: %+v", i, n, a)
				}
			}
		})
	}
}

// A receiver answering 500 forever ends with its webhook disabled, and why.
func TestWebhookFailingForeverIsDisabled(t *testing.T) {
	ta := webhookApp(t, "sqlite", func(c *Config) { c.Webhooks.GiveUp = 500 * time.Millisecond })
	rc := newReceiver(t)
	rc.code.Store(http.StatusInternalServerError)
	hook := ta.register(rc.srv.URL, map[string]any{"events": []string{"sandbox.lifecycle.created"}})
	ta.create(map[string]any{"waitReady": true})
	deadline := time.Now().Add(30 * time.Second)
	for {
		w := ta.req("GET", "/events/webhooks/"+hook, nil).json(t)
		if w["enabled"] == false {
			if reason, _ := w["disabledReason"].(string); !strings.Contains(reason, "500") {
				t.Fatalf("disabled without its reason: %v", w)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a webhook failing for 30s is still enabled: %v", w)
		}
		time.Sleep(20 * time.Millisecond) // poll interval within the deadline
	}
	var log []map[string]any
	_ = json.Unmarshal(ta.req("GET", "/events/webhooks/"+hook+"/deliveries", nil).body, &log)
	if len(log) != 1 || log[0]["status"] != "failed" || log[0]["attempts"].(float64) < 2 ||
		len(log[0]["attemptLog"].([]any)) != int(log[0]["attempts"].(float64)) {
		t.Fatalf("delivery log: %v", log)
	}
	for _, a := range log[0]["attemptLog"].([]any) {
		if a := a.(map[string]any); a["statusCode"] != float64(500) || a["errorClass"] != "http_error" || a["durationMs"] == nil {
			t.Errorf("attempt: %v", a)
		}
	}
	// Re-enabled and redelivered, it gets through once the receiver is fixed.
	rc.code.Store(0)
	if r := ta.req("PATCH", "/events/webhooks/"+hook, map[string]any{"enabled": true}); r.code != 200 || r.json(t)["disabledReason"] != nil {
		t.Fatalf("re-enable: %d %s", r.code, r.body)
	}
	if r := ta.req("POST", "/events/webhooks/"+hook+"/deliveries/"+log[0]["id"].(string)+"/redeliver", nil); r.code != 202 {
		t.Fatalf("redeliver: %d %s", r.code, r.body)
	}
	rc.waitFor(log[0]["sandboxId"].(string), "sandbox.lifecycle.created")
}

// Targets on loopback, link-local or private addresses are refused at
// registration unless the operator allows them (no packet is sent: the
// addresses are checked, not contacted).
func TestWebhookRefusesPrivateTargets(t *testing.T) {
	ta, _ := eventsApp(t, "sqlite", nil)
	for _, u := range []string{"http://127.0.0.1:9/x", "http://localhost:9/", "http://169.254.169.254/latest", "http://10.1.2.3/",
		"http://[::1]:9/", "http://192.168.0.1/", "ftp://example.com/", "http://user:pw@8.8.8.8/"} {
		r := ta.req("POST", "/events/webhooks", map[string]any{"url": u, "signatureSecret": hookSecret})
		if r.code != 400 || !strings.Contains(string(r.body), "url") {
			t.Errorf("%s: %d %s", u, r.code, r.body)
		}
	}
	if r := ta.req("POST", "/events/webhooks", map[string]any{"url": "https://example.com/", "signatureSecret": "short"}); r.code != 400 || !strings.Contains(string(r.body), "signatureSecret") {
		t.Errorf("short secret: %d %s", r.code, r.body)
	}
	if r := ta.req("POST", "/events/webhooks", map[string]any{"url": "https://example.com/", "signatureSecret": hookSecret, "events": []string{"nope"}}); r.code != 400 || !strings.Contains(string(r.body), "events") {
		t.Errorf("unknown event type: %d %s", r.code, r.body)
	}
}

// Another org's webhooks are 404 on every route and absent from its list.
func TestWebhooksAreOrgIsolated(t *testing.T) {
	ta := webhookApp(t, "sqlite", nil)
	hook := ta.register("http://127.0.0.1:9/", nil)
	o2, _, err := ta.app.DB.EnsureOrg(t.Context(), "org2", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := ta.app.DB.EnsureAPIKey(t.Context(), o2.ID, "key-org2"); err != nil {
		t.Fatal(err)
	}
	for _, rt := range []struct{ m, p string }{{"GET", ""}, {"PATCH", ""}, {"DELETE", ""}, {"GET", "/deliveries"}, {"POST", "/deliveries/x/redeliver"}} {
		if r := ta.reqKey("key-org2", rt.m, "/events/webhooks/"+hook+rt.p, map[string]any{}); r.code != 404 {
			t.Errorf("%s %s by another org: %d %s", rt.m, rt.p, r.code, r.body)
		}
	}
	if r := ta.reqKey("key-org2", "GET", "/events/webhooks", nil); r.code != 200 || strings.Contains(string(r.body), hook) {
		t.Fatalf("another org's list: %d %s", r.code, r.body)
	}
	if r := ta.req("GET", "/events/webhooks/"+hook, nil); r.code != 200 {
		t.Fatalf("the owner lost it: %d %s", r.code, r.body)
	}
}
