package tasks_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// waitFailed polls until the environment failed and returns its error.
func (h *harness) waitFailed(org, ws, id string, timeout time.Duration) string {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	since := ""
	for {
		q := "?wait=10"
		if since != "" {
			q += "&since=" + since
		}
		m := h.do(org, http.MethodGet, envPath(org, ws, "/", id, "/status", q), nil).JSON(h.t)
		st := m["state"].(string)
		if st == "failed" {
			msg, _ := m["error"].(string)
			if msg == "" {
				h.t.Fatalf("failed without an error: %v", m)
			}
			return msg
		}
		if st == "torn_down" {
			h.t.Fatalf("environment %s is %s, want failed", id, st)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("environment %s still %s after %s, want failed", id, st, timeout)
		}
		since = st
	}
}

// A task whose image build fails: failed with "task build failed: ..."
// naming the step and the builder's message, the record failed, nothing left.
func TestBuildFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "broken-build", "inputs": map[string]string{"nonce": ids.New()}})
	msg := h.waitFailed("acme", "ws", id, 3*time.Minute)
	t.Log(msg)
	for _, want := range []string{"task build failed: ", `service "app"`, "RUN echo", "returned a non-zero code: 3", "missing header frobnicate.h"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if !strings.HasPrefix(msg, "task build failed: ") {
		t.Errorf("error %q does not start with task build failed", msg)
	}
	h.waitGone(id, 10*time.Second)
	env := h.get("acme", "ws", id)
	rec := h.record(env["sandbox_id"].(string))
	if rec.Phase != sandbox.PhaseFailed || rec.KillReason != sandbox.KillFailed || !strings.Contains(rec.Diagnostic, "task build failed") {
		t.Fatalf("record: %+v", rec)
	}
	if env["service_urls"] != nil || env["expires_at"] != nil {
		t.Fatalf("failed environment shows service_urls/expires_at: %v", env)
	}
	// Delete of a failed environment: 200, stays failed.
	if d := h.do("acme", http.MethodDelete, envPath("acme", "ws", "/", id), nil); d.Code != 200 || d.JSON(t)["state"] != "failed" {
		t.Fatalf("delete failed env: %d %s", d.Code, d.Body)
	}
}

// A service whose healthcheck never passes: failed naming the service, its
// health and its last log lines; nothing left.
func TestNeverHealthy(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "never-healthy"})
	msg := h.waitFailed("acme", "ws", id, 2*time.Minute)
	t.Log(msg)
	for _, want := range []string{`service "web" never became healthy`, "probe failed", "last log lines", "booting the never-healthy web service", "config error: database url missing"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	h.waitGone(id, 10*time.Second)
	rec := h.record(h.get("acme", "ws", id)["sandbox_id"].(string))
	if rec.Phase != sandbox.PhaseFailed || rec.KillReason != sandbox.KillFailed {
		t.Fatalf("record: %+v", rec)
	}
}

// A service that is still starting when the ready deadline passes: failed
// with its health so far and its log.
func TestReadyDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *tasks.Config) { c.ReadyDeadline = 3 * time.Second })
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "slow-start"})
	msg := h.waitFailed("acme", "ws", id, time.Minute)
	t.Log(msg)
	if !strings.Contains(msg, "not ready within 3s") || !strings.Contains(msg, `service "web"`) {
		t.Errorf("error %q does not name the deadline and the web service", msg)
	}
	// Normally web runs but is not healthy yet: its health and log are shown.
	// On an overloaded engine it may still be starting, or running without
	// having printed yet (its command starts under the agent): then the
	// error says so rather than showing nothing.
	if strings.Contains(msg, "never became healthy") && !strings.Contains(msg, "warming up") && !strings.Contains(msg, "wrote no log output") {
		t.Errorf("error %q lacks the service's log", msg)
	}
	h.waitGone(id, 10*time.Second)
}

// A service of a ready environment dies: the environment fails with the
// service's last log lines and nothing is left.
func TestDeadServiceFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "web-login"})
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	for _, c := range h.containers(id) {
		if c.Labels["dev.dreadnode.service"] == "web" {
			if err := h.cli.ContainerKill(context.Background(), c.ID, "KILL"); err != nil {
				t.Fatal(err)
			}
		}
	}
	msg := h.waitFailed("acme", "ws", id, time.Minute)
	t.Log(msg)
	if !strings.Contains(msg, `service "web" stopped unexpectedly`) || !strings.Contains(msg, "web-login listening") {
		t.Fatalf("error: %q", msg)
	}
	h.waitGone(id, 10*time.Second)
}

// Expiry: a ready environment past expires_at (moved by the test clock) is
// torn down with reason timeout, its containers removed.
func TestExpiry(t *testing.T) {
	t.Parallel()
	pgtest.EachDatabase(t, func(t *testing.T, db string) {
		t.Parallel()
		h := newHarnessOn(t, db)
		id, _ := h.create("acme", "ws", map[string]any{"task_ref": "web-login", "timeout_sec": 60})
		h.waitState("acme", "ws", id, readyTimeout, "ready")
		if len(h.containers(id)) != 2 {
			t.Fatal("expected 2 containers")
		}
		h.clock.Advance(61 * time.Second)
		h.svc.Kick()
		st := h.waitState("acme", "ws", id, 30*time.Second, "torn_down")
		if st["service_urls"] != nil {
			t.Fatalf("torn down status shows service_urls: %v", st)
		}
		h.waitGone(id, 10*time.Second)
		rec := h.record(h.get("acme", "ws", id)["sandbox_id"].(string))
		if rec.Phase != sandbox.PhaseDeleted || rec.KillReason != sandbox.KillTimeout {
			t.Fatalf("record: %+v", rec)
		}
	})
}

