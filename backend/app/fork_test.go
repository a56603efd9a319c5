package app

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// forkResults decodes a fork's answer: one entry per fork.
func forkResults(t *testing.T, r resp) []map[string]any {
	t.Helper()
	if r.code != http.StatusCreated {
		t.Fatalf("fork: %d %s", r.code, r.body)
	}
	var out []map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("fork answer: %v: %s", err, r.body)
	}
	return out
}

// imagesLabelled lists the local images carrying label=value.
func imagesLabelled(t *testing.T, label, value string) []image.Summary {
	t.Helper()
	imgs, err := dockertest.Client(t).ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", label+"="+value))})
	if err != nil {
		t.Fatal(err)
	}
	return imgs
}

// waitNoImages waits until no image carries label=value.
func waitNoImages(t *testing.T, label, value string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(imagesLabelled(t, label, value)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("images labelled %s=%s are still there after %s", label, value, within)
		}
		time.Sleep(200 * time.Millisecond) // poll interval within the deadline
	}
}

func execOut(t *testing.T, ta *testApp, id, tok string, cmd ...string) (int, string) {
	t.Helper()
	r := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": cmd}, "X-Access-Token", tok)
	if r.code != http.StatusOK {
		t.Fatalf("exec %v in %s: %d %s", cmd, id, r.code, r.body)
	}
	m := r.json(t)
	return int(m["exitCode"].(float64)), m["stdout"].(string)
}

// onlyFirstForkHas writes path in the first fork and checks that neither
// the parent nor any other fork sees it (run runs argv in an id with its token).
func onlyFirstForkHas(t *testing.T, path, parent, ptok string, ids, toks []string, run func(id, tok string, argv ...string) (int, string)) {
	t.Helper()
	if code, _ := run(ids[0], toks[0], "sh", "-c", "echo mine > "+path); code != 0 {
		t.Fatal("writing in a fork failed")
	}
	for i, id := range append([]string{parent}, ids[1:]...) {
		tok := ptok
		if i > 0 {
			tok = toks[i]
		}
		if code, _ := run(id, tok, "test", "-e", path); code == 0 {
			t.Fatalf("%s sees a file written in fork %s", id, ids[0])
		}
	}
}

