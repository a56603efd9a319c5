package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// eventsApp is an app on the E2B fake (no Docker needed to drive the
// lifecycle) on the named database.
func eventsApp(t *testing.T, db string, mutate func(*Config)) (*testApp, *e2bfake.Server) {
	t.Helper()
	fake := e2bfake.New(t)
	url := ""
	if db == "postgres" {
		url = pgtest.Start(t).NewDatabase(t)
	}
	ta := newTestApp(t, func(c *Config) {
		if url != "" {
			c.DatabaseURL = url
		}
		c.Provider = "e2b"
		c.E2B = &e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
			EnvdURL: fake.EnvdURL, Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
		if mutate != nil {
			mutate(c)
		}
	})
	return ta, fake
}

type eventItem struct {
	ID              string            `json:"id"`
	Type            string            `json:"type"`
	EventLabel      string            `json:"eventLabel"`
	Timestamp       time.Time         `json:"timestamp"`
	SandboxID       string            `json:"sandboxId"`
	TemplateID      string            `json:"sandboxTemplateId"`
	SandboxMetadata map[string]string `json:"sandboxMetadata"`
	Cause           string            `json:"cause"`
	EventData       struct {
		SandboxMetadata map[string]string `json:"sandbox_metadata"`
		EnvironmentID   string            `json:"environment_id"`
		Execution       *struct {
			StartedAt time.Time `json:"started_at"`
			VCPUCount int       `json:"vcpu_count"`
			MemoryMB  int       `json:"memory_mb"`
		} `json:"execution"`
	} `json:"eventData"`
}

type eventPage struct {
	Items      []eventItem `json:"items"`
	NextCursor *string     `json:"nextCursor"`
}

func (ta *testApp) events(path string) eventPage {
	ta.t.Helper()
	r := ta.req("GET", path, nil)
	if r.code != http.StatusOK {
		ta.t.Fatalf("GET %s: %d %s", path, r.code, r.body)
	}
	var p eventPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		ta.t.Fatal(err)
	}
	return p
}

// waitEvents polls the sandbox's events until the last is of type last.
func (ta *testApp) waitEvents(id, last string) []eventItem {
	ta.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var items []eventItem
	for time.Now().Before(deadline) {
		items = ta.events("/sandboxes/" + id + "/events").Items
		if len(items) > 0 && items[len(items)-1].Type == last {
			return items
		}
		time.Sleep(20 * time.Millisecond) // poll interval within the deadline
	}
	ta.t.Fatalf("sandbox %s: no %s event within 30s; events %v", id, last, labels(items))
	return nil
}

// pauseResumeDelete pauses the sandbox, resumes it by connect (with a new
// timeout) and deletes it.
func (ta *testApp) pauseResumeDelete(id string) {
	ta.t.Helper()
	if p := ta.req("POST", "/sandboxes/"+id+"/pause", nil); p.code != 204 {
		ta.t.Fatalf("pause: %d %s", p.code, p.body)
	}
	if c := ta.req("POST", "/sandboxes/"+id+"/connect", map[string]any{"timeout": 120}); c.code != 201 {
		ta.t.Fatalf("connect: %d %s", c.code, c.body)
	}
	if d := ta.req("DELETE", "/sandboxes/"+id, nil); d.code != 204 {
		ta.t.Fatalf("delete: %d %s", d.code, d.body)
	}
}

func labels(items []eventItem) []string {
	out := make([]string, len(items))
	for i, e := range items {
		out[i] = e.EventLabel + "/" + e.Cause
	}
	return out
}

