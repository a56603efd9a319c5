package tasks_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

const readyTimeout = 4 * time.Minute

// The whole lifecycle of web-login: create, building → provisioning → ready,
// the login bypass from the host and from the attacker service, execute with
// right/wrong/missing token, pause/resume, the ledger record, delete.
func TestWebLoginLifecycle(t *testing.T) {
	t.Parallel()
	pgtest.EachDatabase(t, func(t *testing.T, db string) {
		t.Parallel()
		h := newHarnessOn(t, db)
		r := h.do("acme", http.MethodPost, envPath("acme", "red-team"), map[string]any{
			"task_ref": "web-login", "inputs": map[string]string{"flag": "FLAG{lifecycle}"}, "timeout_sec": 600,
			"project_id": "proj-1", "secret_ids": []string{"s1"}})
		if r.Code != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Code, r.Body)
		}
		created := r.JSON(t)
		id, token := created["id"].(string), created["execute_token"].(string)
		if created["state"] != "building" || token == "" || created["service_urls"] != nil || created["expires_at"] != nil {
			t.Fatalf("create answer: %s", r.Body)
		}
		st := h.waitState("acme", "red-team", id, readyTimeout, "ready")
		if _, ok := st["execute_token"]; ok {
			t.Fatalf("status carries the execute token: %v", st)
		}
		env := h.get("acme", "red-team", id)
		if _, ok := env["execute_token"]; ok {
			t.Fatal("GET carries the execute token")
		}
		urls := env["service_urls"].(map[string]any)
		web := urls["web"].(map[string]any)
		webURL := web["url"].(string)
		// The service's address on the environment's network: nothing is
		// published on a host interface.
		if host, _ := web["host"].(string); net.ParseIP(host) == nil || net.ParseIP(host).IsLoopback() ||
			webURL != "http://"+host+":8080" || web["port"] != float64(8080) || len(urls) != 1 {
			t.Fatalf("service_urls: %v", urls)
		}
		instr := env["instruction"].(string)
		if !strings.Contains(instr, webURL) || strings.Contains(instr, "{{") {
			t.Fatalf("instruction not rendered: %q", instr)
		}
		if env["task_name"] != "web-login" || env["task_version"] != "1.0.0" || env["workspace"] != "red-team" ||
			env["project_id"] != "proj-1" || env["timeout_sec"].(float64) != 600 || env["expires_at"] == nil || env["sandbox_id"] == "" {
			t.Fatalf("resource: %v", env)
		}
		exp, _ := time.Parse(time.RFC3339, env["expires_at"].(string))
		if d := time.Until(exp); d < 9*time.Minute || d > 11*time.Minute {
			t.Fatalf("expires_at %v is not ~timeout_sec from now", exp)
		}

		// The bypass from the host, at the service's address.
		if code, body := httpGet(t, webURL+"/"); code != 200 || !strings.Contains(body, "login") {
			t.Fatalf("GET /: %d %s", code, body)
		}
		resp, err := http.PostForm(webURL+"/login", url.Values{"username": {"admin' --"}, "password": {"x"}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "FLAG{lifecycle}") {
			t.Fatalf("login bypass from the host: %d %s", resp.StatusCode, body)
		}

		// Execute in the attacker service, over the private network.
		ex := h.execute("acme", "red-team", id, token, map[string]any{
			"command": []string{"wget", "-qO-", "--post-data", "username=admin%27+--+&password=x", "http://web:8080/login"}})
		if ex.Code != 200 {
			t.Fatalf("execute: %d %s", ex.Code, ex.Body)
		}
		out := ex.JSON(t)
		if out["exit_code"].(float64) != 0 || !strings.Contains(out["output"].(string), "FLAG{lifecycle}") || out["service"] != "attacker" {
			t.Fatalf("execute result: %v", out)
		}
		ex = h.execute("acme", "red-team", id, token, map[string]any{"command": "echo to-stderr >&2; echo to-stdout; exit 7"})
		out = ex.JSON(t)
		if ex.Code != 200 || out["exit_code"].(float64) != 7 || !strings.Contains(out["output"].(string), "to-stderr") ||
			!strings.Contains(out["output"].(string), "to-stdout") {
			t.Fatalf("sh -c execute: %d %v", ex.Code, out)
		}
		if ex := h.execute("acme", "red-team", id, "", map[string]any{"command": "true"}); ex.Code != http.StatusUnauthorized {
			t.Fatalf("missing token: %d %s", ex.Code, ex.Body)
		}
		if ex := h.execute("acme", "red-team", id, "det_wrong", map[string]any{"command": "true"}); ex.Code != http.StatusForbidden {
			t.Fatalf("wrong token: %d %s", ex.Code, ex.Body)
		}

		// The ledger record: kind task, running, linked.
		rec := h.record(env["sandbox_id"].(string))
		if rec.Kind != sandbox.KindTask || rec.Phase != sandbox.PhaseRunning || rec.EnvironmentID != id || rec.Provider != "docker" || rec.RunningSince.IsZero() {
			t.Fatalf("ledger record: %+v", rec)
		}

		// Pause: containers paused, execute refused, record paused.
		if r := h.do("acme", http.MethodPost, envPath("acme", "red-team", "/", id, "/pause"), nil); r.Code != 200 || r.JSON(t)["state"] != "paused" {
			t.Fatalf("pause: %d %s", r.Code, r.Body)
		}
		for _, c := range h.containers(id) {
			if c.State != "paused" {
				t.Fatalf("container %s is %s after pause", c.Names, c.State)
			}
		}
		if r := h.do("acme", http.MethodPost, envPath("acme", "red-team", "/", id, "/pause"), nil); r.Code != http.StatusConflict {
			t.Fatalf("pause twice: %d %s", r.Code, r.Body)
		}
		if ex := h.execute("acme", "red-team", id, token, map[string]any{"command": "true"}); ex.Code != http.StatusConflict {
			t.Fatalf("execute while paused: %d %s", ex.Code, ex.Body)
		}
		if rec := h.record(rec.ID); rec.Phase != sandbox.PhasePaused || !rec.RunningSince.IsZero() {
			t.Fatalf("record after pause: %+v", rec)
		}
		if st := h.do("acme", http.MethodGet, envPath("acme", "red-team", "/", id, "/status"), nil).JSON(t); st["service_urls"] == nil {
			t.Fatalf("paused status lost service_urls: %v", st)
		}
		if r := h.do("acme", http.MethodPost, envPath("acme", "red-team", "/", id, "/resume"), nil); r.Code != 200 || r.JSON(t)["state"] != "ready" {
			t.Fatalf("resume: %d %s", r.Code, r.Body)
		}
		if r := h.do("acme", http.MethodPost, envPath("acme", "red-team", "/", id, "/resume"), nil); r.Code != http.StatusConflict {
			t.Fatalf("resume twice: %d %s", r.Code, r.Body)
		}
		if ex := h.execute("acme", "red-team", id, token, map[string]any{"command": "wget -qO- http://web:8080/health"}); ex.Code != 200 || ex.JSON(t)["exit_code"].(float64) != 0 {
			t.Fatalf("execute after resume: %d %s", ex.Code, ex.Body)
		}

		// The list shows it, with state filters.
		l := h.do("acme", http.MethodGet, envPath("acme", "red-team", "?state=ready&limit=10"), nil).JSON(t)
		if envs := l["environments"].([]any); len(envs) != 1 || envs[0].(map[string]any)["id"] != id || l["has_next"] != false {
			t.Fatalf("list: %v", l)
		}

		// Delete: torn_down, nothing left, record killed; idempotent.
		d := h.do("acme", http.MethodDelete, envPath("acme", "red-team", "/", id), nil)
		if d.Code != 200 || d.JSON(t)["state"] != "torn_down" || d.JSON(t)["service_urls"] != nil {
			t.Fatalf("delete: %d %s", d.Code, d.Body)
		}
		if cs, ns := h.containers(id), h.networks(id); len(cs) != 0 || len(ns) != 0 {
			t.Fatalf("after delete: %d containers, %d networks", len(cs), len(ns))
		}
		rec = h.record(rec.ID)
		if rec.Phase != sandbox.PhaseDeleted || rec.KillReason != sandbox.KillTornDown || rec.KilledAt.IsZero() || rec.Phase.LedgerState() != "killed" {
			t.Fatalf("record after delete: %+v", rec)
		}
		if d := h.do("acme", http.MethodDelete, envPath("acme", "red-team", "/", id), nil); d.Code != 200 || d.JSON(t)["state"] != "torn_down" {
			t.Fatalf("second delete: %d %s", d.Code, d.Body)
		}
		if ex := h.execute("acme", "red-team", id, token, map[string]any{"command": "true"}); ex.Code != http.StatusConflict {
			t.Fatalf("execute after delete: %d %s", ex.Code, ex.Body)
		}
		if r := h.do("acme", http.MethodPost, envPath("acme", "red-team", "/", id, "/pause"), nil); r.Code != http.StatusConflict {
			t.Fatalf("pause after delete: %d %s", r.Code, r.Body)
		}
	})
}

