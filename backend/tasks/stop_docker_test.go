package tasks_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
)

// slowDocker is the Docker engine, slow to remove: Remove waits until the
// test opens the gate. Close is the test's (the harness makes several
// Services on one engine).
type slowDocker struct {
	tasks.Engine
	entered chan string
	gate    chan struct{}
}

func (e *slowDocker) Remove(ctx context.Context, envID string) error {
	_, err := e.RemoveCount(ctx, envID)
	return err
}

func (e *slowDocker) RemoveCount(ctx context.Context, envID string) (int, error) {
	select {
	case e.entered <- envID:
	default:
	}
	select {
	case <-e.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return e.Engine.RemoveCount(ctx, envID)
}

func (e *slowDocker) Close() error { return nil }

// withSlowDocker runs the harness's Services on engines slow to remove:
// each wraps the Docker group provider the harness would give the Service,
// sharing slow's gate and its report of removals entered.
func withSlowDocker(t *testing.T, slow *slowDocker) func(*tasks.Config) {
	return func(c *tasks.Config) {
		inner := c.Groups
		c.Groups = func(f tasks.GroupsFor) (tasks.Engine, error) {
			eng, err := inner(f)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { eng.Close() }) // after the harness's own cleanup
			return &slowDocker{Engine: eng, entered: slow.entered, gate: slow.gate}, nil
		}
	}
}

// On Docker: a deleted environment's ledger record reads stopping while the
// engine is still removing its containers, and deleted only once every one
// of them is gone; the environment shows torn_down only then too, and the
// ledger API reads it killed only then (running until then).
func TestDeleteEndsRecordOnlyAfterContainersGoneOnDocker(t *testing.T) {
	t.Parallel()
	slow := &slowDocker{entered: make(chan string, 16), gate: make(chan struct{})}
	h := newHarness(t, withSlowDocker(t, slow))
	var open sync.Once
	openGate := func() { open.Do(func() { close(slow.gate) }) }
	t.Cleanup(openGate) // before the harness's cleanup, which deletes what is left
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "web-login", "timeout_sec": 600})
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	recID, _ := h.get("acme", "ws", id)["sandbox_id"].(string)
	if len(h.containers(id)) == 0 {
		t.Fatal("a ready environment without containers")
	}
	done := make(chan *response, 1)
	go func() { done <- h.do("acme", http.MethodDelete, envPath("acme", "ws", "/", id), nil) }()
	for end := time.Now().Add(time.Minute); ; {
		select {
		case got := <-slow.entered:
			if got != id {
				continue
			}
		case <-time.After(time.Until(end)):
			t.Fatal("the removal never reached the engine")
		}
		break
	}
	rec := h.record(recID)
	if rec.Phase != sandbox.PhaseStopping || rec.KillReason != sandbox.KillTornDown {
		t.Fatalf("during the removal: record %s (%s), want stopping", rec.Phase, rec.KillReason)
	}
	if n := len(h.containers(id)); n == 0 {
		t.Fatal("the containers were gone before the engine was let remove them")
	}
	if st := h.get("acme", "ws", id)["state"]; st != "ready" {
		t.Fatalf("environment %v during the removal, want ready (torn_down once its containers are gone)", st)
	}
	// The ledger API reads the record as what it is leaving (running), not
	// killed, while its containers are still there.
	if l := h.ledger(recID); l["state"] != string(sandbox.LedgerRunning) || len(h.containers(id)) == 0 {
		t.Fatalf("ledger during the removal: %v (containers %d), want running with the containers present", l["state"], len(h.containers(id)))
	}
	openGate()
	var d *response
	select {
	case d = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the delete never answered")
	}
	if d.Code != http.StatusOK || d.JSON(t)["state"] != "torn_down" {
		t.Fatalf("delete: %d %s", d.Code, d.Body)
	}
	if cs, ns := h.containers(id), h.networks(id); len(cs) != 0 || len(ns) != 0 {
		t.Fatalf("after the delete: %d containers, %d networks", len(cs), len(ns))
	}
	if rec = h.record(recID); rec.Phase != sandbox.PhaseDeleted || rec.KilledAt.IsZero() {
		t.Fatalf("after the delete: record %s", rec.Phase)
	}
	if l := h.ledger(recID); l["state"] != string(sandbox.LedgerKilled) || l["kill_reason"] != sandbox.KillTornDown {
		t.Fatalf("ledger after the delete: %v (%v), want killed (torn_down)", l["state"], l["kill_reason"])
	}
}
