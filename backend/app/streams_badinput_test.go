package app

import (
	"encoding/json"
	"strings"
	"testing"
)

// Bad input on the §6 routes is a 4xx whose detail names the path or field
// at fault: never a 5xx, never a host path or a traceback.
func TestStreamRoutesBadInput(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	base := "/sandboxes/" + id
	do := ta.sandboxDo(t, base, tok)
	do("POST", "/exec", map[string]any{"cmd": []string{"sh", "-c", "ln -s /tmp/loop /tmp/loop && mkdir -p /tmp/adir"}}, 200)
	long := "/" + strings.Repeat("a", 5000)
	bigArg := strings.Repeat("x", 129<<10)
	for _, c := range []struct {
		name, method, path string
		body               any
		raw                string
		names              string // the detail must contain this
	}{
		{"long path", "GET", "/files?path=" + long, nil, "", "path"},
		{"long path write", "PUT", "/files?path=" + long, nil, "x", "path"},
		{"parent is a file", "PUT", "/files?path=/etc/hostname/x", nil, "x", "/etc/hostname"},
		{"parent is a file read", "GET", "/files?path=/etc/hostname/x", nil, "", "/etc/hostname"},
		{"symlink loop", "GET", "/files?path=/tmp/loop", nil, "", "/tmp/loop"},
		{"symlink loop list", "GET", "/fs?path=/tmp/loop/x", nil, "", "/tmp/loop"},
		{"put onto a mount point", "PUT", "/files?path=/etc/hostname", nil, "x", "/etc/hostname"},
		{"put onto a directory", "PUT", "/files?path=/tmp/adir", nil, "x", "/tmp/adir"},
		{"delete a device", "DELETE", "/files?path=/dev/null", nil, "", "/dev/null"},
		{"agent environ", "GET", "/files?path=/proc/self/environ", nil, "", "/proc/self/environ"},
		{"exec missing cwd", "POST", "/exec", map[string]any{"cmd": []string{"true"}, "cwd": "/nonexistent"}, "", "cwd"},
		{"process missing cwd", "POST", "/processes", map[string]any{"cmd": []string{"true"}, "cwd": "/nonexistent"}, "", "cwd"},
		{"argv over 128 KiB", "POST", "/processes", map[string]any{"cmd": []string{"echo", bigArg}}, "", "cmd"},
		{"exec argv over 128 KiB", "POST", "/exec", map[string]any{"cmd": []string{"echo", bigArg}}, "", "cmd"},
	} {
		body, ct := c.body, ""
		if c.raw != "" {
			body, ct = c.raw, "application/octet-stream"
		}
		r := ta.req(c.method, base+c.path, body, "X-Access-Token", tok, "Content-Type", ct)
		var e struct{ Detail string }
		_ = json.Unmarshal(r.body, &e)
		if r.code < 400 || r.code >= 500 || !strings.Contains(e.Detail, c.names) ||
			strings.Contains(e.Detail, "/var/lib/docker") || strings.Contains(e.Detail, "Traceback") {
			t.Errorf("%s: %s %s: %d %.300s; want a 4xx whose detail names %q", c.name, c.method, c.path[:min(len(c.path), 60)], r.code, r.body, c.names)
		}
	}
	// The sandbox still works after all of it.
	if r := do("POST", "/exec", map[string]any{"cmd": []string{"cat", "/dev/null"}}, 200).json(t); r["exitCode"] != 0.0 {
		t.Fatalf("after the bad inputs: %v", r)
	}
}
