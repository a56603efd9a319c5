package app

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

// The lifecycle API is the same on E2B: the whole cycle through the backend's
// routes, against the spec-checked fake (every request and response the two
// exchange is validated against E2B's openapi.yml at cleanup).
func TestLifecycleOnE2B(t *testing.T) {
	t.Parallel()
	ta, fake := newE2BApp(t)
	r := ta.req("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 120, "autoResume": true, "metadata": map[string]string{"who": "e2b"}})
	if r.code != http.StatusCreated || r.json(t)["state"] != "running" {
		t.Fatalf("create on E2B: %d %s", r.code, r.body)
	}
	id, tok := r.json(t)["sandboxID"].(string), r.json(t)["accessToken"].(string)
	sbs := fake.Sandboxes()
	if len(sbs) != 1 || sbs[0].Metadata["dev.dreadnode.record"] != id {
		t.Fatalf("the E2B sandbox does not carry our record id: %+v", sbs)
	}
	if !sbs[0].AutoResume {
		t.Fatalf("autoResume was not passed to E2B")
	}
	e := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"echo", "hello"}}, "X-Access-Token", tok)
	if e.code != 200 || !strings.Contains(e.json(t)["stdout"].(string), "hello") {
		t.Fatalf("exec through envd: %d %s", e.code, e.body)
	}
	if w := ta.req("PUT", "/sandboxes/"+id+"/files?path=/tmp/f", "data", "X-Access-Token", tok); w.code != 204 {
		t.Fatalf("write through envd: %d %s", w.code, w.body)
	}
	if f := ta.req("GET", "/sandboxes/"+id+"/files?path=/tmp/f", nil, "X-Access-Token", tok); f.code != 200 || string(f.body) != "data" {
		t.Fatalf("read through envd: %d %s", f.code, f.body)
	}
	if p := ta.req("POST", "/sandboxes/"+id+"/pause", nil); p.code != 204 {
		t.Fatalf("pause: %d %s", p.code, p.body)
	}
	if sb, _ := fake.Sandbox(sbs[0].ID); sb.State != "paused" {
		t.Fatalf("E2B state after pause: %s", sb.State)
	}
	if c := ta.req("POST", "/sandboxes/"+id+"/connect", map[string]any{"timeout": 120}); c.code != 201 {
		t.Fatalf("connect: %d %s", c.code, c.body)
	}
	// E2B forgetting the sandbox (its own TTL, a kill) fails the record truthfully.
	fake.Kill(sbs[0].ID)
	sb := ta.waitState(id, 30*time.Second, "failed")
	if d, _ := sb["diagnostic"].(string); !strings.Contains(d, "disappeared") {
		t.Fatalf("diagnostic after E2B lost the sandbox: %q", d)
	}
	// A second one is deleted through the API and is gone from E2B.
	id2, _ := ta.create(map[string]any{"waitReady": true})
	if d := ta.req("DELETE", "/sandboxes/"+id2, nil); d.code != 204 {
		t.Fatalf("delete: %d %s", d.code, d.body)
	}
	for _, s := range fake.Sandboxes() {
		if s.Metadata["dev.dreadnode.record"] == id2 {
			t.Fatalf("E2B still runs the deleted sandbox: %+v", s)
		}
	}
}

// One deployment, two providers: "cloud" is routed to E2B, everything else
// stays on Docker, and each sandbox is driven by the provider that made it.
func TestTemplatesRoutedToProviders(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t)
	ta := newTestApp(t, func(c *Config) {
		c.TemplateProviders = map[string]string{"cloud": "e2b"}
		c.E2B = &e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
			EnvdURL: fake.EnvdURL, Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
			Templates: map[string]compute.Template{"cloud": {ID: "base", CPUCount: 2, MemoryMB: 512}}}
	})
	cloud, cloudTok := ta.create(map[string]any{"templateID": "cloud", "waitReady": true})
	local, localTok := ta.create(map[string]any{"waitReady": true})
	if len(fake.Sandboxes()) != 1 || len(ta.containersOf(cloud)) != 0 {
		t.Fatalf("the cloud template must run on E2B only")
	}
	if len(ta.containersOf(local)) != 1 {
		t.Fatalf("the base template must run on Docker")
	}
	for id, tok := range map[string]string{cloud: cloudTok, local: localTok} {
		if e := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"echo", "hi"}}, "X-Access-Token", tok); e.code != 200 {
			t.Fatalf("exec on %s: %d %s", id, e.code, e.body)
		}
		if p := ta.req("POST", "/sandboxes/"+id+"/pause", nil); p.code != 204 {
			t.Fatalf("pause %s: %d %s", id, p.code, p.body)
		}
	}
	ledger := ta.req("GET", "/api/v1/org/org1/sandboxes/"+cloud, nil).json(t)
	if ledger["provider"] != "e2b" {
		t.Fatalf("the ledger names provider %v for the cloud sandbox", ledger["provider"])
	}
	for _, id := range []string{cloud, local} {
		if d := ta.req("DELETE", "/sandboxes/"+id, nil); d.code != 204 {
			t.Fatalf("delete %s: %d", id, d.code)
		}
	}
	if len(fake.Sandboxes()) != 0 {
		t.Fatalf("E2B still runs the deleted sandbox")
	}
	ta.waitGone(local, 10*time.Second)
}
