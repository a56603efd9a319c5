package app

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// Task environments go through admission (issue 34, item 4), on the real
// engine: with max_running 1, one sandbox running and a second queued, three
// two-service environments queue behind them (the quota view says running
// 1, queued 4) instead of all starting; each becomes ready when room frees
// up, in order, and an environment counts as one of running with the CPU
// and memory of both its services. One that could never fit is 400 naming
// task_ref and the limit. On SQLite and on PostgreSQL.
func TestAdmissionQueuesTaskEnvironments(t *testing.T) {
	t.Parallel()
	tasksDir := filepath.Join(t.TempDir(), "tasks")
	writeTask(t, tasksDir, "duo", `name: duo
version: 1.0.0
description: Two idle services, for the admission test.
instruction: nothing to do
execute_service: app
`, `services:
  app:
    image: dreadnode/base:latest
    command: ["sleep", "3600"]
  side:
    image: dreadnode/base:latest
    command: ["sleep", "3600"]
`)
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			url := ""
			if db == "postgres" {
				url = pgtest.Start(t).NewDatabase(t)
			}
			queueTaskEnvironments(t, tasksDir, url)
		})
	}
}

// queueTaskEnvironments is TestAdmissionQueuesTaskEnvironments on the
// database at url (SQLite when empty).
func queueTaskEnvironments(t *testing.T, tasksDir, url string) {
	ta := newTestApp(t, func(c *Config) {
		c.TasksDir = tasksDir
		c.AdminKey = "admin-" + t.Name()
		if url != "" {
			c.DatabaseURL = url
		}
	})
	admin := func(method, path string, body any) resp { return ta.reqKey("admin-"+t.Name(), method, path, body) }
	setQuotas := func(q map[string]any) {
		t.Helper()
		if r := admin("PUT", "/admin/orgs/org1/quotas", q); r.code != http.StatusOK {
			t.Fatalf("set quotas %v: %d %s", q, r.code, r.body)
		}
	}
	quota := func() (running, queued, cpu, mem float64) {
		t.Helper()
		q := ta.req("GET", "/api/v1/org/org1/quotas", nil).json(t)
		u := q["use"].(map[string]any)
		return u["running"].(float64), q["queued"].(float64), u["cpu"].(float64), u["memory_mb"].(float64)
	}
	const envs = "/api/v1/org/org1/ws/main/environments"

	// An environment larger than max_cpu could never start: 400 naming task_ref and the quota.
	setQuotas(map[string]any{"max_cpu": 1})
	if r := ta.req("POST", envs, map[string]any{"task_ref": "duo"}); r.code != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "task_ref") || !strings.Contains(string(r.body), "max_cpu") {
		t.Fatalf("an environment of 2 CPUs under max_cpu 1: %d %s", r.code, r.body)
	}

	// The repro: max_running 1, one sandbox running, a second queued.
	setQuotas(map[string]any{"max_running": 1})
	a, _ := ta.create(map[string]any{"waitReady": true, "timeout": 600})
	b := ta.req("POST", "/sandboxes", map[string]any{"timeout": 600})
	if b.code != http.StatusCreated || b.json(t)["queuePosition"] != float64(1) {
		t.Fatalf("second sandbox under max_running 1: %d %s", b.code, b.body)
	}
	bID := b.json(t)["sandboxID"].(string)

	// Three environments: accepted (201 building), all queued.
	var paths []string
	for i := range 3 {
		r := ta.req("POST", envs, map[string]any{"task_ref": "duo", "timeout_sec": 600})
		if r.code != http.StatusCreated || r.json(t)["state"] != "building" {
			t.Fatalf("environment %d: %d %s", i, r.code, r.body)
		}
		paths = append(paths, envs+"/"+r.json(t)["id"].(string))
	}
	if running, queued, _, _ := quota(); running != 1 || queued != 4 {
		t.Fatalf("after three environments under max_running 1: running %v, queued %v; want 1 and 4", running, queued)
	}
	if g := ta.req("GET", paths[0], nil).json(t); !strings.Contains(fmt.Sprint(g["timeline"]), "queued") {
		t.Fatalf("a queued environment does not say so: %v", g)
	}

	// Room frees up: the queued sandbox first, then the environments in order.
	if r := ta.req("DELETE", "/sandboxes/"+a, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete a: %d %s", r.code, r.body)
	}
	ta.waitState(bID, 3*time.Minute, "running")
	if r := ta.req("DELETE", "/sandboxes/"+bID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete b: %d %s", r.code, r.body)
	}
	ta.waitEnv(paths[0], 3*time.Minute, "ready")
	for _, p := range paths[1:] {
		if st := ta.req("GET", p+"/status", nil).json(t)["state"]; st != "building" {
			t.Fatalf("%s is %v while another environment holds the only slot", p, st)
		}
	}
	if running, queued, cpu, mem := quota(); running != 1 || queued != 2 || cpu != 2 || mem != 1024 {
		t.Fatalf("one two-service environment ready: running %v queued %v cpu %v memory_mb %v; want 1, 2, 2, 1024", running, queued, cpu, mem)
	}
	if r := ta.req("DELETE", paths[0], nil); r.code != http.StatusOK {
		t.Fatalf("delete the first environment: %d %s", r.code, r.body)
	}
	ta.waitEnv(paths[1], 3*time.Minute, "ready")
	if st := ta.req("GET", paths[2]+"/status", nil).json(t)["state"]; st != "building" {
		t.Fatalf("the third environment is %v while the second holds the only slot", st)
	}
	// Deleting a queued environment ends it without it ever running.
	if r := ta.req("DELETE", paths[2], nil); r.code != http.StatusOK {
		t.Fatalf("delete a queued environment: %d %s", r.code, r.body)
	}
	ta.waitEnv(paths[2], time.Minute, "torn_down")
	if running, queued, _, _ := quota(); running != 1 || queued != 0 {
		t.Fatalf("at the end: running %v, queued %v; want 1 and 0", running, queued)
	}
}
