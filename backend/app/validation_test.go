package app

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// Bad input stops at the door with a 4xx naming the field: no record is
// stored, no container or volume is made.
func TestBadInputStopsAtTheDoor(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	mount := func(path string) map[string]any {
		return map[string]any{"volumeMounts": []any{map[string]any{"name": "v", "path": path}}}
	}
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		hdr    []string
		code   int
		loc    []any  // the envelope's errors[0].loc, when set
		detail string // a substring of the detail
	}{
		{"NUL in an env value", "POST", "/sandboxes", map[string]any{"envVars": map[string]string{"A": "x\x00y"}}, nil, 400, []any{"body", "envVars", "A"}, "NUL"},
		{"NUL in an env name", "POST", "/sandboxes", map[string]any{"envVars": map[string]string{"A\x00B": "x"}}, nil, 400, nil, "envVars"},
		{"oversized env value", "POST", "/sandboxes", map[string]any{"envVars": map[string]string{"A": strings.Repeat("x", 40<<10)}}, nil, 400, []any{"body", "envVars", "A"}, "at most"},
		{"oversized env name", "POST", "/sandboxes", map[string]any{"envVars": map[string]string{strings.Repeat("A", 300): "x"}}, nil, 400, nil, "at most"},
		{"NUL in an exec env value", "POST", "/sandboxes/" + id + "/exec", map[string]any{"cmd": []string{"true"}, "env": map[string]string{"A": "\x00"}}, nil, 400, []any{"body", "env", "A"}, "NUL"},
		{"mount onto /proc", "POST", "/sandboxes", mount("/proc"), nil, 400, []any{"body", "volumeMounts", "0", "path"}, "/proc"},
		{"mount under /sys", "POST", "/sandboxes", mount("/sys/fs/cgroup"), nil, 400, nil, "/sys"},
		{"mount onto /dev", "POST", "/sandboxes", mount("/dev/"), nil, 400, nil, "/dev"},
		{"mount onto /etc/resolv.conf", "POST", "/sandboxes", mount("/etc/resolv.conf"), nil, 400, nil, "engine"},
		{"mount through ..", "POST", "/sandboxes", mount("/data/../proc"), nil, 400, nil, "clean"},
		{"mount onto /", "POST", "/sandboxes", mount("//"), nil, 400, nil, "other than /"},
		{"null body", "POST", "/sandboxes", "null", nil, 400, []any{"body"}, "not null"},
		{"array body", "POST", "/sandboxes", "[]", nil, 400, []any{"body"}, "JSON object"},
		{"text body", "POST", "/sandboxes", `{}`, []string{"Content-Type", "text/plain"}, 415, nil, "application/json"},
		{"huge number", "POST", "/sandboxes", `{"timeout":1e30}`, nil, 400, []any{"body", "timeout"}, "out of range"},
		{"fractional count", "POST", "/sandboxes", `{"resources":{"cpuCount":1.5}}`, nil, 400, []any{"body", "resources", "cpuCount"}, "whole number"},
		{"string for a number", "POST", "/sandboxes", `{"timeout":"x"}`, nil, 400, []any{"body", "timeout"}, "a number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ta.req(c.method, c.path, c.body, append([]string{"X-Access-Token", tok}, c.hdr...)...)
			if r.code != c.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, c.code)
			}
			var env struct {
				Detail string `json:"detail"`
				Errors []struct {
					Loc []any `json:"loc"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(r.body, &env); err != nil || !strings.Contains(env.Detail, c.detail) {
				t.Fatalf("detail does not say %q: %s", c.detail, r.body)
			}
			if c.loc != nil && (len(env.Errors) == 0 || !slices.Equal(env.Errors[0].Loc, c.loc)) {
				t.Fatalf("loc: %s, want %v", r.body, c.loc)
			}
			for _, e := range env.Errors {
				if len(e.Loc) > 1 && e.Loc[0] == "body" && e.Loc[1] == "body" {
					t.Fatalf("duplicated loc: %s", r.body)
				}
			}
		})
	}
	all := ta.req("GET", "/sandboxes?state=starting,running,paused,deleted,failed,completed", nil)
	var listed []map[string]any
	if err := json.Unmarshal(all.body, &listed); err != nil || len(listed) != 1 {
		t.Fatalf("bad input stored records: %s", all.body)
	}
	// A missing Content-Type and JSON types stay accepted.
	for _, ct := range []string{"", "application/json; charset=utf-8", "application/merge-patch+json"} {
		if r := ta.req("POST", "/sandboxes/"+id+"/timeout", map[string]any{"timeout": 120}, "Content-Type", ct); r.code != http.StatusNoContent {
			t.Errorf("Content-Type %q: %d %s", ct, r.code, r.body)
		}
	}
}

// A create that fails at start removes all it made (its named volumes too),
// and its diagnostic shows no path of the engine's host.
func TestFailedCreateLeavesNothing(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, _ := ta.create(map[string]any{"command": []string{"/no/such/program"},
		"volumeMounts": []any{map[string]any{"name": "work", "path": "/work"}}})
	sb := ta.waitState(id, 60*time.Second, "failed")
	ta.waitGone(id, 10*time.Second)
	diag, _ := sb["diagnostic"].(string)
	if diag == "" || strings.Contains(diag, "/var/lib/") {
		t.Fatalf("diagnostic %q: want one without host paths", diag)
	}
	cli := dockertest.Client(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		vols, err := cli.VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", id))})
		if err != nil {
			t.Fatal(err)
		}
		if len(vols.Volumes) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed create left volume %s behind", vols.Volumes[0].Name)
		}
		time.Sleep(50 * time.Millisecond) // poll interval within the deadline
	}
}
