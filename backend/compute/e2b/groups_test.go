package e2b_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

const deployment = "dep1"

func e2bConfig(fake *e2bfake.Server) e2b.Config {
	return e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
		EnvdURL: fake.EnvdURL, Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
}

func newEngine(t *testing.T, fake *e2bfake.Server) *e2b.Groups {
	t.Helper()
	eng, err := e2b.NewTaskGroups(e2bConfig(fake), deployment, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng
}

// up is a two-service group: web (exposed on 8080) and attacker.
func up(envID string, templates map[string]string) *compute.Group {
	web := compute.GroupService{Image: "web:1", Template: templates["web"], Env: map[string]string{"FLAG": "FLAG{x}"}}
	attacker := compute.GroupService{Image: "attacker:1", Template: templates["attacker"]}
	return &compute.Group{GroupTarget: compute.GroupTarget{ID: envID, RecordID: "rec-" + envID, OrgID: "org1", TaskRef: "org1/demo@1.0.0"},
		Services: map[string]compute.GroupService{"web": web, "attacker": attacker}, Expose: map[string]int{"web": 8080}}
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestEnvironmentOnE2B(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t, e2bfake.WithTemplate(e2bfake.Template{ID: "tpl-web", CPUCount: 2, MemoryMB: 512}))
	eng := newEngine(t, fake)
	c := ctx(t)

	if eng.BuildsImages() {
		t.Fatal("E2B says it builds images")
	}
	imgs := map[string]*compute.Image{}
	if missing, err := eng.Missing(c, imgs); err != nil || len(missing) != 0 {
		t.Fatalf("missing on E2B: %v %v", missing, err)
	}

	u := up("env1", map[string]string{"web": "tpl-web", "attacker": "base"})
	res, err := eng.Bring(c, u)
	if err != nil {
		t.Fatal(err)
	}
	sbs := fake.Sandboxes()
	if len(sbs) != 2 || len(res.Containers) != 2 || res.Adopted != 0 {
		t.Fatalf("want two sandboxes, got %d (result %+v)", len(sbs), res)
	}
	for _, sb := range sbs {
		svc := sb.Metadata[compute.LabelService]
		want := map[string]string{"web": "tpl-web", "attacker": "base"}[svc]
		if sb.TemplateID != want || res.Containers[svc] != sb.ID {
			t.Fatalf("service %q runs template %q in %s, want %q in %s", svc, sb.TemplateID, sb.ID, want, res.Containers[svc])
		}
		md := sb.Metadata
		if md[compute.LabelGroup] != "env1" || md[compute.LabelRecord] != "env1/"+svc || md[e2b.LabelGroupRecord] != "rec-env1" ||
			md[compute.LabelDeployment] != e2b.TaskScope(deployment) || md[compute.LabelOrg] != "org1" || md[compute.LabelTask] != "org1/demo@1.0.0" {
			t.Fatalf("metadata of %s: %v", svc, md)
		}
		if svc == "web" && (sb.EnvVars["FLAG"] != "FLAG{x}" || len(sb.EnvVars) != 1) {
			t.Fatalf("web's environment: %v", sb.EnvVars)
		}
	}
	webID := res.Containers["web"]
	ep, ok := res.Endpoints["web"]
	if !ok || len(res.Endpoints) != 1 {
		t.Fatalf("endpoints: %+v", res.Endpoints)
	}
	if want := "https://8080-" + webID + "." + fake.Domain; ep.URL != want || ep.Host != "8080-"+webID+"."+fake.Domain || ep.Port != 443 {
		t.Fatalf("web endpoint %+v, want %s", ep, want)
	}

	// Bringing it up again (a restarted worker) adopts both sandboxes.
	creates := fake.Count(e2bfake.RouteCreate)
	res2, err := eng.Bring(c, u)
	if err != nil || res2.Adopted != 2 || res2.Containers["web"] != webID || fake.Count(e2bfake.RouteCreate) != creates {
		t.Fatalf("second bring: %+v %v (creates %d -> %d)", res2, err, creates, fake.Count(e2bfake.RouteCreate))
	}

	// Exec through envd in the attacker's sandbox.
	r, err := eng.Exec(c, "env1", "attacker", []string{"echo", "hello"}, 10*time.Second, 1<<20)
	if err != nil || r.ExitCode != 0 || string(r.Output) != "hello\n" || r.TimedOut || r.Truncated {
		t.Fatalf("exec echo: %+v %v", r, err)
	}
	if r, err = eng.Exec(c, "env1", "attacker", []string{"exit", "3"}, 10*time.Second, 1<<20); err != nil || r.ExitCode != 3 {
		t.Fatalf("exec exit 3: %+v %v", r, err)
	}
	if r, err = eng.Exec(c, "env1", "attacker", []string{"echo", "a long line"}, 10*time.Second, 4); err != nil || string(r.Output) != "a lo" || !r.Truncated {
		t.Fatalf("exec truncated: %+v %v", r, err)
	}
	if r, err = eng.Exec(c, "env1", "attacker", []string{"sleep", "30"}, time.Second, 1<<20); err != nil || !r.TimedOut || r.ExitCode != 124 {
		t.Fatalf("exec past its timeout: %+v %v", r, err)
	}
	if _, err = eng.Exec(c, "env1", "nope", []string{"echo"}, time.Second, 1<<20); !errors.Is(err, compute.ErrNotRunning) {
		t.Fatalf("exec in a service without a sandbox: %v", err)
	}
	// Streamed: the §6 events; past its timeout a command ends with exit 124.
	var evs []string
	record := func(ev compute.ProcessEvent) error {
		evs = append(evs, fmt.Sprintf("%s:%s%d", ev.Type, ev.Data, ev.ExitCode))
		return nil
	}
	if r, err = eng.ExecStream(c, "env1", "attacker", []string{"echo", "hi"}, 10*time.Second, record); err != nil || r.ExitCode != 0 ||
		len(evs) != 3 || !strings.HasPrefix(evs[0], "start:") || evs[1] != "stdout:hi\n0" || evs[2] != "exit:0" {
		t.Fatalf("exec stream: %+v %v %q", r, err, evs)
	}
	evs = nil
	if r, err = eng.ExecStream(c, "env1", "attacker", []string{"sleep", "30"}, time.Second, record); err != nil || !r.TimedOut || evs[len(evs)-1] != "exit:124" {
		t.Fatalf("exec stream past its timeout: %+v %v %q", r, err, evs)
	}

	// Pause and resume every sandbox.
	if err := eng.Pause(c, "env1"); err != nil {
		t.Fatal(err)
	}
	for _, sb := range fake.Sandboxes() {
		if sb.State != "paused" {
			t.Fatalf("after pause, %s is %s", sb.ID, sb.State)
		}
	}
	if _, err = eng.Exec(c, "env1", "attacker", []string{"echo"}, time.Second, 1<<20); !errors.Is(err, compute.ErrNotRunning) {
		t.Fatalf("exec while paused: %v", err)
	}
	if err := eng.Unpause(c, "env1"); err != nil {
		t.Fatal(err)
	}
	for _, sb := range fake.Sandboxes() {
		if sb.State != "running" || sb.Resumes != 1 {
			t.Fatalf("after resume, %s is %s (resumes %d)", sb.ID, sb.State, sb.Resumes)
		}
	}

	// KeepAlive moves E2B's TTL to the environment's remaining lifetime.
	if err := eng.KeepAlive(c, "env1", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, sb := range fake.Sandboxes() {
		if left := time.Until(sb.EndAt); left < 10*time.Minute || left > 12*time.Minute {
			t.Fatalf("TTL of %s after KeepAlive: %s", sb.ID, left)
		}
	}

	snap, err := eng.Snapshot(c)
	if err != nil || len(snap.Containers["env1"]) != 2 {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	for _, cs := range snap.Containers["env1"] {
		if cs.State != "running" || res.Containers[cs.Service] != cs.ID {
			t.Fatalf("snapshot entry %+v", cs)
		}
	}

	n, err := eng.RemoveCount(c, "env1")
	if err != nil || n != 2 || len(fake.Sandboxes()) != 0 {
		t.Fatalf("remove: %d %v, left %d", n, err, len(fake.Sandboxes()))
	}
	if err := eng.Remove(c, "env1"); err != nil {
		t.Fatalf("remove again: %v", err)
	}
}

// A task without a template for every service cannot run on E2B: nothing is
// created and the error names the service and e2b_templates.
func TestMissingTemplate(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t)
	eng := newEngine(t, fake)
	_, err := eng.Bring(ctx(t), up("env2", map[string]string{"web": "base"}))
	var be *compute.BuildError
	if !errors.As(err, &be) || be.Service != "attacker" || !strings.Contains(err.Error(), "e2b_templates") {
		t.Fatalf("want a build error naming attacker and e2b_templates, got %v", err)
	}
	if fake.Count(e2bfake.RouteCreate) != 0 || len(fake.Sandboxes()) != 0 {
		t.Fatal("a sandbox was created for a task that cannot run on E2B")
	}
}

// A template E2B does not have is the task's fault too.
func TestUnknownTemplate(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t)
	eng := newEngine(t, fake)
	c := ctx(t)
	_, err := eng.Bring(c, up("env3", map[string]string{"web": "base", "attacker": "no-such-template"}))
	var be *compute.BuildError
	if !errors.As(err, &be) || be.Service != "attacker" || !strings.Contains(err.Error(), `"no-such-template"`) {
		t.Fatalf("want a build error naming the template, got %v", err)
	}
	if err := eng.Remove(c, "env3"); err != nil || len(fake.Sandboxes()) != 0 {
		t.Fatalf("remove after a failed bring: %v, left %d", err, len(fake.Sandboxes()))
	}
}

// A paused sandbox left by an earlier attempt is adopted and resumed.
func TestBringResumesPausedSandbox(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t)
	eng := newEngine(t, fake)
	c := ctx(t)
	id := fake.AddSandbox(e2bfake.SandboxSpec{Paused: true, Metadata: map[string]string{compute.LabelManaged: "true",
		compute.LabelDeployment: e2b.TaskScope(deployment), compute.LabelRecord: "env4/web"}})
	res, err := eng.Bring(c, up("env4", map[string]string{"web": "base", "attacker": "base"}))
	if err != nil || res.Adopted != 1 || res.Containers["web"] != id {
		t.Fatalf("bring: %+v %v", res, err)
	}
	if sb, _ := fake.Sandbox(id); sb.State != "running" {
		t.Fatalf("the adopted sandbox is %s", sb.State)
	}
	if err := eng.Remove(c, "env4"); err != nil || len(fake.Sandboxes()) != 0 {
		t.Fatalf("remove: %v, left %d", err, len(fake.Sandboxes()))
	}
}