// A fork has the parent's files as they were, each fork's later files are
// its own, the parent runs on, every fork is a record naming the parent,
// another org can neither fork the parent nor read a fork, and the
// checkpoint's image goes with the last fork.
func TestSandboxForkFilesystem(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, withAdmin)
	parent, ptok := ta.create(map[string]any{"waitReady": true, "envVars": map[string]string{"WHO": "parent"}, "metadata": map[string]string{"team": "red"}})
	if code, _ := execOut(t, ta, parent, ptok, "sh", "-c", "echo before-fork > /root/before"); code != 0 {
		t.Fatal("writing in the parent failed")
	}
	forks := forkResults(t, ta.req("POST", "/sandboxes/"+parent+"/fork", map[string]any{"count": 3, "waitReady": true}))
	if len(forks) != 3 {
		t.Fatalf("want 3 forks, got %d", len(forks))
	}
	var ids, toks []string
	for _, f := range forks {
		sb, _ := f["sandbox"].(map[string]any)
		if sb == nil || f["error"] != nil {
			t.Fatalf("a fork failed: %v", f)
		}
		id := sb["sandboxID"].(string)
		if sb["state"] == "starting" {
			ta.waitState(id, 3*time.Minute, "running", "failed")
		}
		ids, toks = append(ids, id), append(toks, sb["accessToken"].(string))
	}
	for i, id := range ids {
		if st := ta.req("GET", "/sandboxes/"+id, nil).json(t)["state"]; st != "running" {
			t.Fatalf("fork %s is %v", id, st)
		}
		if _, out := execOut(t, ta, id, toks[i], "cat", "/root/before"); out != "before-fork\n" {
			t.Fatalf("fork %s: /root/before = %q", id, out)
		}
		if _, out := execOut(t, ta, id, toks[i], "sh", "-c", "echo $WHO"); out != "parent\n" {
			t.Fatalf("fork %s: WHO = %q, want the parent's env", id, out)
		}
		rec, err := ta.app.DB.GetRecord(context.Background(), id)
		if err != nil || rec.ParentID != parent || rec.Checkpoint == "" || rec.Metadata["team"] != "red" {
			t.Fatalf("fork %s's record: %+v %v", id, rec, err)
		}
	}
	onlyFirstForkHas(t, "/root/mine", parent, ptok, ids, toks, func(id, tok string, argv ...string) (int, string) { return execOut(t, ta, id, tok, argv...) })
	if st := ta.req("GET", "/sandboxes/"+parent, nil).json(t)["state"]; st != "running" {
		t.Fatalf("the parent is %v after the fork, want running", st)
	}

	// Another org: the parent and the forks are not there.
	if r := ta.reqKey(testAdminKey, http.MethodPost, "/admin/orgs", map[string]any{"org": "other", "credits": 100}); r.code != http.StatusCreated {
		t.Fatalf("POST /admin/orgs: %d %s", r.code, r.body)
	}
	_, other := adminKey(t, ta, "other", map[string]any{"name": "k"})
	if r := ta.reqKey(other, "POST", "/sandboxes/"+parent+"/fork", map[string]any{}); r.code != http.StatusNotFound {
		t.Fatalf("another org's fork: %d %s", r.code, r.body)
	}
	if r := ta.reqKey(other, "POST", "/e2b/sandboxes/"+parent+"/fork", map[string]any{}); r.code != http.StatusNotFound {
		t.Fatalf("another org's fork under /e2b: %d %s", r.code, r.body)
	}
	if r := ta.reqKey(other, "GET", "/sandboxes/"+ids[0], nil); r.code != http.StatusNotFound {
		t.Fatalf("another org reads a fork: %d %s", r.code, r.body)
	}
	rec, _ := ta.app.DB.GetRecord(context.Background(), ids[0])
	ckpt := imagesLabelled(t, lifecycle.LabelCheckpoint, rec.Checkpoint)
	if len(ckpt) != 1 || len(ckpt[0].RepoTags) != 1 {
		t.Fatalf("the checkpoint's images: %+v", ckpt)
	}
	if r := ta.reqKey(other, "POST", "/sandboxes", map[string]any{"templateID": ckpt[0].RepoTags[0]}); r.code != http.StatusBadRequest {
		t.Fatalf("another org starts the checkpoint's image: %d %s", r.code, r.body)
	}

	// The checkpoint's image stays while a fork lives, and goes with the last.
	for _, id := range ids[:2] {
		if r := ta.req("DELETE", "/sandboxes/"+id, nil); r.code != http.StatusNoContent {
			t.Fatalf("delete %s: %d %s", id, r.code, r.body)
		}
	}
	if len(imagesLabelled(t, lifecycle.LabelCheckpoint, rec.Checkpoint)) != 1 {
		t.Fatal("the checkpoint's image went while a fork still uses it")
	}
	if r := ta.req("DELETE", "/sandboxes/"+ids[2], nil); r.code != http.StatusNoContent {
		t.Fatalf("delete %s: %d %s", ids[2], r.code, r.body)
	}
	waitNoImages(t, lifecycle.LabelCheckpoint, rec.Checkpoint, 2*time.Minute)
}

// A paused parent is forked as it is and stays paused (natively; E2B's
// route refuses it, as E2B does).
func TestSandboxForkPausedParent(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	parent, ptok := ta.create(map[string]any{"waitReady": true})
	execOut(t, ta, parent, ptok, "sh", "-c", "echo paused > /root/state")
	if r := ta.req("POST", "/sandboxes/"+parent+"/pause", nil); r.code != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	if r := ta.req("POST", "/e2b/sandboxes/"+parent+"/fork", map[string]any{}); r.code != http.StatusConflict {
		t.Fatalf("E2B fork of a paused sandbox: %d %s", r.code, r.body)
	}
	forks := forkResults(t, ta.req("POST", "/sandboxes/"+parent+"/fork", map[string]any{"waitReady": true}))
	sb, _ := forks[0]["sandbox"].(map[string]any)
	if len(forks) != 1 || sb == nil {
		t.Fatalf("fork: %v", forks)
	}
	id := sb["sandboxID"].(string)
	ta.waitState(id, 3*time.Minute, "running")
	if _, out := execOut(t, ta, id, sb["accessToken"].(string), "cat", "/root/state"); out != "paused\n" {
		t.Fatalf("the fork's /root/state = %q", out)
	}
	if st := ta.req("GET", "/sandboxes/"+parent, nil).json(t)["state"]; st != "paused" {
		t.Fatalf("the parent is %v, want paused", st)
	}
	if r := ta.req("POST", "/sandboxes/"+parent+"/fork", map[string]any{"count": 101}); r.code != http.StatusBadRequest || !strings.Contains(string(r.body), "count") {
		t.Fatalf("count 101: %d %s", r.code, r.body)
	}
	rec, _ := ta.app.DB.GetRecord(context.Background(), id)
	if r := ta.req("DELETE", "/sandboxes/"+id, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete the fork: %d %s", r.code, r.body)
	}
	waitNoImages(t, lifecycle.LabelCheckpoint, rec.Checkpoint, 2*time.Minute)
}

