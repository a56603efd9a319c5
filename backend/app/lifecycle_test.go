package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

func TestLifecycleFullCycle(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	r := ta.req("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 120, "metadata": map[string]string{"purpose": "full"},
		"envVars": map[string]string{"FOO": "bar"}, "resources": map[string]any{"cpuCount": 1, "memoryMB": 256}})
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	sb := r.json(t)
	id, tok := sb["sandboxID"].(string), sb["accessToken"].(string)
	if sb["state"] != "running" || sb["memoryMB"] != float64(256) || sb["templateID"] != "base" {
		t.Fatalf("waitReady create should answer running with the requested resources: %s", r.body)
	}
	phases := timeline(sb)
	if strings.Join(phases, ",") != "pending,creating,running" {
		t.Fatalf("timeline: %v", phases)
	}
	cs := ta.containersOf(id)
	if len(cs) != 1 || cs[0].Labels[compute.LabelOrg] == "" || cs[0].Labels[compute.LabelRecord] != id {
		t.Fatalf("one labelled container expected, got %+v", cs)
	}
	for _, p := range cs[0].Ports {
		if p.PublicPort != 0 && p.IP != "127.0.0.1" {
			t.Fatalf("port published beyond loopback: %+v", p)
		}
	}

	// GET never shows the token; list filters by state and metadata.
	if g := ta.req("GET", "/sandboxes/"+id, nil); strings.Contains(string(g.body), tok) || g.json(t)["accessToken"] != nil {
		t.Fatalf("GET leaked the access token")
	}
	if l := ta.req("GET", "/sandboxes?state=running&metadata=purpose=full", nil); !strings.Contains(string(l.body), id) {
		t.Fatalf("list by state+metadata misses the sandbox: %s", l.body)
	}
	if l := ta.req("GET", "/sandboxes?metadata=purpose=other", nil); strings.Contains(string(l.body), id) {
		t.Fatalf("metadata filter ignored: %s", l.body)
	}

	// exec with env vars, files round trip.
	e := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"sh", "-c", "echo $FOO; echo oops >&2; exit 4"}}, "X-Access-Token", tok)
	if e.code != 200 || e.json(t)["stdout"] != "bar\n" || e.json(t)["stderr"] != "oops\n" || e.json(t)["exitCode"] != float64(4) {
		t.Fatalf("exec: %d %s", e.code, e.body)
	}
	if w := ta.req("PUT", "/sandboxes/"+id+"/files?path=/tmp/hello.txt", "hi there", "X-Access-Token", tok); w.code != 204 {
		t.Fatalf("write file: %d %s", w.code, w.body)
	}
	if f := ta.req("GET", "/sandboxes/"+id+"/files?path=/tmp/hello.txt", nil, "X-Access-Token", tok); f.code != 200 || string(f.body) != "hi there" {
		t.Fatalf("read file: %d %s", f.code, f.body)
	}
	if f := ta.req("GET", "/sandboxes/"+id+"/files?path=/nope", nil, "X-Access-Token", tok); f.code != 404 {
		t.Fatalf("missing file: %d %s", f.code, f.body)
	}
	if m := ta.req("GET", "/sandboxes/"+id+"/metrics", nil); m.code != 200 {
		t.Fatalf("metrics: %d %s; containers %+v; record %s", m.code, m.body, ta.containersOf(id), ta.req("GET", "/sandboxes/"+id, nil).body)
	}

	// timeout sets, refreshes extends.
	before := ta.req("GET", "/sandboxes/"+id, nil).json(t)["endAt"].(string)
	if x := ta.req("POST", "/sandboxes/"+id+"/timeout", map[string]any{"timeout": 3600}); x.code != 204 {
		t.Fatalf("timeout: %d %s", x.code, x.body)
	}
	after := ta.req("GET", "/sandboxes/"+id, nil).json(t)["endAt"].(string)
	if after <= before {
		t.Fatalf("timeout did not move endAt: %s -> %s", before, after)
	}
	if x := ta.req("POST", "/sandboxes/"+id+"/refreshes", map[string]any{"duration": 60}); x.code != 204 {
		t.Fatalf("refreshes: %d %s", x.code, x.body)
	}
	if got := ta.req("GET", "/sandboxes/"+id, nil).json(t)["endAt"].(string); got != after {
		t.Fatalf("refresh shorter than the TTL must not shorten it: %s -> %s", after, got)
	}

	// pause: exec refused, container really paused; second pause 409.
	if p := ta.req("POST", "/sandboxes/"+id+"/pause", nil); p.code != 204 {
		t.Fatalf("pause: %d %s", p.code, p.body)
	}
	if st := ta.containersOf(id)[0].State; st != "paused" {
		t.Fatalf("container state %q after pause", st)
	}
	if p := ta.req("POST", "/sandboxes/"+id+"/pause", nil); p.code != 409 {
		t.Fatalf("second pause: %d %s", p.code, p.body)
	}
	if e := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"true"}}, "X-Access-Token", tok); e.code != 409 {
		t.Fatalf("exec while paused: %d %s", e.code, e.body)
	}

	// connect resumes (201), rotates the token.
	c := ta.req("POST", "/sandboxes/"+id+"/connect", map[string]any{"timeout": 120})
	if c.code != 201 || c.json(t)["state"] != "running" {
		t.Fatalf("connect: %d %s", c.code, c.body)
	}
	tok2 := c.json(t)["accessToken"].(string)
	if e := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"true"}}, "X-Access-Token", tok); e.code != 403 {
		t.Fatalf("old token after connect: %d %s", e.code, e.body)
	}
	if e := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"true"}}, "X-Access-Token", tok2); e.code != 200 {
		t.Fatalf("new token: %d %s", e.code, e.body)
	}
	if c := ta.req("POST", "/sandboxes/"+id+"/connect", nil); c.code != 200 {
		t.Fatalf("connect to a running sandbox: %d %s", c.code, c.body)
	}

	// delete: 204, container gone, idempotent, record kept as deleted.
	if d := ta.req("DELETE", "/sandboxes/"+id, nil); d.code != 204 {
		t.Fatalf("delete: %d %s", d.code, d.body)
	}
	ta.waitGone(id, 10*time.Second)
	if d := ta.req("DELETE", "/sandboxes/"+id, nil); d.code != 204 {
		t.Fatalf("second delete: %d %s", d.code, d.body)
	}
	final := ta.req("GET", "/sandboxes/"+id, nil).json(t)
	if final["state"] != "deleted" {
		t.Fatalf("state after delete: %v", final["state"])
	}
	want := "pending,creating,running,pausing,paused,resuming,running,stopping,deleted"
	if got := strings.Join(timeline(final), ","); got != want {
		t.Fatalf("timeline %s, want %s", got, want)
	}
	if c := ta.req("POST", "/sandboxes/"+id+"/connect", nil); c.code != 409 {
		t.Fatalf("connect to a deleted sandbox: %d %s", c.code, c.body)
	}
	if d := ta.req("DELETE", "/sandboxes/doesnotexist", nil); d.code != 404 {
		t.Fatalf("delete unknown: %d %s", d.code, d.body)
	}
}

