package app

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// An org has at most DREADNODE_WEBHOOK_MAX_PER_ORG webhooks: past it a
// create is a 409 naming the limit, on the native and the E2B route; other
// orgs are not counted, and a deleted webhook frees its place. (Seen
// failing without the cap: the third create answered 201.)
func TestWebhookCapPerOrg(t *testing.T) {
	ta := webhookApp(t, "sqlite", func(c *Config) { c.Webhooks.MaxPerOrg = 2 })
	first := ta.register("http://127.0.0.1:9/a", nil)
	ta.register("http://127.0.0.1:9/b", nil)
	body := map[string]any{"name": "third", "url": "http://127.0.0.1:9/c", "signatureSecret": hookSecret, "events": []string{"sandbox.lifecycle.killed"}}
	for _, path := range []string{"/events/webhooks", "/e2b/events/webhooks"} {
		r := ta.req("POST", path, body)
		if r.code != http.StatusConflict || !strings.Contains(string(r.body), "webhook_limit_reached") ||
			!strings.Contains(string(r.body), "DREADNODE_WEBHOOK_MAX_PER_ORG=2") {
			t.Errorf("%s, a third webhook: want 409 naming the limit, got %d %s", path, r.code, r.body)
		}
	}
	o2, _, err := ta.app.DB.EnsureOrg(t.Context(), "org2", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := ta.app.DB.EnsureAPIKey(t.Context(), o2.ID, "key-org2"); err != nil {
		t.Fatal(err)
	}
	if r := ta.reqKey("key-org2", "POST", "/events/webhooks", body); r.code != http.StatusCreated {
		t.Errorf("another org's first webhook: want 201, got %d %s", r.code, r.body)
	}
	if r := ta.req("DELETE", "/events/webhooks/"+first, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if r := ta.req("POST", "/events/webhooks", body); r.code != http.StatusCreated {
		t.Errorf("after a delete: want 201, got %d %s", r.code, r.body)
	}
}

// One org's receiver that never answers (each attempt waits out its 10 s
// timeout, and is retried at once) does not hold another org's
// deliveries: org1's sandbox's four events, delivered one after another
// in order, all arrive well within one such timeout each. (Seen failing
// with the dispatcher waiting for every attempt of a pass: each of org1's
// events waited for org2's stuck attempt.) org2 never has more than its
// room (here 2) of attempts under way, though its three sandboxes have a
// delivery due each. (Seen failing without the room: 3 at once.)
func TestWebhookSlowTargetDelaysNoOtherOrg(t *testing.T) {
	ta := webhookApp(t, "sqlite", func(c *Config) { c.Webhooks.InFlightPerOrg = 2 })
	var stuck, most atomic.Int32
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := stuck.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		defer stuck.Add(-1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) }) // first: frees the handlers Close waits for
	o2, _, err := ta.app.DB.EnsureOrg(t.Context(), "org2", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := ta.app.DB.EnsureAPIKey(t.Context(), o2.ID, "key-org2"); err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"name": "slow", "url": slow.URL, "signatureSecret": hookSecret}
	if r := ta.reqKey("key-org2", "POST", "/events/webhooks", body); r.code != http.StatusCreated {
		t.Fatalf("org2's webhook: %d %s", r.code, r.body)
	}
	rc := newReceiver(t)
	ta.register(rc.srv.URL, nil)

	// org2's sandboxes: their deliveries hang on the slow receiver.
	for range 3 {
		if r := ta.reqKey("key-org2", "POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 120}); r.code != http.StatusCreated {
			t.Fatalf("org2's sandbox: %d %s", r.code, r.body)
		}
	}
	poll.Until(t, 30*time.Second, 20*time.Millisecond, func() error {
		if stuck.Load() == 0 {
			return fmt.Errorf("no delivery reached the slow receiver yet")
		}
		return nil
	})

	t0 := time.Now()
	id, _ := ta.create(map[string]any{"waitReady": true, "timeout": 120})
	ta.pauseResumeDelete(id)
	poll.Until(t, 15*time.Second, 20*time.Millisecond, func() error {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		var got []string
		for _, e := range rc.accepted {
			if e.SandboxID == id {
				got = append(got, e.Type)
			}
		}
		if len(got) == 0 || got[len(got)-1] != "sandbox.lifecycle.killed" {
			return fmt.Errorf("org1's receiver has %v after %s (org2's slow receiver holds %d attempts)", got, time.Since(t0).Round(time.Millisecond), stuck.Load())
		}
		return nil
	})
	if m := most.Load(); m > 2 {
		t.Errorf("org2's slow receiver held %d attempts at once, more than its room of 2", m)
	}
}
