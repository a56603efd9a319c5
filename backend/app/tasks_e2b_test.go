package app

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

// writeTask writes a catalog entry: task.yaml and compose.yaml in dir/name.
func writeTask(t *testing.T, dir, name, manifest, composeFile string) {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, text := range map[string]string{"task.yaml": manifest, "compose.yaml": composeFile} {
		if err := os.WriteFile(filepath.Join(d, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const e2bTaskCompose = `services:
  web:
    image: example/web:1
    environment:
      FLAG: ${flag}
  attacker:
    image: example/attacker:1
`

// waitEnv polls an environment's status until its state is want.
func (ta *testApp) waitEnv(path string, timeout time.Duration, want string) map[string]any {
	ta.t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]any
	for time.Now().Before(deadline) {
		r := ta.req("GET", path+"/status?wait=2", nil)
		if r.code != http.StatusOK {
			ta.t.Fatalf("status: %d %s", r.code, r.body)
		}
		last = r.json(ta.t)
		switch last["state"] {
		case want:
			return last
		case "failed", "torn_down":
			ta.t.Fatalf("environment is %v, want %s: %v", last["state"], want, last)
		}
		time.Sleep(20 * time.Millisecond) // poll interval within the deadline
	}
	ta.t.Fatalf("environment did not become %s within %s; last: %v", want, timeout, last)
	return nil
}

// Task environments on E2B, through the backend's HTTP API against the
// spec-checked fake: one sandbox per service from the manifest's
// e2b_templates, E2B-form service_urls, execute through envd, pause/resume
// and teardown; and a task without templates fails with a clear error.
func TestTaskEnvironmentOnE2B(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t, e2bfake.WithTemplate(e2bfake.Template{ID: "tpl-web", CPUCount: 2, MemoryMB: 512}))
	tasksDir := filepath.Join(t.TempDir(), "tasks")
	writeTask(t, tasksDir, "e2b-demo", `name: e2b-demo
version: 1.0.0
description: Two services on E2B.
instruction: |
  The web service is at {{web_url}} (host {{web_host}}, port {{web_port}}).
expose:
  web: 8080
execute_service: attacker
inputs:
  flag: { default: "FLAG{e2b}" }
e2b_templates:
  web: tpl-web
  attacker: base
`, e2bTaskCompose)
	writeTask(t, tasksDir, "docker-only", `name: docker-only
version: 1.0.0
description: No E2B templates.
instruction: Nothing.
execute_service: attacker
inputs:
  flag: { default: "x" }
`, e2bTaskCompose)
	ta := newTestApp(t, func(c *Config) {
		c.Provider = "e2b"
		c.TasksDir = tasksDir
		c.E2B = &e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
			EnvdURL: fake.EnvdURL, Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
	})
	const envs = "/api/v1/org/org1/ws/main/environments"

	r := ta.req("POST", envs, map[string]any{"task_ref": "e2b-demo", "timeout_sec": 600, "inputs": map[string]string{"flag": "FLAG{on-e2b}"}})
	if r.code != http.StatusCreated || r.json(t)["state"] != "building" {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	created := r.json(t)
	id, token := created["id"].(string), created["execute_token"].(string)
	path := envs + "/" + id
	st := ta.waitEnv(path, 30*time.Second, "ready")

	// One sandbox per service, from its template, labelled with the environment.
	sandboxes := map[string]e2bfake.Sandbox{}
	for _, sb := range fake.Sandboxes() {
		if sb.Metadata[compute.LabelGroup] == id {
			sandboxes[sb.Metadata[compute.LabelService]] = sb
		}
	}
	web, attacker := sandboxes["web"], sandboxes["attacker"]
	if len(sandboxes) != 2 || web.TemplateID != "tpl-web" || attacker.TemplateID != "base" {
		t.Fatalf("sandboxes of the environment: %+v", sandboxes)
	}
	if web.EnvVars["FLAG"] != "FLAG{on-e2b}" {
		t.Fatalf("web's environment: %v", web.EnvVars)
	}
	urls, _ := st["service_urls"].(map[string]any)
	w, _ := urls["web"].(map[string]any)
	host := "8080-" + web.ID + "." + fake.Domain
	if len(urls) != 1 || w["url"] != "https://"+host || w["host"] != host || w["port"] != float64(443) {
		t.Fatalf("service_urls: %v (want https://%s, port 443)", urls, host)
	}
	full := ta.req("GET", path, nil).json(t)
	if ins, _ := full["instruction"].(string); !strings.Contains(ins, "https://"+host+" (host "+host+", port 443)") {
		t.Fatalf("instruction: %q", ins)
	}
	rec := ta.req("GET", "/api/v1/org/org1/sandboxes/"+full["sandbox_id"].(string), nil)
	if rec.code != http.StatusOK || rec.json(t)["provider"] != "e2b" {
		t.Fatalf("the ledger record of the environment: %d %s", rec.code, rec.body)
	}

	// Execute runs through envd in the execute service's sandbox.
	if x := ta.req("POST", path+"/execute", map[string]any{"command": []string{"echo", "hi"}}); x.code != http.StatusUnauthorized {
		t.Fatalf("execute without the token: %d %s", x.code, x.body)
	}
	starts := fake.Count(e2bfake.RouteProcessStart)
	x := ta.req("POST", path+"/execute", map[string]any{"command": []string{"echo", "hello", "e2b"}}, "X-Environment-Token", token)
	if x.code != http.StatusOK {
		t.Fatalf("execute: %d %s", x.code, x.body)
	}
	if m := x.json(t); m["exit_code"] != float64(0) || m["output"] != "hello e2b\n" || m["service"] != "attacker" {
		t.Fatalf("execute answered %v", m)
	}
	// The fake records a streamed call once its handler returns, which may
	// be just after the client read the end event.
	for deadline := time.Now().Add(5 * time.Second); fake.Count(e2bfake.RouteProcessStart) != starts+1; {
		if time.Now().After(deadline) {
			t.Fatalf("envd saw %d process starts, want %d", fake.Count(e2bfake.RouteProcessStart)-starts, 1)
		}
		time.Sleep(10 * time.Millisecond) // poll interval within the deadline
	}
	x = ta.req("POST", path+"/execute", map[string]any{"command": []string{"sleep", "30"}, "timeout_sec": 1}, "X-Environment-Token", token)
	if m := x.json(t); x.code != http.StatusOK || m["exit_code"] != float64(124) || m["timed_out"] != true {
		t.Fatalf("execute past its timeout: %d %s", x.code, x.body)
	}

	// Pause and resume map to E2B's pause and connect.
	if p := ta.req("POST", path+"/pause", nil); p.code != http.StatusOK || p.json(t)["state"] != "paused" {
		t.Fatalf("pause: %d %s", p.code, p.body)
	}
	for _, sb := range []e2bfake.Sandbox{web, attacker} {
		if got, _ := fake.Sandbox(sb.ID); got.State != "paused" {
			t.Fatalf("after pause, E2B sandbox %s is %s", sb.ID, got.State)
		}
	}
	if x := ta.req("POST", path+"/execute", map[string]any{"command": []string{"echo"}}, "X-Environment-Token", token); x.code != http.StatusConflict {
		t.Fatalf("execute while paused: %d %s", x.code, x.body)
	}
	if p := ta.req("POST", path+"/resume", nil); p.code != http.StatusOK || p.json(t)["state"] != "ready" {
		t.Fatalf("resume: %d %s", p.code, p.body)
	}
	for _, sb := range []e2bfake.Sandbox{web, attacker} {
		got, _ := fake.Sandbox(sb.ID)
		// E2B keeps it until the environment expires (600 s from ready), plus the provider's grace.
		if left := time.Until(got.EndAt); got.State != "running" || left > 11*time.Minute || left < 9*time.Minute {
			t.Fatalf("after resume, E2B sandbox %s is %s with %s to live", sb.ID, got.State, left)
		}
	}
	if x := ta.req("POST", path+"/execute", map[string]any{"command": []string{"exit", "3"}}, "X-Environment-Token", token); x.code != http.StatusOK || x.json(t)["exit_code"] != float64(3) {
		t.Fatalf("execute after resume: %d %s", x.code, x.body)
	}

	// Teardown deletes every sandbox of the environment.
	if d := ta.req("DELETE", path, nil); d.code != http.StatusOK || d.json(t)["state"] != "torn_down" {
		t.Fatalf("delete: %d %s", d.code, d.body)
	}
	if sbs := fake.Sandboxes(); len(sbs) != 0 {
		t.Fatalf("E2B still runs sandboxes of the torn down environment: %+v", sbs)
	}

	// E2B losing a sandbox (its TTL, a kill) fails the environment, and the
	// sweep removes sandboxes of environments this database does not know.
	r = ta.req("POST", envs, map[string]any{"task_ref": "e2b-demo"})
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	id = r.json(t)["id"].(string)
	path = envs + "/" + id
	ta.waitEnv(path, 30*time.Second, "ready")
	for _, sb := range fake.Sandboxes() {
		if sb.Metadata[compute.LabelGroup] == id && sb.Metadata[compute.LabelService] == "attacker" {
			fake.Kill(sb.ID)
		}
	}
	dep, err := ta.app.DB.DeploymentID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	orphan := fake.AddSandbox(e2bfake.SandboxSpec{Metadata: map[string]string{"dev.dreadnode.managed": "true",
		"dev.dreadnode.deployment": e2b.TaskScope(dep), "dev.dreadnode.record": "unknownenvironment00/web"}})
	deadline := time.Now().Add(30 * time.Second)
	for {
		st = ta.req("GET", path+"/status", nil).json(t)
		_, orphanLeft := fake.Sandbox(orphan)
		if st["state"] == "failed" && !orphanLeft && len(fake.Sandboxes()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after E2B lost a sandbox: %v; sandboxes left %+v", st, fake.Sandboxes())
		}
		time.Sleep(20 * time.Millisecond) // poll interval within the deadline
	}
	if msg, _ := st["error"].(string); !strings.Contains(msg, `service "attacker" stopped unexpectedly`) {
		t.Fatalf("error after E2B lost a sandbox: %q", msg)
	}

	// A task without an E2B template for every service cannot run on E2B.
	r = ta.req("POST", envs, map[string]any{"task_ref": "docker-only"})
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	path = envs + "/" + r.json(t)["id"].(string)
	deadline = time.Now().Add(30 * time.Second)
	for {
		st = ta.req("GET", path+"/status?wait=2", nil).json(t)
		if st["state"] == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the environment of a task without E2B templates did not fail: %v", st)
		}
	}
	if msg, _ := st["error"].(string); !strings.Contains(msg, `service "attacker"`) || !strings.Contains(msg, "e2b_templates") ||
		!strings.Contains(msg, "missing: attacker, web") {
		t.Fatalf("error of a task without E2B templates: %q", msg)
	}
	if sbs := fake.Sandboxes(); len(sbs) != 0 {
		t.Fatalf("sandboxes were created for a task that cannot run on E2B: %+v", sbs)
	}
}