// A sandbox killed while it is being forked leaves nothing behind: no
// checkpoint image, no fork, no container, no volume. (Seen failing with
// the checkpoint's removal in lifecycle's checkpoint taken out: its image
// stayed.)
func TestSandboxKilledWhileForked(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	parent, ptok := ta.create(map[string]any{"waitReady": true, "volumeMounts": []map[string]string{{"name": "data", "path": "/data"}}})
	execOut(t, ta, parent, ptok, "sh", "-c", "echo x > /data/x; echo y > /root/y")
	var once sync.Once
	ta.app.Lifecycle.SetAfterCheckpoint(func(p *store.Record) {
		once.Do(func() {
			if r := ta.req("DELETE", "/sandboxes/"+p.ID, nil); r.code != http.StatusNoContent {
				t.Errorf("delete during the fork: %d %s", r.code, r.body)
			}
		})
	})
	r := ta.req("POST", "/sandboxes/"+parent+"/fork", map[string]any{"count": 2})
	if r.code != http.StatusConflict {
		t.Fatalf("fork of a sandbox deleted meanwhile: %d %s", r.code, r.body)
	}
	waitNoImages(t, compute.LabelRecord, parent, time.Minute)
	ta.waitGone(parent, time.Minute)
	dep, _ := ta.app.DB.DeploymentID(context.Background())
	if cs := ta.containers(dep); len(cs) != 0 {
		t.Fatalf("containers left: %d", len(cs))
	}
	vols, err := dockertest.Client(t).VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", compute.LabelRecord+"="+parent))})
	if err != nil || len(vols.Volumes) != 0 {
		t.Fatalf("volumes left: %v %v", vols.Volumes, err)
	}
	recs, err := ta.app.DB.ListRecords(context.Background(), store.RecordFilter{OrgID: "org1", Limit: 10})
	if err != nil || len(recs) != 1 {
		t.Fatalf("records: %d %v (want the parent alone, no fork)", len(recs), err)
	}
}

// tasksCatalog is the repository's task catalog.
func tasksCatalog(c *Config) {
	c.TasksDir = filepath.Join("..", "..", "tasks")
}

const envsPath = "/api/v1/org/org1/ws/main/environments"

// envExec runs argv in environment id's execute service.
func envExec(t *testing.T, ta *testApp, id, token string, argv ...string) (int, string) {
	t.Helper()
	r := ta.req("POST", envsPath+"/"+id+"/execute", map[string]any{"command": argv, "timeout_sec": 60}, "X-Environment-Token", token)
	if r.code != http.StatusOK {
		t.Fatalf("execute %v in %s: %d %s", argv, id, r.code, r.body)
	}
	m := r.json(t)
	return int(m["exit_code"].(float64)), m["output"].(string)
}

// waitEnvState polls environment id until its state is one of want.
func waitEnvState(t *testing.T, ta *testApp, id string, within time.Duration, want ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	var last map[string]any
	for time.Now().Before(deadline) {
		if r := ta.req("GET", envsPath+"/"+id+"/status?wait=5", nil); r.code == http.StatusOK {
			last = r.json(t)
			for _, w := range want {
				if last["state"] == w {
					return last
				}
			}
			if last["state"] == "failed" {
				t.Fatalf("environment %s failed: %v", id, last["error"])
			}
		}
	}
	t.Fatalf("environment %s did not reach %v within %s; last: %v", id, want, within, last)
	return nil
}

