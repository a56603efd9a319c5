package tasks_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// dbState reads an environment's state straight from the database.
func (h *harness) dbState(id string) string {
	h.t.Helper()
	var st string
	if err := h.db.Reader().QueryRow(`SELECT state FROM task_environments WHERE id = ?`, id).Scan(&st); err != nil {
		h.t.Fatal(err)
	}
	return st
}

// waitContainers polls until environment id has at least n running containers.
func (h *harness) waitContainers(id string, n int, timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	running := func() int {
		k := 0
		for _, c := range h.containers(id) {
			if c.State == "running" {
				k++
			}
		}
		return k
	}
	for running() < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("environment %s never had %d containers", id, n)
		}
		time.Sleep(20 * time.Millisecond) // polling Docker with a deadline
	}
}

// The service stops mid-provisioning (its web service is up but not yet
// healthy); a new Service on the same database adopts the running container
// and finishes: ready, one container per service, nothing leaked.
func TestRestartDuringProvisioning(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "slow-start"})
	h.waitContainers(id, 1, readyTimeout)
	h.stopService()
	if st := h.dbState(id); st != "provisioning" {
		t.Fatalf("state after the stop: %s, want provisioning (a stop must not change it)", st)
	}
	h.start()
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	cs := h.containers(id)
	if len(cs) != 2 || len(h.networks(id)) != 1 {
		t.Fatalf("after recovery: %d containers, %d networks", len(cs), len(h.networks(id)))
	}
	if tl := timeline(h.get("acme", "ws", id)); !strings.Contains(tl, "adopted") {
		t.Fatalf("timeline does not mention the adoption: %s", tl)
	}
}

// The service stops while building; the new Service rebuilds (idempotent)
// and provisions.
func TestRestartDuringBuilding(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	nonce := ids.New()
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "nonce-build", "inputs": map[string]string{"nonce": nonce}})
	h.stopService()
	if st := h.dbState(id); st != "building" {
		t.Fatalf("state after the stop: %s, want building", st)
	}
	h.start()
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	image := h.containers(id)[0].Image
	h.do("acme", "DELETE", envPath("acme", "ws", "/", id), nil)
	_ = dockerRuntime(t, h.svc).RemoveImage(context.Background(), image)
}

// Stopped mid-provisioning and restarted after the ready deadline: the
// environment fails saying so, and what it had started is removed.
func TestRestartPastDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "slow-start"})
	h.waitContainers(id, 1, readyTimeout)
	h.stopService()
	h.clock.Advance(h.cfg.ReadyDeadline + time.Second)
	h.start()
	msg := h.waitFailed("acme", "ws", id, time.Minute)
	if !strings.Contains(msg, "provisioning did not finish within") || !strings.Contains(msg, "restarted") {
		t.Fatalf("error: %q", msg)
	}
	h.waitGone(id, 10*time.Second)
	rec := h.record(h.get("acme", "ws", id)["sandbox_id"].(string))
	if rec.Phase != sandbox.PhaseFailed {
		t.Fatalf("record: %+v", rec)
	}
}

// A real crash: a helper process serving the tasks API is killed with
// SIGKILL while an environment provisions; a Service started on the same
// database file ends the environment ready, with no leaked container.
func TestCrashKill9(t *testing.T) {
	t.Parallel()
	pgtest.EachDatabase(t, func(t *testing.T, db string) {
		t.Parallel()
		h := newHarnessOn(t, db)
		h.stopService() // the helper process runs the service; this harness only checks
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), "TASKS_HELPER_DB="+h.dbPath, "TASKS_HELPER_CATALOG="+catalogDirs, "TASKS_HELPER_AGENT="+agentbin.Path(t))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(out)
		var base string
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "helper listening on "); ok {
				base = u
				break
			}
		}
		if base == "" {
			t.Fatal("the helper did not start")
		}
		req, _ := http.NewRequest(http.MethodPost, base+envPath("acme", "ws"), strings.NewReader(`{"task_ref":"slow-start"}`))
		req.Header.Set("X-Test-Org", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("create on the helper: %d", resp.StatusCode)
		}
		var id string
		deadline := time.Now().Add(time.Minute)
		for id == "" {
			_ = h.db.Reader().QueryRow(`SELECT id FROM task_environments LIMIT 1`).Scan(&id)
			if time.Now().After(deadline) {
				t.Fatal("no environment row")
			}
			time.Sleep(10 * time.Millisecond) // polling the database with a deadline
		}
		h.waitContainers(id, 1, readyTimeout)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if st := h.dbState(id); st != "provisioning" {
			t.Fatalf("state after the crash: %s", st)
		}
		h.start()
		h.waitState("acme", "ws", id, readyTimeout, "ready")
		if cs := h.containers(id); len(cs) != 2 {
			t.Fatalf("after recovery: %d containers", len(cs))
		}
	})
}

// TestHelperProcess is not a test: TestCrashKill9 runs it as a separate
// process serving the tasks API on a database file.
func TestHelperProcess(t *testing.T) {
	dbPath := os.Getenv("TASKS_HELPER_DB")
	if dbPath == "" {
		return // only meaningful as TestCrashKill9's child process
	}
	db, err := store.Open(context.Background(), dbPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	svc, err := tasks.New(tasks.Config{DB: db, CatalogDir: os.Getenv("TASKS_HELPER_CATALOG"), SweepInterval: 200 * time.Millisecond,
		Groups: dockerGroups(docker.GroupConfig{}, os.Getenv("TASKS_HELPER_AGENT"))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go func() { _ = svc.Run(context.Background()) }()
	r := mux.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(httpx.WithOrg(r.Context(), r.Header.Get("X-Test-Org"))))
		})
	})
	svc.Register(r)
	srv := httptest.NewServer(r)
	fmt.Printf("helper listening on %s\n", srv.URL)
	select {} // until killed
}

// DELETE while the worker is creating the network and containers: when the
// answer comes, nothing of the environment exists, without any sweep's help
// (the Service is stopped right after, as a test backend would be).
func TestDeleteDuringProvisioningLeavesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *tasks.Config) { c.SweepInterval = time.Hour })
	const n = 6
	var envIDs []string
	for i := 0; i < n; i++ {
		id, _ := h.create("acme", "del", map[string]any{"task_ref": "web-login"})
		envIDs = append(envIDs, id)
	}
	for i, id := range envIDs {
		// Cut at different points: right away, once provisioning, or once a
		// container runs.
		// Reaching a cut point only waits for the build (BuildDeadline is 5
		// minutes): under a loaded engine the first build of the task's
		// images, shared by parallel tests, was seen taking over a minute.
		switch i % 3 {
		case 1:
			h.waitState("acme", "del", id, readyTimeout, "provisioning", "ready")
		case 2:
			h.waitContainers(id, 1, readyTimeout)
		}
		if d := h.do("acme", "DELETE", envPath("acme", "del", "/", id), nil); d.Code != 200 || d.JSON(t)["state"] != "torn_down" {
			t.Fatalf("delete: %d %s", d.Code, d.Body)
		}
		if cs, ns := h.containers(id), h.networks(id); len(cs) != 0 || len(ns) != 0 {
			t.Errorf("environment %s (cut %d) left %d containers and %d networks right after DELETE", id, i%3, len(cs), len(ns))
		}
	}
	h.stopService()
	for _, id := range envIDs {
		if cs, ns := h.containers(id), h.networks(id); len(cs) != 0 || len(ns) != 0 {
			t.Errorf("environment %s left %d containers and %d networks", id, len(cs), len(ns))
		}
	}
}
