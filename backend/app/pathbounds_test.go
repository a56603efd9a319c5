package app

import (
	"strings"
	"testing"
)

// A path past Linux's bounds (PATH_MAX, NAME_MAX) is a 400 naming the
// field on every file route, archive routes (which go through the engine,
// not the agent) included, and a path within them still works.
func TestOverLongPathsAreRefusedAlikeOnEveryRoute(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	base := "/sandboxes/" + id
	long := "/tmp/" + strings.Repeat("d/", 2500)       // 5,005 bytes
	longName := "/tmp/" + strings.Repeat("n", 300)     // one name of 300 bytes
	fine := "/tmp/" + strings.Repeat("d/", 100) + "ok" // within both
	for _, p := range []string{long, longName} {
		for _, c := range []struct {
			method, route string
			body          any
			field         string
		}{
			{"GET", "/archive?path=" + p, nil, "path"},
			{"PUT", "/archive?path=" + p, "", "path"},
			{"GET", "/files?path=" + p, nil, "path"},
			{"PUT", "/files?path=" + p, "x", "path"},
			{"GET", "/fs?path=" + p, nil, "path"},
			{"DELETE", "/files?path=" + p, nil, "path"},
			{"POST", "/fs/mkdir", map[string]any{"path": p}, "path"},
			{"POST", "/fs/move", map[string]any{"from": "/tmp", "to": p}, "to"},
		} {
			r := ta.req(c.method, base+c.route, c.body, "X-Access-Token", tok)
			m := r.json(t)
			if r.code != 400 || m["type"] != "validation_error" || !strings.HasPrefix(m["detail"].(string), c.field+": ") {
				t.Errorf("%s %s (%d bytes): %d %s, want a 400 naming %s", c.method, strings.SplitN(c.route, "?", 2)[0], len(p), r.code, r.body, c.field)
			}
		}
	}
	if r := ta.req("POST", base+"/fs/mkdir", map[string]any{"path": fine}, "X-Access-Token", tok); r.code >= 300 {
		t.Fatalf("mkdir of a %d-byte path: %d %s", len(fine), r.code, r.body)
	}
	if r := ta.req("GET", base+"/archive?path="+fine, nil, "X-Access-Token", tok); r.code != 200 {
		t.Errorf("archive of a %d-byte path: %d %s", len(fine), r.code, r.body)
	}
}
