package app

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// §14 volumes on the native API and Docker: two sandboxes of the org share
// a volume that outlives them; another org cannot see it; deleting it while
// a sandbox mounts it is refused naming the sandbox; the quotas refuse
// more volumes naming the limit; usage counts them.
func TestVolumesNative(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(c *Config) { c.AdminKey = "admin-" + t.Name() })
	admin := func(method, path string, body any) resp { return ta.reqKey("admin-"+t.Name(), method, path, body) }
	if r := admin("POST", "/admin/orgs", map[string]any{"org": "other", "credits": 10}); r.code != http.StatusCreated {
		t.Fatalf("second org: %d %s", r.code, r.body)
	}
	r := admin("POST", "/admin/orgs/other/keys", map[string]any{"name": "k"})
	if r.code != http.StatusCreated {
		t.Fatalf("second org's key: %d %s", r.code, r.body)
	}
	otherKey := r.json(t)["key"].(string)

	r = ta.req("POST", "/volumes", map[string]any{"name": "data"})
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	vid := r.json(t)["volumeID"].(string)
	if r := ta.req("POST", "/volumes", map[string]any{"name": "data"}); r.code != http.StatusConflict {
		t.Fatalf("a taken name: %d %s", r.code, r.body)
	}
	if r := ta.req("POST", "/volumes", map[string]any{"name": "bad name"}); r.code != http.StatusBadRequest || !strings.Contains(string(r.body), "name") {
		t.Fatalf("a bad name: %d %s", r.code, r.body)
	}
	if r := ta.reqKey(otherKey, "GET", "/volumes/"+vid, nil); r.code != http.StatusNotFound {
		t.Fatalf("another org's volume: %d %s", r.code, r.body)
	}
	if r := ta.reqKey(otherKey, "DELETE", "/volumes/"+vid, nil); r.code != http.StatusNotFound {
		t.Fatalf("deleting another org's volume: %d %s", r.code, r.body)
	}
	if r := ta.reqKey(otherKey, "POST", "/sandboxes", map[string]any{"volumeMounts": []any{map[string]any{"name": "data", "path": "/data", "shared": true}}}); r.code != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "volumeMounts.0.name") {
		t.Fatalf("another org mounting it: %d %s", r.code, r.body)
	}

	mount := []any{map[string]any{"name": "data", "path": "/data", "shared": true}}
	tokens := map[string]string{}
	a, ta1 := ta.create(map[string]any{"waitReady": true, "volumeMounts": mount})
	b, tb1 := ta.create(map[string]any{"waitReady": true, "volumeMounts": mount})
	tokens[a], tokens[b] = ta1, tb1
	exec := func(id string, cmd ...string) string {
		t.Helper()
		r := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": cmd}, "X-Access-Token", tokens[id])
		if r.code != http.StatusOK {
			t.Fatalf("exec in %s: %d %s", id, r.code, r.body)
		}
		return strings.TrimSpace(r.json(t)["stdout"].(string))
	}
	exec(a, "sh", "-c", "echo shared-bytes > /data/f")
	if got := exec(b, "cat", "/data/f"); got != "shared-bytes" {
		t.Fatalf("b reads %q", got)
	}
	r = ta.req("DELETE", "/volumes/"+vid, nil)
	if r.code != http.StatusConflict || !strings.Contains(string(r.body), a) || !strings.Contains(string(r.body), b) {
		t.Fatalf("deleting a mounted volume: %d %s", r.code, r.body)
	}
	for _, id := range []string{a, b} {
		if r := ta.req("DELETE", "/sandboxes/"+id, nil); r.code != http.StatusNoContent {
			t.Fatalf("delete %s: %d %s", id, r.code, r.body)
		}
	}
	c, tc := ta.create(map[string]any{"waitReady": true, "volumeMounts": mount})
	tokens[c] = tc
	if got := exec(c, "cat", "/data/f"); got != "shared-bytes" {
		t.Fatalf("the volume did not outlive its sandboxes: %q", got)
	}
	if r := ta.req("DELETE", "/sandboxes/"+c, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete %s: %d %s", c, r.code, r.body)
	}

	r = ta.req("GET", "/api/v1/org/org1/sandboxes/usage", nil)
	if m := r.json(t); r.code != http.StatusOK || m["volumes"] != float64(1) {
		t.Fatalf("usage: %d %s", r.code, r.body)
	}
	if r := admin("PUT", "/admin/orgs/org1/quotas", map[string]any{"max_volumes": 1}); r.code != http.StatusOK {
		t.Fatalf("quotas: %d %s", r.code, r.body)
	}
	if r := ta.req("POST", "/volumes", map[string]any{"name": "second"}); r.code != http.StatusConflict || !strings.Contains(string(r.body), "max_volumes") {
		t.Fatalf("past max_volumes: %d %s", r.code, r.body)
	}
	if r := admin("PUT", "/admin/orgs/org1/quotas", map[string]any{"max_volume_bytes": 1}); r.code != http.StatusOK {
		t.Fatalf("quotas: %d %s", r.code, r.body)
	}
	// The file written above makes the volume hold at least a byte once measured.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r := ta.req("POST", "/volumes", map[string]any{"name": "third"})
		if r.code == http.StatusConflict && strings.Contains(string(r.body), "max_volume_bytes") {
			break
		}
		if r.code == http.StatusCreated {
			_ = ta.req("DELETE", "/volumes/"+r.json(t)["volumeID"].(string), nil)
		}
		if time.Now().After(deadline) {
			t.Fatalf("past max_volume_bytes: %d %s", r.code, r.body)
		}
		time.Sleep(time.Second) // the measurement is at most a minute old
	}
	if r := ta.req("DELETE", "/volumes/"+vid, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete the volume: %d %s", r.code, r.body)
	}
	if r := ta.req("GET", "/volumes/"+vid, nil); r.code != http.StatusNotFound {
		t.Fatalf("after delete: %d %s", r.code, r.body)
	}
	if r := ta.req("DELETE", "/volumes/"+vid, nil); r.code != http.StatusNotFound {
		t.Fatalf("second delete: %d %s", r.code, r.body)
	}
}