// A delete, a TTL kill and a pause/resume each produce exactly the expected
// events, in order, with their causes; another org sees none of them.
func TestLifecycleEvents(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			ta, _ := eventsApp(t, db, nil)
			id, _ := ta.create(map[string]any{"waitReady": true, "timeout": 120, "metadata": map[string]string{"who": "events"}})
			ta.pauseResumeDelete(id)
			items := ta.waitEvents(id, "sandbox.lifecycle.killed")
			// connect's timeout sets a new end before the resume: updated.
			if got, want := labels(items), []string{"created/reconciler", "paused/reconciler", "updated/user", "resumed/reconciler", "killed/user"}; !slices.Equal(got, want) {
				t.Fatalf("delete: events %v, want %v", got, want)
			}
			for i, e := range items {
				if e.SandboxID != id || e.TemplateID == "" || e.SandboxMetadata["who"] != "events" || e.EventData.SandboxMetadata["who"] != "events" ||
					e.ID == "" || e.Timestamp.IsZero() || (i > 0 && e.Timestamp.Before(items[i-1].Timestamp)) {
					t.Errorf("event %d: %+v", i, e)
				}
			}
			for _, i := range []int{1, 4} {
				if x := items[i].EventData.Execution; x == nil || x.StartedAt.IsZero() || x.VCPUCount == 0 || x.MemoryMB == 0 {
					t.Errorf("%s carries no execution: %+v", items[i].Type, x)
				}
			}

			ttl, _ := ta.create(map[string]any{"waitReady": true, "timeout": 1})
			if got, want := labels(ta.waitEvents(ttl, "sandbox.lifecycle.killed")), []string{"created/reconciler", "killed/ttl"}; !slices.Equal(got, want) {
				t.Fatalf("TTL: events %v, want %v", got, want)
			}

			// Org-wide: filtered by type, paged by cursor.
			kills := ta.events("/events?type=sandbox.lifecycle.killed").Items
			if len(kills) != 2 || kills[0].SandboxID != id || kills[1].SandboxID != ttl {
				t.Fatalf("org-wide killed events: %v", kills)
			}
			first := ta.events("/events?limit=2")
			if len(first.Items) != 2 || first.NextCursor == nil {
				t.Fatalf("first page: %+v", first)
			}
			rest := ta.events("/events?limit=100&cursor=" + *first.NextCursor)
			if len(rest.Items) != 5 || rest.NextCursor != nil || rest.Items[0].ID == first.Items[1].ID {
				t.Fatalf("second page: %v", labels(rest.Items))
			}
			// Newest first with order=desc, paged the same way; a cursor of
			// one order is refused by the other.
			all := append(slices.Clone(first.Items), rest.Items...)
			newest := ta.events("/events?limit=3&order=desc")
			older := ta.events("/events?limit=100&order=desc&cursor=" + *newest.NextCursor)
			desc := append(newest.Items, older.Items...)
			if len(desc) != len(all) || older.NextCursor != nil {
				t.Fatalf("newest first: %v, want the reverse of %v", labels(desc), labels(all))
			}
			for i := range all {
				if desc[i].ID != all[len(all)-1-i].ID {
					t.Fatalf("newest first: %v, want the reverse of %v", labels(desc), labels(all))
				}
			}
			if r := ta.req("GET", "/events?order=desc&cursor="+*first.NextCursor, nil); r.code != 400 || !strings.Contains(string(r.body), `"loc":["query","cursor"]`) {
				t.Fatalf("an oldest-first cursor newest first: %d %s", r.code, r.body)
			}
			if r := ta.req("GET", "/events?type=sandbox.lifecycle.exploded", nil); r.code != 400 || !strings.Contains(string(r.body), "type") {
				t.Fatalf("unknown type: %d %s", r.code, r.body)
			}
			if r := ta.req("GET", "/events?since=yesterday", nil); r.code != 400 || !strings.Contains(string(r.body), "since") {
				t.Fatalf("bad since: %d %s", r.code, r.body)
			}

			// Another org: 404 for the sandbox's events, none org-wide.
			o2, _, err := ta.app.DB.EnsureOrg(t.Context(), "org2", 1000)
			if err != nil {
				t.Fatal(err)
			}
			if err := ta.app.DB.EnsureAPIKey(t.Context(), o2.ID, "key-org2"); err != nil {
				t.Fatal(err)
			}
			if r := ta.reqKey("key-org2", "GET", "/sandboxes/"+id+"/events", nil); r.code != 404 {
				t.Fatalf("another org's sandbox events: %d %s", r.code, r.body)
			}
			if r := ta.reqKey("key-org2", "GET", "/events", nil); r.code != 200 || strings.Contains(string(r.body), id) {
				t.Fatalf("another org lists: %d %s", r.code, r.body)
			}
		})
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct{ id, typ, data string }

