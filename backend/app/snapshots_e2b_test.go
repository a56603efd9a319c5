package app

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Snapshots on the E2B provider go through E2B's own snapshot routes: the
// snapshot is an E2B team template the org's sandboxes start from (with the
// files written before it), the snapshot's delete removes the E2B template,
// and fork still answers that the provider cannot checkpoint.
func TestSnapshotsOnE2B(t *testing.T) {
	t.Parallel()
	ta, fake := newE2BApp(t)
	id, tok := ta.create(map[string]any{"waitReady": true, "timeout": 120})
	if w := ta.req("PUT", "/sandboxes/"+id+"/files?path=/tmp/f", "data", "X-Access-Token", tok); w.code != 204 {
		t.Fatalf("write: %d %s", w.code, w.body)
	}
	before := fake.Templates()
	r := ta.req("POST", "/sandboxes/"+id+"/snapshots", map[string]any{"name": "e2bsnap"})
	if r.code != http.StatusCreated {
		t.Fatalf("snapshot on E2B: %d %s", r.code, r.body)
	}
	var made []string
	for _, tpl := range fake.Templates() {
		if !slices.Contains(before, tpl) {
			made = append(made, tpl)
		}
	}
	if len(made) != 1 {
		t.Fatalf("E2B templates made by the snapshot: %v", made)
	}
	if s := ta.req("GET", "/sandboxes/"+id, nil); s.code != 200 || s.json(t)["state"] != "running" {
		t.Fatalf("the sandbox after its snapshot: %d %s", s.code, s.body)
	}
	child, ctok := ta.create(map[string]any{"templateID": "e2bsnap", "waitReady": true, "timeout": 120})
	if c := ta.req("GET", "/sandboxes/"+child, nil); c.code != 200 || c.json(t)["state"] != "running" {
		t.Fatalf("a sandbox from the snapshot: %d %s", c.code, c.body)
	}
	if f := ta.req("GET", "/sandboxes/"+child+"/files?path=/tmp/f", nil, "X-Access-Token", ctok); f.code != 200 || string(f.body) != "data" {
		t.Fatalf("the snapshot's file in a sandbox started from it: %d %s", f.code, f.body)
	}
	if f := ta.req("POST", "/sandboxes/"+id+"/fork", map[string]any{"count": 1}); f.code != http.StatusServiceUnavailable || !strings.Contains(string(f.body), "checkpoint") {
		t.Fatalf("fork on E2B: %d %s", f.code, f.body)
	}
	if d := ta.req("DELETE", "/templates/e2bsnap", nil); d.code != http.StatusNoContent {
		t.Fatalf("delete the snapshot: %d %s", d.code, d.body)
	}
	if slices.Contains(fake.Templates(), made[0]) {
		t.Fatalf("the E2B template outlived the snapshot's delete: %v", fake.Templates())
	}
}