func timeline(sb map[string]any) []string {
	var out []string
	for _, e := range sb["timeline"].([]any) {
		out = append(out, e.(map[string]any)["phase"].(string))
	}
	return out
}

func TestTTLExpiryDeletesAndAutoPausePauses(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	plain, _ := ta.create(map[string]any{"timeout": 1})
	auto, _ := ta.create(map[string]any{"timeout": 1, "autoPause": true})
	ta.waitState(plain, 20*time.Second, "deleted")
	ta.waitGone(plain, 10*time.Second)
	ta.waitState(auto, 20*time.Second, "paused")
	if cs := ta.containersOf(auto); len(cs) != 1 || cs[0].State != "paused" {
		t.Fatalf("auto-paused sandbox should keep a paused container: %+v", cs)
	}
	// A paused auto-pause sandbox keeps no TTL; connect without a timeout
	// gives it its original one again, so it pauses again at expiry.
	if end := ta.req("GET", "/sandboxes/"+auto, nil).json(t)["endAt"]; end != nil {
		t.Fatalf("an auto-paused sandbox keeps endAt %v", end)
	}
	c := ta.req("POST", "/sandboxes/"+auto+"/connect", nil)
	if c.code != 201 || c.json(t)["endAt"] == nil {
		t.Fatalf("connect: %d %s", c.code, c.body)
	}
	ta.waitState(auto, 20*time.Second, "paused")
}

