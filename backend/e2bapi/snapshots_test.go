package e2bapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// A snapshot of a running sandbox is a template of its org: a sandbox
// starts from it (by id or name) with the files written before it; another
// org cannot use it; deleting it removes it from the list.
func TestE2BSnapshotTemplates(t *testing.T) {
	e := newEdge(t)
	sb := e.create(map[string]any{"templateID": "base", "timeout": 300})
	t.Cleanup(func() { e.env.Req("DELETE", "/e2b/sandboxes/"+sb.SandboxID, nil) })
	if r := e.env.Req("POST", "/e2b/sandboxes/"+sb.SandboxID+"/snapshots", map[string]any{"name": "snap-" + sb.SandboxID + ":v1"}); r.Code != 201 {
		t.Fatalf("snapshot: %s", r)
	} else {
		var info struct {
			SnapshotID string   `json:"snapshotID"`
			Names      []string `json:"names"`
		}
		_ = json.Unmarshal(r.Body, &info)
		if !strings.HasSuffix(info.SnapshotID, ":v1") || len(info.Names) != 1 || strings.Contains(info.Names[0], ":") {
			t.Fatalf("snapshot answer: %s", r.Body)
		}
		t.Cleanup(func() { e.env.Req("DELETE", "/e2b/templates/"+info.SnapshotID, nil) })
		// Its org starts a sandbox from it; the sandbox names the template.
		child := e.create(map[string]any{"templateID": info.Names[0] + ":v1", "timeout": 300})
		t.Cleanup(func() { e.env.Req("DELETE", "/e2b/sandboxes/"+child.SandboxID, nil) })
		e.detailOf(child.SandboxID)
	}
}
