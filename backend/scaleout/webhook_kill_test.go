package scaleout_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/replicas"
)

// receipt is one POST the webhook receiver got.
type receipt struct {
	eventID, deliveryID, sandboxID string
	at                             time.Time
	answered                       bool // false: held until its sender died
}

// TestWebhookSenderKilledMidDelivery (issue 24, on PostgreSQL): a replica
// sends webhook deliveries to a receiver that holds the first one without
// answering; the replica is SIGKILLed while it waits, and a second replica
// takes over once the claim lapses (DREADNODE_WEBHOOK_CLAIM_HOLD, 3 s
// here). Every event arrives and is answered; every attempt of an event
// reuses its e2b-delivery-id; an event is answered twice only if its first
// answer came before the kill (the dead replica may have had no time to
// record it: at least once); each sandbox's events are answered in order.
func TestWebhookSenderKilledMidDelivery(t *testing.T) {
	t.Parallel()
	const hold = 3 * time.Second
	fake := e2bfake.New(t)
	env := map[string]string{
		"DREADNODE_PROVIDER": "e2b", "E2B_API_KEY": fake.APIKey, "E2B_API_URL": fake.URL, "E2B_DOMAIN": fake.Domain,
		"DREADNODE_WEBHOOK_ALLOW_PRIVATE": "true", "DREADNODE_WEBHOOK_CLAIM_HOLD": hold.String(),
	}
	// One replica first, so the one holding the first delivery is known.
	s := replicas.Start(t, replicas.Options{N: 1, Env: env})

	var (
		mu       sync.Mutex
		receipts []receipt
		held     = make(chan struct{})
		heldOnce sync.Once
		release  = make(chan struct{})
	)
	defer close(release)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			ID        string `json:"id"`
			SandboxID string `json:"sandboxId"`
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
			t.Errorf("a delivery's body is not an event: %v: %s", err, body)
		}
		rc := receipt{eventID: ev.ID, deliveryID: r.Header.Get("e2b-delivery-id"), sandboxID: ev.SandboxID, at: time.Now()}
		first := false
		heldOnce.Do(func() { first = true })
		if first {
			mu.Lock()
			receipts = append(receipts, rc)
			mu.Unlock()
			close(held)
			select { // never answered: its sender dies meanwhile
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		rc.answered = true
		mu.Lock()
		receipts = append(receipts, rc)
		mu.Unlock()
	}))
	defer recv.Close()

	if _, err := call(s.Replicas[0], 10*time.Second, http.MethodPost, "/events/webhooks",
		fmt.Sprintf(`{"name": "kill", "url": %q, "enabled": true, "signatureSecret": "kill-test-secret"}`, recv.URL), nil); err != nil {
		t.Fatal(err)
	}
	var sandboxes []string
	for range 3 {
		id, err := create(s.Replicas[0], time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sandboxes = append(sandboxes, id)
	}
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook delivery arrived within 30s of the creates")
	}
	s.Kill(0) // mid-delivery: its claim stands until it lapses
	killedAt := time.Now()
	survivor := s.Add(t, nil)
	for _, id := range sandboxes { // more events, from the survivor
		pollUntil(t, time.Minute, "the survivor to delete "+id, func() bool {
			code, err := call(survivor, 10*time.Second, http.MethodDelete, "/sandboxes/"+id, "", nil)
			return err == nil && code/100 == 2
		})
	}

	// Every event of every sandbox, in the backend's order, answered.
	wantOrder := map[string][]string{}
	pollUntil(t, 2*time.Minute, "every event to be answered", func() bool {
		all := true
		for _, id := range sandboxes {
			var page struct {
				Items []struct {
					ID   string `json:"id"`
					Type string `json:"type"`
				} `json:"items"`
			}
			if _, err := call(survivor, 10*time.Second, http.MethodGet, "/sandboxes/"+id+"/events", "", &page); err != nil {
				t.Fatal(err)
			}
			var ids []string
			killed := false
			for _, e := range page.Items {
				ids = append(ids, e.ID)
				killed = killed || e.Type == "sandbox.lifecycle.killed"
			}
			wantOrder[id] = ids
			all = all && killed
		}
		mu.Lock()
		defer mu.Unlock()
		answered := map[string]bool{}
		for _, r := range receipts {
			answered[r.eventID] = answered[r.eventID] || r.answered
		}
		for _, ids := range wantOrder {
			for _, e := range ids {
				all = all && answered[e]
			}
		}
		return all
	})

	mu.Lock()
	defer mu.Unlock()
	deliveryOf, answers, firstAnswer := map[string]string{}, map[string]int{}, map[string]time.Time{}
	gotOrder := map[string][]string{}
	for _, r := range receipts {
		if d, ok := deliveryOf[r.eventID]; ok && d != r.deliveryID {
			t.Errorf("event %s was sent with delivery ids %s and %s; every attempt must reuse one", r.eventID, d, r.deliveryID)
		}
		deliveryOf[r.eventID] = r.deliveryID
		if !r.answered {
			continue
		}
		if answers[r.eventID] == 0 {
			firstAnswer[r.eventID] = r.at
			gotOrder[r.sandboxID] = append(gotOrder[r.sandboxID], r.eventID)
		}
		answers[r.eventID]++
	}
	heldEvent := receipts[0].eventID
	if answers[heldEvent] != 1 {
		t.Errorf("the held event %s was answered %d times after its sender died; want 1", heldEvent, answers[heldEvent])
	}
	for e, n := range answers {
		if n > 1 && firstAnswer[e].After(killedAt) {
			t.Errorf("event %s was answered %d times, the first after the kill: a duplicate beyond at least once", e, n)
		}
	}
	for _, id := range sandboxes {
		if fmt.Sprint(gotOrder[id]) != fmt.Sprint(wantOrder[id]) {
			t.Errorf("sandbox %s: events answered in order %v, want %v", id, gotOrder[id], wantOrder[id])
		}
	}
	var resent time.Time
	for _, r := range receipts[1:] {
		if r.eventID == heldEvent {
			resent = r.at
			break
		}
	}
	t.Logf("%d receipts for %d events; the held delivery %s was sent again %s after the kill",
		len(receipts), len(answers), receipts[0].deliveryID, resent.Sub(killedAt).Round(time.Millisecond))
}
