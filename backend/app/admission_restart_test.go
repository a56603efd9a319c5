package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
)

// getSandbox reads a sandbox's detail from a backend process.
func getSandbox(t *testing.T, b *backendproc.Backend, id string) map[string]any {
	t.Helper()
	res, err := b.Do(context.Background(), "GET", "/sandboxes/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var m map[string]any
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &m) != nil {
		t.Fatalf("GET %s: %d %s", id, res.StatusCode, body)
	}
	return m
}

// The admission queue lives in the database: a backend restarted while
// creates wait loses none of them, keeps their order, and serves them as
// room frees up.
func TestAdmissionQueueSurvivesRestart(t *testing.T) {
	t.Parallel()
	b := backendproc.Start(t, backendproc.Options{Env: map[string]string{
		"DREADNODE_CAPACITY_SANDBOXES": "1", "DREADNODE_RECONCILE_INTERVAL": "200ms"}})
	first, err := create(b, `{"waitReady": true}`)
	if err != nil || first.State != "running" {
		t.Fatalf("first: %v %+v", err, first)
	}
	var queued []string
	for i := range 3 {
		sb, err := create(b, `{}`)
		if err != nil || sb.State != "starting" {
			t.Fatalf("queued create %d: %v %+v", i, err, sb)
		}
		queued = append(queued, sb.SandboxID)
	}
	b.Restart(t)
	for i, id := range queued {
		sb := getSandbox(t, b, id)
		if sb["state"] != "starting" || sb["queuePosition"] != float64(i+1) || !wasQueued(sb) {
			t.Fatalf("after the restart, queued create %d is %v", i, sb)
		}
	}
	// Free the room one sandbox at a time: they start in the order sent.
	running := first.SandboxID
	for i, id := range queued {
		res, err := b.Do(context.Background(), "DELETE", "/sandboxes/"+running, nil)
		if err != nil || res.StatusCode != http.StatusNoContent {
			t.Fatalf("delete %s: %v %v", running, err, res)
		}
		res.Body.Close()
		if err := eventuallyState(t, b, id, "running", 2*time.Minute); err != nil {
			t.Fatalf("queued create %d: %v", i, err)
		}
		for _, later := range queued[i+1:] {
			if sb := getSandbox(t, b, later); sb["state"] != "starting" {
				t.Fatalf("%s overtook %s: %v", later, id, sb)
			}
		}
		running = id
	}
	res, err := b.Do(context.Background(), "DELETE", "/sandboxes/"+running, nil)
	if err == nil {
		res.Body.Close()
	}
}

func eventuallyState(t *testing.T, b *backendproc.Backend, id, want string, within time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(within)
	var last map[string]any
	for time.Now().Before(deadline) {
		if last = getSandbox(t, b, id); last["state"] == want {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // poll interval within the deadline
	}
	return fmt.Errorf("sandbox %s not %s within %s; last %v", id, want, within, last)
}

func wasQueued(sb map[string]any) bool {
	tl, _ := sb["timeline"].([]any)
	for _, e := range tl {
		if m, _ := e.(map[string]any); m["phase"] == "queued" {
			return true
		}
	}
	return false
}