func TestMainProcessExitCompletesOrFails(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	ok, _ := ta.create(map[string]any{"command": []string{"sh", "-c", "echo done"}})
	bad, _ := ta.create(map[string]any{"command": []string{"sh", "-c", "echo failing >&2; exit 7"}})
	okSb := ta.waitState(ok, 30*time.Second, "completed")
	badSb := ta.waitState(bad, 30*time.Second, "failed")
	if okSb["exitCode"] != float64(0) {
		t.Fatalf("completed sandbox exit code: %v", okSb["exitCode"])
	}
	if d, _ := badSb["diagnostic"].(string); !strings.Contains(d, "code 7") {
		t.Fatalf("diagnostic should name the exit code: %q", d)
	}
	ta.waitGone(ok, 10*time.Second)
	ta.waitGone(bad, 10*time.Second)
	// The output outlives the container.
	if l := ta.req("GET", "/sandboxes/"+bad+"/logs", nil); !strings.Contains(string(l.body), "failing") {
		t.Fatalf("logs after failure: %s", l.body)
	}
}

func TestFailureDiagnostics(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	// 2 cores here: 16 CPUs is refused by the engine.
	big, _ := ta.create(map[string]any{"resources": map[string]any{"cpuCount": 16}})
	sb := ta.waitState(big, 30*time.Second, "failed")
	if d, _ := sb["diagnostic"].(string); !strings.HasPrefix(d, "resource limit") {
		t.Fatalf("diagnostic for too many CPUs: %q", d)
	}
	badCmd, _ := ta.create(map[string]any{"command": []string{"/no/such/program"}})
	sb = ta.waitState(badCmd, 30*time.Second, "failed")
	if d, _ := sb["diagnostic"].(string); !strings.HasPrefix(d, "entrypoint error") {
		t.Fatalf("diagnostic for a missing entrypoint: %q", d)
	}
	// allowOut is enforced on Docker now; it is unenforceable with the rules
	// turned off (DREADNODE_EGRESS=off).
	unfiltered := newTestApp(t, func(c *Config) { c.DockerEgress.Off = true })
	egress, _ := unfiltered.create(map[string]any{"network": map[string]any{"allowOut": []string{"10.0.0.0/8"}}})
	sb = unfiltered.waitState(egress, 30*time.Second, "failed")
	if d, _ := sb["diagnostic"].(string); !strings.HasPrefix(d, "network policy") {
		t.Fatalf("diagnostic for unenforceable egress rules: %q", d)
	}
	ta.waitGone(big, 10*time.Second)
	ta.waitGone(badCmd, 10*time.Second)

	missing := newTestApp(t, func(c *Config) { c.DockerImage = "dreadnode/no-such-image:latest" })
	id, _ := missing.create(map[string]any{})
	sb = missing.waitState(id, 30*time.Second, "failed")
	if d, _ := sb["diagnostic"].(string); !strings.HasPrefix(d, "image missing") {
		t.Fatalf("diagnostic for a missing image: %q", d)
	}
}

