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

// Field names are case-sensitive on every write route: a key that names a
// field only case-insensitively ({"timeoutMS": 1} for timeoutMs,
// {"MAX_RUNNING": 3} for max_running) is refused with a 400 naming the key
// (encoding/json alone would take it), and nothing is changed.
func TestMisCasedFieldsAreRefused(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, withAdmin)
	id, tok := ta.create(map[string]any{"waitReady": true})
	rt := ta.req("POST", "/api/v1/org/org1/ws/default/runtimes", map[string]any{"name": "cased"})
	if rt.code != http.StatusCreated {
		t.Fatalf("create runtime: %d %s", rt.code, rt.body)
	}
	rtID, _ := rt.json(t)["id"].(string)
	sb := "/sandboxes/" + id
	cases := []struct {
		name, method, path, key string
		body                    string
		loc                     []any
		want                    string // the exact name the detail suggests
	}{
		{"create", "POST", "/sandboxes", "", `{"TemplateID": "base"}`, []any{"body", "TemplateID"}, "templateID"},
		{"create nested", "POST", "/sandboxes", "", `{"resources": {"CPUCount": 1}}`, []any{"body", "resources", "CPUCount"}, "cpuCount"},
		{"create in a list", "POST", "/sandboxes", "", `{"volumeMounts": [{"name": "v", "PATH": "/data"}]}`, []any{"body", "volumeMounts", "0", "PATH"}, "path"},
		{"exec", "POST", sb + "/exec", "", `{"cmd": ["true"], "timeoutMS": 1}`, []any{"body", "timeoutMS"}, "timeoutMs"},
		{"timeout", "POST", sb + "/timeout", "", `{"Timeout": 60}`, []any{"body", "Timeout"}, "timeout"},
		{"refresh", "POST", sb + "/refreshes", "", `{"DURATION": 10}`, []any{"body", "DURATION"}, "duration"},
		{"process start", "POST", sb + "/processes", "", `{"Cmd": ["true"]}`, []any{"body", "Cmd"}, "cmd"},
		{"mkdir", "POST", sb + "/fs/mkdir", "", `{"Path": "/tmp/x"}`, []any{"body", "Path"}, "path"},
		{"move", "POST", sb + "/fs/move", "", `{"from": "/tmp/a", "TO": "/tmp/b"}`, []any{"body", "TO"}, "to"},
		{"quotas", "PUT", "/admin/orgs/org1/quotas", testAdminKey, `{"MAX_RUNNING": 3}`, []any{"body", "MAX_RUNNING"}, "max_running"},
		{"org create", "POST", "/admin/orgs", testAdminKey, `{"Org": "cased"}`, []any{"body", "Org"}, "org"},
		{"credits grant", "POST", "/admin/orgs/org1/credits", testAdminKey, `{"Amount": 5}`, []any{"body", "Amount"}, "amount"},
		{"key create", "POST", "/api/v1/org/org1/keys", "", `{"NAME": "ci"}`, []any{"body", "NAME"}, "name"},
		{"runtime create", "POST", "/api/v1/org/org1/ws/default/runtimes", "", `{"Name": "other"}`, []any{"body", "Name"}, "name"},
		{"runtime keepalive", "POST", "/api/v1/org/org1/ws/default/runtimes/" + rtID + "/keepalive", "", `{"extend_Seconds": 60}`, []any{"body", "extend_Seconds"}, "extend_seconds"},
		{"environment create", "POST", "/api/v1/org/org1/ws/default/environments", "", `{"Task_Ref": "x"}`, []any{"body", "Task_Ref"}, "task_ref"},
		{"webhook create", "POST", "/events/webhooks", "", `{"URL": "http://127.0.0.1:1/hook"}`, []any{"body", "URL"}, "url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := c.key
			if key == "" {
				key = ta.key
			}
			r := ta.reqKey(key, c.method, c.path, c.body, "X-Access-Token", tok)
			if r.code != http.StatusBadRequest {
				t.Fatalf("got %d %s, want 400", r.code, r.body)
			}
			var env struct {
				Type   string `json:"type"`
				Detail string `json:"detail"`
				Errors []struct {
					Loc []any `json:"loc"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(r.body, &env); err != nil {
				t.Fatal(err)
			}
			name := c.loc[len(c.loc)-1].(string)
			if env.Type != "unknown_field" || !strings.Contains(env.Detail, name) || !strings.Contains(env.Detail, `"`+c.want+`"`) {
				t.Fatalf("the answer does not name %s (and suggest %s): %s", name, c.want, r.body)
			}
			if len(env.Errors) != 1 || !slices.Equal(env.Errors[0].Loc, c.loc) {
				t.Fatalf("loc: %s, want %v", r.body, c.loc)
			}
		})
	}
	// Nothing was changed by the refused writes.
	if r := ta.reqKey(testAdminKey, "GET", "/admin/orgs/org1/quotas", nil); r.code != 200 || strings.Contains(string(r.body), `"max_running":3`) {
		t.Fatalf("quotas after a refused PUT: %d %s", r.code, r.body)
	}
	// The exact spelling is still accepted.
	if r := ta.req("POST", sb+"/exec", map[string]any{"cmd": []string{"true"}, "timeoutMs": 5000}, "X-Access-Token", tok); r.code != 200 {
		t.Fatalf("exec with timeoutMs: %d %s", r.code, r.body)
	}
}

// A bad query parameter or path variable is reported where it was sent:
// loc ["query", name] or ["path", name], never ["body", ...] (the error
// envelope of API.md's conventions).
func TestQueryAndPathErrorsPointThere(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	sb := "/sandboxes/" + id
	cases := []struct {
		method, path string
		loc          []any
	}{
		{"GET", "/sandboxes?limit=0", []any{"query", "limit"}},
		{"GET", "/sandboxes?nextToken=x", []any{"query", "nextToken"}},
		{"GET", "/sandboxes?state=bogus", []any{"query", "state"}},
		{"GET", "/sandboxes?metadata=novalue", []any{"query", "metadata"}},
		{"GET", sb + "/files?path=relative", []any{"query", "path"}},
		{"GET", sb + "/fs?path=/tmp&depth=0", []any{"query", "depth"}},
		{"GET", sb + "/processes/abc/output", []any{"path", "pid"}},
		{"GET", sb + "/processes/1/output?follow=maybe", []any{"query", "follow"}},
		{"POST", sb + "/processes/1/stdin?eof=maybe", []any{"query", "eof"}},
		{"GET", "/api/v1/org/org1/sandboxes?limit=x", []any{"query", "limit"}},
		{"GET", "/api/v1/org/org1/sandboxes?bogus=1", []any{"query", "bogus"}},
		{"GET", "/api/v1/org/org1/ws/default/environments?page=0", []any{"query", "page"}},
		{"GET", "/api/v1/org/org1/ws/default/runtimes?cursor=zz", []any{"query", "cursor"}},
		{"GET", "/events?since=yesterday", []any{"query", "since"}},
		{"GET", "/events?order=up", []any{"query", "order"}},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := ta.req(c.method, c.path, nil, "X-Access-Token", tok)
			if r.code != http.StatusBadRequest {
				t.Fatalf("got %d %s, want 400", r.code, r.body)
			}
			var env struct {
				Detail string `json:"detail"`
				Errors []struct {
					Loc []any `json:"loc"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(r.body, &env); err != nil || len(env.Errors) != 1 || !slices.Equal(env.Errors[0].Loc, c.loc) {
				t.Fatalf("loc: %s, want %v", r.body, c.loc)
			}
			if !strings.HasPrefix(env.Detail, c.loc[1].(string)+": ") {
				t.Fatalf("detail does not start with the parameter's name: %s", r.body)
			}
		})
	}
}