// Task sandboxes live in a scope of their own: the deployment's sandbox
// provider (the reconciler's) never lists them, and the engine never lists
// nor removes the reconciler's.
func TestScopesAreSeparate(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t)
	eng := newEngine(t, fake)
	c := ctx(t)
	cfg := e2bConfig(fake)
	cfg.Scope = deployment
	lifecycle, err := e2b.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := lifecycle.Create(c, compute.Spec{RecordID: "rec-sandbox", Template: "base", Kind: "runtime"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Bring(c, up("env5", map[string]string{"web": "base", "attacker": "base"})); err != nil {
		t.Fatal(err)
	}
	listed, err := lifecycle.List(c)
	if err != nil || len(listed) != 1 || listed[0].Ref.ID != sbx.Ref.ID {
		t.Fatalf("the reconciler's provider lists %+v (%v)", listed, err)
	}
	snap, err := eng.Snapshot(c)
	if err != nil || len(snap.Containers) != 1 || len(snap.Containers["env5"]) != 2 {
		t.Fatalf("the engine's snapshot: %+v %v", snap, err)
	}
	if err := eng.Remove(c, "env5"); err != nil {
		t.Fatal(err)
	}
	if sbs := fake.Sandboxes(); len(sbs) != 1 || sbs[0].ID != sbx.Ref.ID {
		t.Fatalf("after removing the environment: %+v", sbs)
	}
	if err := lifecycle.Delete(c, sbx.Ref); err != nil {
		t.Fatal(err)
	}
}

// Groups on E2B keep every promise of the group capability.
func TestGroupSuiteOnE2B(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t, e2bfake.WithTemplate(e2bfake.Template{ID: "tpl-web", CPUCount: 2, MemoryMB: 512}))
	computetest.GroupSuite(t, newEngine(t, fake), up("suite1", map[string]string{"web": "tpl-web", "attacker": "base"}), "attacker")
	if n := len(fake.Sandboxes()); n != 0 {
		t.Fatalf("%d sandboxes left", n)
	}
}
