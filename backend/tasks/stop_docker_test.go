package tasks_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
)

// keptOpen leaves Close to the test, so the Docker engine outlives the
// Service for the harness's own cleanup.
type keptOpen struct{ tasks.Engine }

func (keptOpen) Close() error { return nil }

// withSlowDocker runs the harness's Services on engines slow to remove:
// each wraps the Docker group provider the harness would give the Service,
// its removals held by slow.
func withSlowDocker(t *testing.T, slow *computetest.RemoveHold) func(*tasks.Config) {
	return func(c *tasks.Config) {
		inner := c.Groups
		c.Groups = func(f tasks.GroupsFor) (tasks.Engine, error) {
			eng, err := inner(f)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { eng.Close() }) // after the harness's own cleanup
			return keptOpen{slow.Wrap(eng)}, nil
		}
	}
}

// On Docker: a deleted environment's ledger record reads stopping while the
// engine is still removing its containers, and deleted only once every one
// of them is gone; the environment shows torn_down only then too, and the
// ledger API reads it killed only then (running until then).
func TestDeleteEndsRecordOnlyAfterContainersGoneOnDocker(t *testing.T) {
	t.Parallel()
	slow := computetest.NewRemoveHold()
	h := newHarness(t, withSlowDocker(t, slow))
	t.Cleanup(slow.Release) // before the harness's cleanup, which deletes what is left
	id, _ := h.create("acme", "ws", map[string]any{"task_ref": "web-login", "timeout_sec": 600})
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	recID, _ := h.get("acme", "ws", id)["sandbox_id"].(string)
	if len(h.containers(id)) == 0 {
		t.Fatal("a ready environment without containers")
	}
	done := make(chan *response, 1)
	go func() { done <- h.do("acme", http.MethodDelete, envPath("acme", "ws", "/", id), nil) }()
	slow.WaitRemoving(t, id, time.Minute)
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
	slow.Release()
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
