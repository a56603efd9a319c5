package app

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// The snapshot quotas through the routes, on the real engine: an operator
// sets max_snapshots and max_snapshot_bytes (a negative value is a 400
// naming it), a snapshot past max_snapshots is a 409 naming it, one once
// the org's snapshots hold max_snapshot_bytes is a 409 naming that, and GET
// /sandboxes/usage shows snapshots and snapshot_bytes until the snapshot is
// deleted; refused snapshots leave no image.
func TestSnapshotQuotasAndUsage(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(c *Config) { c.AdminKey = "admin-" + t.Name() })
	admin := func(method, path string, body any) resp { return ta.reqKey("admin-"+t.Name(), method, path, body) }
	id, _ := ta.create(map[string]any{"waitReady": true, "timeout": 300})
	images := func() []string {
		out, err := exec.Command("docker", "images", "-q", "dreadnode-snapshot/"+id).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(out))
	}
	t.Cleanup(func() {
		for _, img := range images() {
			_ = exec.Command("docker", "rmi", "-f", img).Run()
		}
	})
	for _, field := range []string{"max_snapshots", "max_snapshot_bytes"} {
		if r := admin("PUT", "/admin/orgs/org1/quotas", map[string]any{field: -1}); r.code != 400 || !strings.Contains(string(r.body), field) {
			t.Fatalf("a negative %s: %d %s", field, r.code, r.body)
		}
	}
	if r := admin("PUT", "/admin/orgs/org1/quotas", map[string]any{"max_snapshots": 1}); r.code != 200 || !strings.Contains(string(r.body), `"max_snapshots":1`) {
		t.Fatalf("set max_snapshots: %d %s", r.code, r.body)
	}
	r := ta.req("POST", "/sandboxes/"+id+"/snapshots", map[string]any{})
	if r.code != http.StatusCreated {
		t.Fatalf("the first snapshot: %d %s", r.code, r.body)
	}
	tid, _ := r.json(t)["templateID"].(string)
	if r := ta.req("POST", "/sandboxes/"+id+"/snapshots", map[string]any{}); r.code != http.StatusConflict || !strings.Contains(string(r.body), "max_snapshots") {
		t.Fatalf("a snapshot past max_snapshots: %d %s", r.code, r.body)
	}
	u := ta.req("GET", "/api/v1/org/org1/sandboxes/usage", nil).json(t)
	if u["snapshots"] != float64(1) || u["snapshot_bytes"].(float64) <= 0 {
		t.Fatalf("usage with one snapshot: %v", u)
	}
	if r := admin("PUT", "/admin/orgs/org1/quotas", map[string]any{"max_snapshot_bytes": 1}); r.code != 200 {
		t.Fatalf("set max_snapshot_bytes: %d %s", r.code, r.body)
	}
	if r := ta.req("POST", "/sandboxes/"+id+"/snapshots", map[string]any{"name": "more"}); r.code != http.StatusConflict || !strings.Contains(string(r.body), "max_snapshot_bytes") {
		t.Fatalf("a snapshot past max_snapshot_bytes: %d %s", r.code, r.body)
	}
	if n := len(images()); n != 1 {
		t.Fatalf("%d snapshot images; the refused snapshots must leave none", n)
	}
	if r := ta.req("DELETE", "/templates/"+tid, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete the snapshot: %d %s", r.code, r.body)
	}
	if u := ta.req("GET", "/api/v1/org/org1/sandboxes/usage", nil).json(t); u["snapshots"] != float64(0) || u["snapshot_bytes"] != float64(0) {
		t.Fatalf("usage once the snapshot is deleted: %v", u)
	}
	if n := len(images()); n != 0 {
		t.Fatalf("%d snapshot images left after the delete", n)
	}
}