// openStream opens GET /events/stream and returns its events as they come.
func (ta *testApp) openStream(ctx context.Context, key, lastID string) <-chan sseEvent {
	ta.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", ta.srv.URL+"/events/stream", nil)
	req.Header.Set("X-API-Key", key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ta.t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		ta.t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 100)
	go func() {
		defer res.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			case line == "" && ev.id != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out
}

func nextSSE(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event on the stream within 30s")
	}
	return sseEvent{}
}

// The live stream delivers each event as it happens, only the org's, and
// resumes after Last-Event-ID.
func TestEventStream(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			ta, _ := eventsApp(t, db, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			live := ta.openStream(ctx, ta.key, "")
			o2, _, _ := ta.app.DB.EnsureOrg(ctx, "org2", 1000)
			if err := ta.app.DB.EnsureAPIKey(ctx, o2.ID, "key-org2"); err != nil {
				t.Fatal(err)
			}
			other := ta.openStream(ctx, "key-org2", "")
			id, _ := ta.create(map[string]any{"waitReady": true})
			created := nextSSE(t, live)
			if created.typ != "sandbox.lifecycle.created" || !strings.Contains(created.data, id) {
				t.Fatalf("first streamed event: %+v", created)
			}
			if d := ta.req("DELETE", "/sandboxes/"+id, nil); d.code != 204 {
				t.Fatalf("delete: %d %s", d.code, d.body)
			}
			if killed := nextSSE(t, live); killed.typ != "sandbox.lifecycle.killed" || !strings.Contains(killed.data, `"cause":"user"`) {
				t.Fatalf("second streamed event: %+v", killed)
			}
			// Resuming after the first event replays the second.
			again := ta.openStream(ctx, ta.key, created.id)
			if ev := nextSSE(t, again); ev.typ != "sandbox.lifecycle.killed" {
				t.Fatalf("resumed stream: %+v", ev)
			}
			select {
			case ev := <-other:
				t.Fatalf("another org's stream got %+v", ev)
			default:
			}
			if r := ta.reqKey("key-org2", "GET", "/events/stream", nil, "Last-Event-ID", created.id); r.code != 400 {
				t.Fatalf("another org resuming from our event: %d %s", r.code, r.body)
			}
		})
	}
}