// A delete racing pause or connect always ends deleted, with no container:
// the delete is never undone.
func TestDeleteRacesConnectAndPause(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	const n = 6
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, _ := ta.create(map[string]any{"waitReady": true})
			if i%2 == 1 { // half of them race from paused
				ta.req("POST", "/sandboxes/"+id+"/pause", nil)
			}
			var race sync.WaitGroup
			codes := make([]int, 3)
			for j, op := range []string{"DELETE /sandboxes/" + id, "POST /sandboxes/" + id + "/pause", "POST /sandboxes/" + id + "/connect"} {
				race.Add(1)
				go func() {
					defer race.Done()
					m, p, _ := strings.Cut(op, " ")
					codes[j] = ta.req(m, p, nil).code
				}()
			}
			race.Wait()
			for _, c := range codes {
				if c >= 500 {
					t.Errorf("racing operation answered %d", c)
				}
			}
			ta.waitState(id, 20*time.Second, "deleted")
			ta.waitGone(id, 10*time.Second)
			if c := ta.req("POST", "/sandboxes/"+id+"/connect", nil); c.code != 409 && c.code != 404 {
				t.Errorf("resume of a deleted sandbox: %d", c.code)
			}
			if st := ta.req("GET", "/sandboxes/"+id, nil).json(t)["state"]; st != "deleted" {
				t.Errorf("a delete was undone: state %v", st)
			}
		}()
	}
	wg.Wait()
}