// Expiry with a real short timeout (min override), no clock games.
func TestExpiryMinOverride(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *tasks.Config) { c.MinTimeoutSec = 1 })
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "web-login", "timeout_sec": 2})
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	h.waitState("acme", "ws", id, 30*time.Second, "torn_down")
	h.waitGone(id, 10*time.Second)
}

// The credits system ends the record (stopping, insufficient_credits): the
// environment is torn down with an error saying so, the record finished.
func TestInsufficientCreditsTearsDown(t *testing.T) {
	t.Parallel()
	pgtest.EachDatabase(t, func(t *testing.T, db string) {
		t.Parallel()
		h := newHarnessOn(t, db)
		id, _ := h.create("acme", "ws", map[string]any{"task_ref": "web-login"})
		h.waitState("acme", "ws", id, readyTimeout, "ready")
		recID := h.get("acme", "ws", id)["sandbox_id"].(string)
		_, err := h.db.Transition(context.Background(), recID, sandbox.PhaseStopping, sandbox.CauseUser, func(r *store.Record) error {
			r.KillReason = sandbox.KillInsufficientCredits
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		st := h.waitState("acme", "ws", id, 30*time.Second, "torn_down")
		if e, _ := st["error"].(string); !strings.Contains(e, "insufficient") || !strings.Contains(e, "credits") {
			t.Fatalf("error: %v", st["error"])
		}
		h.waitGone(id, 10*time.Second)
		rec := h.record(recID)
		if rec.Phase != sandbox.PhaseDeleted || rec.KillReason != sandbox.KillInsufficientCredits || rec.KilledAt.IsZero() {
			t.Fatalf("record: %+v", rec)
		}
	})
}

// A command exceeding timeout_sec answers 200 with exit_code 124 and a note.
func TestExecuteTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, token := h.create("acme", "ws", map[string]any{"task_ref": "web-login"})
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	start := time.Now()
	r := h.execute("acme", "ws", id, token, map[string]any{"command": "echo started; sleep 30", "timeout_sec": 1})
	m := r.JSON(t)
	if r.Code != 200 || m["exit_code"].(float64) != 124 || m["timed_out"] != true || m["note"] == nil || !strings.Contains(m["output"].(string), "started") {
		t.Fatalf("timed out command: %d %s", r.Code, r.Body)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("timed out command took %s", d)
	}
	// The process was killed inside the container.
	ps := h.execute("acme", "ws", id, token, map[string]any{"command": "ps | grep 'sleep 30' | grep -v grep || echo none"}).JSON(t)
	if !strings.Contains(ps["output"].(string), "none") {
		t.Fatalf("sleep still running: %v", ps["output"])
	}
	// Large output is truncated, not fatal.
	big := h.execute("acme", "ws", id, token, map[string]any{"command": "head -c 3000000 /dev/zero | tr '\\0' x"}).JSON(t)
	if big["truncated"] != true || len(big["output"].(string)) != tasks.DefaultMaxExecOutput {
		t.Fatalf("big output: truncated=%v len=%d", big["truncated"], len(big["output"].(string)))
	}
}

// Containers and networks of this owner whose environment is unknown or over
// are removed by the sweep; other owners' resources are left alone.
func TestOrphanCollection(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	mk := func(owner, env string) string {
		resp, err := h.cli.ContainerCreate(ctx, &container.Config{Image: "dreadnode/base:latest", Labels: map[string]string{
			"dev.dreadnode.tasks.owner": owner, "dev.dreadnode.environment": env, "dev.dreadnode.kind": "task", "dev.dreadnode.managed": "true"}},
			nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	orphan := mk(h.svc.Owner(), "ghost-"+ids.New())
	foreignOwner := "someone-else-" + ids.New()
	foreign := mk(foreignOwner, "ghost-"+ids.New())
	defer func() { _ = h.cli.ContainerRemove(ctx, foreign, container.RemoveOptions{Force: true}) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := h.cli.ContainerInspect(ctx, orphan)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("orphan container was not collected")
		}
		time.Sleep(50 * time.Millisecond) // polling Docker with a deadline
	}
	if _, err := h.cli.ContainerInspect(ctx, foreign); err != nil {
		t.Fatalf("another owner's container was removed: %v", err)
	}
	// A throw-away deployment's leftovers go with CleanupGroups.
	if err := docker.CleanupGroups(ctx, "", foreignOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cli.ContainerInspect(ctx, foreign); err == nil {
		t.Fatal("CleanupGroups left the container")
	}
}

// Many environments of one task at once: all ready, each with its own network.
func TestConcurrentEnvironments(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const n = 5
	idsList := make([]string, n)
	for i := range idsList {
		idsList[i], _ = h.create("acme", "fan", map[string]any{"task_ref": "web-login", "inputs": map[string]string{"flag": fmt.Sprint("F", i)}})
	}
	for _, id := range idsList {
		h.waitState("acme", "fan", id, readyTimeout, "ready")
	}
	seen := map[string]bool{}
	for _, id := range idsList {
		ns := h.networks(id)
		if len(ns) != 1 || seen[ns[0].ID] {
			t.Fatalf("environment %s networks: %+v", id, ns)
		}
		seen[ns[0].ID] = true
	}
	for _, id := range idsList {
		if d := h.do("acme", http.MethodDelete, envPath("acme", "fan", "/", id), nil); d.Code != 200 {
			t.Fatalf("delete: %d %s", d.Code, d.Body)
		}
	}
}
