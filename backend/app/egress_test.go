package app

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// egressNetwork gives the test app a Docker network of its own, removed
// with its egress chain at the end, so the test leaves no rule behind.
func egressNetwork(t *testing.T) string {
	name := "dn-egress-app-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	t.Cleanup(func() {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return
		}
		defer cli.Close()
		ctx := context.Background()
		for _, n := range []string{name, name + "-isolated"} {
			if info, err := cli.NetworkInspect(ctx, n, network.InspectOptions{}); err == nil && cli.NetworkRemove(ctx, info.ID) == nil {
				_ = exec.Command("nft", "delete", "chain", "inet", "dreadnode", "n-br-"+info.ID[:12]).Run()
				_ = exec.Command("nft", "delete", "element", "inet", "dreadnode", "nets", "{ br-"+info.ID[:12]+" }").Run()
				_ = exec.Command("nft", "delete", "element", "inet", "dreadnode", "bridges", "{ br-"+info.ID[:12]+" }").Run()
			}
		}
	})
	return name
}

// A domain name in denyOut (allowOut takes them, denyOut does not) is
// refused at the door on Docker, naming the field, and no record is
// stored; the drop counters are in /metrics.
func TestEgressDomainNameRefusedAndCounted(t *testing.T) {
	net := egressNetwork(t)
	ta := newTestApp(t, func(c *Config) { c.DockerNetwork = net; withAdmin(c) })
	r := ta.req("POST", "/sandboxes", map[string]any{"network": map[string]any{"allowOut": []string{"*.example.com"}, "denyOut": []string{"10.1.2.3", "example.com"}}})
	if r.code != 400 || !strings.Contains(string(r.body), "network.denyOut.1") && !strings.Contains(string(r.body), `"denyOut","1"`) ||
		!strings.Contains(string(r.body), "domain name") {
		t.Fatalf("got %d %s, want a 400 naming network.denyOut.1", r.code, r.body)
	}
	if all := ta.req("GET", "/sandboxes?state=starting,running,paused,deleted,failed,completed", nil); strings.Contains(string(all.body), `"sandboxID"`) {
		t.Fatalf("a refused create stored a record: %s", all.body)
	}
	if taskNetworkFilter(ta.app.Provider) == nil {
		t.Fatal("task environments' networks are not put under the egress rules")
	}
	if r := ta.req("GET", "/readyz", nil); r.code != 200 {
		t.Fatalf("/readyz with the rules installed: %d %s", r.code, r.body)
	}
	m := ta.reqKey(testAdminKey, "GET", "/metrics", nil)
	if !strings.Contains(string(m.body), `dreadnode_egress_dropped_packets_total{reason="link_local"}`) {
		t.Fatalf("/metrics lacks the egress drop counters:\n%s", m.body)
	}
}

// Without the means to install its rules (here: no nft on PATH) the
// backend is not ready, says why, and starts no sandbox unfiltered.
func TestReadyzFailsWhenEgressCannotBeEnforced(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	net := egressNetwork(t)
	ta := newTestApp(t, func(c *Config) { c.DockerNetwork = net })
	r := ta.req("GET", "/readyz", nil)
	if r.code != 503 || !strings.Contains(string(r.body), "egress rules could not be installed") || !strings.Contains(string(r.body), "DREADNODE_EGRESS=off") {
		t.Fatalf("/readyz: got %d %s, want 503 saying why and what to do", r.code, r.body)
	}
	id, _ := ta.create(map[string]any{})
	s := ta.waitState(id, 30*time.Second, "failed")
	if d, _ := s["diagnostic"].(string); !strings.Contains(d, "egress") {
		t.Fatalf("the failed sandbox does not say why: %v", s)
	}
	if cs := ta.containersOf(id); len(cs) != 0 {
		t.Fatalf("a sandbox container exists without egress rules: %v", cs)
	}

	off := newTestApp(t, func(c *Config) { c.DockerNetwork = net; c.DockerEgress.Off = true })
	if r := off.req("GET", "/readyz", nil); r.code != 200 {
		t.Fatalf("DREADNODE_EGRESS=off must stay ready: %d %s", r.code, r.body)
	}
}