func TestCrossOrgIsolation(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	o2, _, err := ta.app.DB.EnsureOrg(t.Context(), "org2", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := ta.app.DB.EnsureAPIKey(t.Context(), o2.ID, "key-org2"); err != nil {
		t.Fatal(err)
	}
	id, tok := ta.create(map[string]any{"waitReady": true})
	for _, rt := range []struct{ m, p string }{
		{"GET", ""}, {"DELETE", ""}, {"POST", "/connect"}, {"POST", "/pause"}, {"POST", "/refreshes"}, {"POST", "/timeout"},
		{"GET", "/logs"}, {"GET", "/metrics"}, {"POST", "/exec"}, {"GET", "/files?path=/etc/hostname"}, {"PUT", "/files?path=/tmp/x"},
	} {
		body := map[string]any{}
		if rt.p == "/timeout" {
			body["timeout"] = 100
		}
		if rt.p == "/exec" {
			body["cmd"] = []string{"true"}
		}
		r := ta.reqKey("key-org2", rt.m, "/sandboxes/"+id+rt.p, body, "X-Access-Token", tok)
		if r.code != 404 {
			t.Errorf("%s %s from another org: %d %s", rt.m, rt.p, r.code, r.body)
		}
	}
	if l := ta.reqKey("key-org2", "GET", "/sandboxes", nil); strings.Contains(string(l.body), id) {
		t.Errorf("another org lists the sandbox")
	}
	if r := ta.reqKey("", "GET", "/sandboxes", nil); r.code != 401 {
		t.Errorf("no key: %d", r.code)
	}
	if r := ta.reqKey("wrong", "GET", "/sandboxes", nil); r.code != 401 {
		t.Errorf("wrong key: %d", r.code)
	}
	if st := ta.req("GET", "/sandboxes/"+id, nil).json(t)["state"]; st != "running" {
		t.Errorf("the other org's calls changed the sandbox: %v", st)
	}
}

func TestBadInputNeverServerError(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	cases := []struct {
		m, p  string
		body  any
		code  int
		field string
	}{
		{"POST", "/sandboxes", `{"timeout": 5`, 400, ""},
		{"POST", "/sandboxes", `[1,2]`, 400, ""},
		{"POST", "/sandboxes", map[string]any{"timeout": 100000}, 400, "timeout"},
		{"POST", "/sandboxes", map[string]any{"timeout": 0}, 400, "timeout"},
		{"POST", "/sandboxes", map[string]any{"timeout": "long"}, 400, "timeout"},
		{"POST", "/sandboxes", map[string]any{"timeoutMs": 1000}, 400, "timeoutMs"},
		{"POST", "/sandboxes", map[string]any{"secure": true}, 400, "secure"},
		{"POST", "/sandboxes", map[string]any{"mcp": map[string]any{}}, 400, "mcp"},
		{"POST", "/sandboxes", map[string]any{"volume_mounts": []any{}}, 400, "volumeMounts"},
		{"POST", "/sandboxes", map[string]any{"colour": "red"}, 400, "colour"},
		{"POST", "/sandboxes", map[string]any{"resources": map[string]any{"gpu": 1}}, 400, "gpu"},
		{"POST", "/sandboxes", map[string]any{"resources": map[string]any{"cpuCount": 0}}, 400, "resources.cpuCount"},
		{"POST", "/sandboxes", map[string]any{"resources": map[string]any{"memoryMB": 1}}, 400, "resources.memoryMB"},
		{"POST", "/sandboxes", map[string]any{"templateID": "nope"}, 400, "templateID"},
		{"POST", "/sandboxes", map[string]any{"templateID": "../x"}, 400, "templateID"},
		{"POST", "/sandboxes", map[string]any{"envVars": map[string]string{"1BAD": "x"}}, 400, "envVars"},
		{"POST", "/sandboxes", map[string]any{"network": map[string]any{"allowOut": []string{"not a host!"}}}, 400, "network.allowOut"},
		{"POST", "/sandboxes", map[string]any{"volumeMounts": []any{map[string]any{"name": "v", "path": "rel"}}}, 400, "volumeMounts.0.path"},
		{"POST", "/sandboxes", strings.Repeat(" ", 2<<20), 413, ""},
		{"GET", "/sandboxes?state=bogus", nil, 400, "state"},
		{"GET", "/sandboxes?limit=0", nil, 400, "limit"},
		{"GET", "/sandboxes?nextToken=x", nil, 400, "nextToken"},
		{"GET", "/sandboxes?metadata=novalue", nil, 400, "metadata"},
		{"POST", "/sandboxes/" + id + "/timeout", map[string]any{}, 400, "timeout"},
		{"POST", "/sandboxes/" + id + "/timeout", map[string]any{"timeout": -1}, 400, "timeout"},
		{"POST", "/sandboxes/" + id + "/refreshes", map[string]any{"duration": 99999}, 400, "duration"},
		{"POST", "/sandboxes/" + id + "/connect", map[string]any{"timeout": "x"}, 400, "timeout"},
		{"POST", "/sandboxes/" + id + "/pause", `{"x":1}`, 400, "x"}, // pause takes {"memory"} only
		{"POST", "/sandboxes/" + id + "/pause", `{"memory":"no"}`, 400, "memory"},
		{"POST", "/sandboxes/" + id + "/exec", map[string]any{}, 400, "cmd"},
		{"POST", "/sandboxes/" + id + "/exec", map[string]any{"cmd": []string{"true"}, "timeoutMs": 0}, 400, "timeoutMs"},
		{"POST", "/sandboxes/" + id + "/exec", map[string]any{"cmd": []string{"true"}, "cwd": "rel"}, 400, "cwd"},
		{"GET", "/sandboxes/" + id + "/files", nil, 400, "path"},
		{"GET", "/sandboxes/" + id + "/files?path=relative", nil, 400, "path"},
		{"PATCH", "/sandboxes/" + id, nil, 405, ""},
		{"GET", "/nowhere", nil, 404, ""},
	}
	for _, c := range cases {
		r := ta.req(c.m, c.p, c.body, "X-Access-Token", tok)
		if r.code >= 500 || (c.code != 0 && r.code != c.code) {
			t.Errorf("%s %s %v: got %d %s, want %d", c.m, c.p, c.body, r.code, r.body, c.code)
			continue
		}
		if c.field != "" && !strings.Contains(string(r.body), c.field) {
			t.Errorf("%s %s: the error does not name %q: %s", c.m, c.p, c.field, r.body)
		}
		if r.code >= 400 {
			m := r.json(t)
			if m["code"] != float64(r.code) || m["detail"] == "" || m["type"] == nil {
				t.Errorf("%s %s: not the error envelope: %s", c.m, c.p, r.body)
			}
		}
	}
	// Nothing stored was lost: the sandbox still answers.
	if e := ta.req("POST", "/sandboxes/"+id+"/connect", nil); e.code != 200 && e.code != 201 {
		t.Fatalf("sandbox lost after bad input: %d %s", e.code, e.body)
	}
}

// A create retried with the same Idempotency-Key returns the first sandbox
// (without showing its secret again) instead of making a second one.
func TestCreateIdempotencyKey(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	first := ta.req("POST", "/sandboxes", map[string]any{"timeout": 120}, "Idempotency-Key", "retry-1")
	again := ta.req("POST", "/sandboxes", map[string]any{"timeout": 120}, "Idempotency-Key", "retry-1")
	other := ta.req("POST", "/sandboxes", map[string]any{"timeout": 120}, "Idempotency-Key", "retry-2")
	if first.code != 201 || again.code != 200 || other.code != 201 {
		t.Fatalf("codes: first %d, replay %d, other key %d", first.code, again.code, other.code)
	}
	id := first.json(t)["sandboxID"]
	if again.json(t)["sandboxID"] != id || other.json(t)["sandboxID"] == id {
		t.Fatalf("replay must return the first sandbox and only it")
	}
	if again.json(t)["accessToken"] != nil {
		t.Fatalf("a replay must not show the access token again")
	}
	var list []map[string]any
	if err := json.Unmarshal(ta.req("GET", "/sandboxes?state=starting,running", nil).body, &list); err != nil || len(list) != 2 {
		t.Fatalf("want exactly 2 sandboxes, got %d (%v)", len(list), err)
	}
}

func TestPrometheusMetrics(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, withAdmin)
	ta.create(map[string]any{"waitReady": true})
	m := ta.reqKey(testAdminKey, "GET", "/metrics", nil)
	for _, want := range []string{`dreadnode_sandbox_records{kind="runtime",phase="running"} 1`,
		`dreadnode_sandbox_transitions_total{phase="running"}`, `dreadnode_http_requests_total{code="201",method="POST",route="/sandboxes"} 1`} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Pause racing connect: whichever wins, the record says what the container
// really is, and exec works exactly when the record says running.
func TestPauseRacesConnect(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, _ := ta.create(map[string]any{"waitReady": true})
	for range 4 {
		var wg sync.WaitGroup
		var tok string
		wg.Add(2)
		go func() { defer wg.Done(); ta.req("POST", "/sandboxes/"+id+"/pause", nil) }()
		go func() {
			defer wg.Done()
			if c := ta.req("POST", "/sandboxes/"+id+"/connect", nil); c.code == 200 || c.code == 201 {
				tok, _ = c.json(t)["accessToken"].(string)
			} else if c.code >= 500 {
				t.Errorf("connect answered %d %s", c.code, c.body)
			}
		}()
		wg.Wait()
		// The engine may briefly report a stale paused flag after a quick
		// pause/unpause pair; the reconciler converges it to the record.
		var sb map[string]any
		deadline := time.Now().Add(15 * time.Second)
		for {
			sb = ta.waitState(id, 20*time.Second, "running", "paused")
			cs := ta.containersOf(id)
			if len(cs) == 1 && cs[0].State == sb["state"] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("record says %v, container says %+v", sb["state"], cs)
			}
			time.Sleep(50 * time.Millisecond) // poll interval within the deadline
		}
		if sb["state"] == "running" && tok != "" {
			if e := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"true"}}, "X-Access-Token", tok); e.code != 200 {
				t.Fatalf("exec on a running sandbox: %d %s", e.code, e.body)
			}
		}
		if sb["state"] == "paused" {
			ta.req("POST", "/sandboxes/"+id+"/connect", nil)
		}
	}
}