// On the real Docker provider: a create and a delete are created then
// killed by the user; a main process that exits non-zero ends failed.
func TestLifecycleEventsOnDocker(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, _ := ta.create(map[string]any{"waitReady": true})
	if d := ta.req("DELETE", "/sandboxes/"+id, nil); d.code != 204 {
		t.Fatalf("delete: %d %s", d.code, d.body)
	}
	if got, want := labels(ta.waitEvents(id, "sandbox.lifecycle.killed")), []string{"created/reconciler", "killed/user"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	failed, _ := ta.create(map[string]any{"waitReady": true, "command": []string{"sh", "-c", "sleep 1; exit 3"}})
	if got, want := labels(ta.waitEvents(failed, "sandbox.lifecycle.failed")), []string{"created/reconciler", "failed/provider"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// On real Docker and both databases: a sandbox of an org whose credits run
// out ends killed by credits; a task environment's life (ready, paused,
// resumed, torn down) is environment.lifecycle.* events naming it, in
// order.
func TestLifecycleEventsCreditsAndEnvironmentOnDocker(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			tasksDir := filepath.Join(t.TempDir(), "tasks")
			writeTask(t, tasksDir, "ev-life", `name: ev-life
version: 1.0.0
description: One idle service, for the events test.
instruction: nothing to do
execute_service: app
`, `services:
  app:
    image: dreadnode/base:latest
    command: ["sleep", "3600"]
`)
			url := ""
			if db == "postgres" {
				url = pgtest.Start(t).NewDatabase(t)
			}
			ta := newTestApp(t, func(c *Config) {
				c.TasksDir = tasksDir
				if url != "" {
					c.DatabaseURL = url
				}
			})

			// Credits: about a second of the base template's running time.
			poor, _, err := ta.app.DB.EnsureOrg(t.Context(), "poor", 20) // micro-credits
			if err != nil {
				t.Fatal(err)
			}
			if err := ta.app.DB.EnsureAPIKey(t.Context(), poor.ID, "key-poor-"+db); err != nil {
				t.Fatal(err)
			}
			c := ta.reqKey("key-poor-"+db, "POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 300})
			if c.code != http.StatusCreated {
				t.Fatalf("create: %d %s", c.code, c.body)
			}
			sb := c.json(t)["sandboxID"].(string)
			var got []eventItem
			poll.Until(t, 60*time.Second, 50*time.Millisecond, func() error {
				r := ta.reqKey("key-poor-"+db, "GET", "/sandboxes/"+sb+"/events", nil)
				var p eventPage
				if err := json.Unmarshal(r.body, &p); err != nil || r.code != 200 {
					return fmt.Errorf("events: %d %s", r.code, r.body)
				}
				got = p.Items
				if len(got) == 0 || got[len(got)-1].Type != "sandbox.lifecycle.killed" {
					return fmt.Errorf("no killed event yet: %v", labels(got))
				}
				return nil
			})
			if want := []string{"created/reconciler", "killed/credits"}; !slices.Equal(labels(got), want) {
				t.Fatalf("credits: events %v, want %v", labels(got), want)
			}

			// A task environment's life.
			const envs = "/api/v1/org/org1/ws/main/environments"
			r := ta.req("POST", envs, map[string]any{"task_ref": "ev-life", "timeout_sec": 600})
			if r.code != http.StatusCreated {
				t.Fatalf("create environment: %d %s", r.code, r.body)
			}
			env := r.json(t)["id"].(string)
			path := envs + "/" + env
			ta.waitEnv(path, 120*time.Second, "ready")
			if p := ta.req("POST", path+"/pause", nil); p.code != http.StatusOK {
				t.Fatalf("pause: %d %s", p.code, p.body)
			}
			if p := ta.req("POST", path+"/resume", nil); p.code != http.StatusOK {
				t.Fatalf("resume: %d %s", p.code, p.body)
			}
			if d := ta.req("DELETE", path, nil); d.code != http.StatusOK {
				t.Fatalf("delete: %d %s", d.code, d.body)
			}
			var mine []eventItem
			poll.Until(t, 60*time.Second, 50*time.Millisecond, func() error {
				mine = nil
				for _, e := range ta.events("/events?limit=500").Items {
					if e.EventData.EnvironmentID == env {
						mine = append(mine, e)
					}
				}
				if len(mine) == 0 || mine[len(mine)-1].EventLabel != "killed" {
					return fmt.Errorf("environment %s: events %v", env, labels(mine))
				}
				return nil
			})
			if want := []string{"created/reconciler", "paused/reconciler", "resumed/reconciler", "killed/user"}; !slices.Equal(labels(mine), want) {
				t.Fatalf("environment: events %v, want %v", labels(mine), want)
			}
			for _, e := range mine {
				if !strings.HasPrefix(e.Type, "environment.lifecycle.") || e.SandboxID != mine[0].SandboxID {
					t.Errorf("environment event: %+v", e)
				}
			}
			if sbEvents := ta.req("GET", "/sandboxes/"+mine[0].SandboxID+"/events", nil); sbEvents.code != 404 {
				t.Errorf("a task record's events under /sandboxes: %d %s", sbEvents.code, sbEvents.body)
			}
		})
	}
}