// A ready web-login environment forked five times: every fork is ready
// without a build, has the parent's files, keeps its own, and the task is
// solved in each (the login bypass from the attacker service).
func TestEnvForkWebLogin(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(c *Config) { tasksCatalog(c); c.AdminKey = testAdminKey })
	r := ta.req("POST", envsPath, map[string]any{"task_ref": "web-login", "timeout_sec": 1800})
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	env := r.json(t)
	parent, ptok := env["id"].(string), env["execute_token"].(string)
	waitEnvState(t, ta, parent, 12*time.Minute, "ready")
	if code, _ := envExec(t, ta, parent, ptok, "sh", "-c", "echo before-fork > /tmp/before"); code != 0 {
		t.Fatal("writing in the parent failed")
	}
	solve := []string{"wget", "-qO-", "--post-data", "username=admin%27+--+&password=x", "http://web:8080/login"}

	forks := forkResults(t, ta.req("POST", envsPath+"/"+parent+"/fork", map[string]any{"count": 5}))
	if len(forks) != 5 {
		t.Fatalf("want 5 forks, got %d", len(forks))
	}
	var ids, toks []string
	for _, f := range forks {
		e, _ := f["environment"].(map[string]any)
		if e == nil {
			t.Fatalf("a fork failed: %v", f)
		}
		ids, toks = append(ids, e["id"].(string)), append(toks, e["execute_token"].(string))
	}
	for i, id := range ids {
		waitEnvState(t, ta, id, 8*time.Minute, "ready")
		full := ta.req("GET", envsPath+"/"+id, nil).json(t)
		tl, _ := json.Marshal(full["timeline"])
		if !strings.Contains(string(tl), "forked") {
			t.Fatalf("fork %s's timeline does not say it was forked (built instead?): %s", id, tl)
		}
		code, out := envExec(t, ta, id, toks[i], solve...)
		if code != 0 || !strings.Contains(out, "FLAG{demo-sqli-login-bypass}") {
			t.Fatalf("solving web-login in fork %s: %d %q", id, code, out)
		}
		if _, out := envExec(t, ta, id, toks[i], "cat", "/tmp/before"); out != "before-fork\n" {
			t.Fatalf("fork %s: /tmp/before = %q", id, out)
		}
		rec, err := ta.app.DB.GetRecord(context.Background(), full["sandbox_id"].(string))
		if err != nil || rec.ParentID == "" || rec.Checkpoint == "" {
			t.Fatalf("fork %s's record: %+v %v", id, rec, err)
		}
	}
	onlyFirstForkHas(t, "/tmp/mine", parent, ptok, ids, toks, func(id, tok string, argv ...string) (int, string) { return envExec(t, ta, id, tok, argv...) })
	if code, out := envExec(t, ta, parent, ptok, solve...); code != 0 || !strings.Contains(out, "FLAG{") {
		t.Fatalf("the parent after the fork: %d %q", code, out)
	}
	// Another org cannot fork it.
	if r := ta.reqKey(testAdminKey, http.MethodPost, "/admin/orgs", map[string]any{"org": "other", "credits": 100}); r.code != http.StatusCreated {
		t.Fatalf("POST /admin/orgs: %d %s", r.code, r.body)
	}
	_, other := adminKey(t, ta, "other", map[string]any{"name": "k"})
	if r := ta.reqKey(other, "POST", "/api/v1/org/other/ws/main/environments/"+parent+"/fork", map[string]any{}); r.code != http.StatusNotFound {
		t.Fatalf("another org's fork: %d %s", r.code, r.body)
	}
	prec, _ := ta.app.DB.GetRecord(context.Background(), ta.req("GET", envsPath+"/"+ids[0], nil).json(t)["sandbox_id"].(string))
	for _, id := range ids {
		if r := ta.req("DELETE", envsPath+"/"+id, nil); r.code != http.StatusOK {
			t.Fatalf("delete %s: %d %s", id, r.code, r.body)
		}
	}
	waitNoImages(t, lifecycle.LabelCheckpoint, prec.Checkpoint, 3*time.Minute)
}