// ssrf-vault: two services talking over the environment's private network;
// only the gateway is published.
func TestSSRFVaultLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, token := h.create("acme", "ws1", map[string]any{"task_ref": "dreadnode/ssrf-vault@1.0.0", "inputs": map[string]string{"flag": "FLAG{vault}"}})
	h.waitState("acme", "ws1", id, readyTimeout, "ready")
	env := h.get("acme", "ws1", id)
	urls := env["service_urls"].(map[string]any)
	if len(urls) != 1 || urls["gateway"] == nil {
		t.Fatalf("service_urls: %v", urls)
	}
	gw := urls["gateway"].(map[string]any)["url"].(string)
	if code, body := httpGet(t, gw+"/fetch?url="+url.QueryEscape("http://vault:9000/secret")); code != 200 || !strings.Contains(body, "FLAG{vault}") {
		t.Fatalf("SSRF through the gateway: %d %s", code, body)
	}
	ex := h.execute("acme", "ws1", id, token, map[string]any{"command": "wget -qO- http://vault:9000/secret", "timeout_sec": 30})
	if ex.Code != 200 || !strings.Contains(ex.JSON(t)["output"].(string), "FLAG{vault}") {
		t.Fatalf("execute in the gateway: %d %s", ex.Code, ex.Body)
	}
	// The dependency order was honoured: the vault was healthy before the
	// gateway started.
	var vaultHealthy, gatewayStarted time.Time
	vaultSeen := false
	for _, c := range h.containers(id) {
		in, err := h.cli.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		started, _ := time.Parse(time.RFC3339Nano, in.State.StartedAt)
		switch c.Labels["dev.dreadnode.service"] {
		case "vault":
			// The engine keeps the last 5 probes only: the first success is
			// known when a probe before it is kept, or fewer than 5 are.
			// Otherwise (a late inspect under load) the vault is only known
			// to be healthy, and the order is not checked.
			log := in.State.Health.Log
			for i, l := range log {
				if l.ExitCode == 0 {
					vaultSeen = true
					if i > 0 || len(log) < 5 {
						vaultHealthy = l.End
					}
					break
				}
			}
		case "gateway":
			gatewayStarted = started
		}
		for _, k := range []string{"dev.dreadnode.managed", "dev.dreadnode.record", "dev.dreadnode.org", "dev.dreadnode.kind", "dev.dreadnode.environment"} {
			if c.Labels[k] == "" {
				t.Fatalf("container %s lacks label %s: %v", c.Names, k, c.Labels)
			}
		}
		if c.Labels["dev.dreadnode.kind"] != "task" || c.Labels["dev.dreadnode.org"] != "acme" || c.Labels["dev.dreadnode.record"] != env["sandbox_id"] {
			t.Fatalf("labels: %v", c.Labels)
		}
		for _, p := range c.Ports {
			if p.PublicPort != 0 {
				t.Fatalf("port %d published on the host (%s:%d)", p.PrivatePort, p.IP, p.PublicPort)
			}
		}
		if len(in.HostConfig.PortBindings) != 0 {
			t.Fatalf("service %s has port bindings %v", c.Names, in.HostConfig.PortBindings)
		}
	}
	if !vaultSeen || (!vaultHealthy.IsZero() && gatewayStarted.Before(vaultHealthy.Add(-50*time.Millisecond))) {
		t.Fatalf("gateway started %v, before the vault was healthy %v", gatewayStarted, vaultHealthy)
	}
	if ns := h.networks(id); len(ns) != 1 || ns[0].Labels["dev.dreadnode.environment"] != id {
		t.Fatalf("networks: %+v", ns)
	}
	if d := h.do("acme", http.MethodDelete, envPath("acme", "ws1", "/", id), nil); d.Code != 200 {
		t.Fatalf("delete: %d %s", d.Code, d.Body)
	}
	h.waitGone(id, 10*time.Second)
}
