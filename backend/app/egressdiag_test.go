package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/containment"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/testhosts"
)

// A sandbox that tries an address its denyOut refuses, and one that tries
// the host's address on its bridge, each show it in their own diagnostic
// (an egress line the reconciler writes from the rules' per-sender counts),
// while the sandbox stays running; the address it may reach adds nothing.
// Deleting the sandbox forgets its counts.
func TestEgressViolationsInDiagnostic(t *testing.T) {
	prefix := netip.MustParsePrefix("10.254.43.0/24")
	hosts, port := testhosts.Start(t, prefix, 2)
	netName := egressNetwork(t)
	ta := newTestApp(t, func(c *Config) {
		c.DockerNetwork = netName
		c.DockerEgress.AllowPrivate = []netip.Prefix{prefix}
		c.ObserveEvery = 200 * time.Millisecond
		withAdmin(c)
	})
	cli := dockertest.Client(t)
	ctx := context.Background()
	connects := func(id, ip string, port int) bool {
		t.Helper()
		cs := ta.containersOf(id)
		if len(cs) != 1 {
			t.Fatalf("sandbox %s has containers %v", id, cs)
		}
		out, _ := containment.Exec(ctx, cli, cs[0].ID, "python3", "-c",
			"import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2); print('open')", ip, fmt.Sprint(port))
		return strings.Contains(out, "open")
	}
	diagnostic := func(id string) string {
		d, _ := ta.req("GET", "/sandboxes/"+id, nil).json(t)["diagnostic"].(string)
		return d
	}

	denied, _ := ta.create(map[string]any{"network": map[string]any{"denyOut": []string{hosts[0]}}})
	plain, _ := ta.create(map[string]any{})
	ta.waitState(denied, time.Minute, "running")
	ta.waitState(plain, time.Minute, "running")

	if !connects(denied, hosts[1], port) {
		t.Fatalf("control: the sandbox must reach %s, which its denyOut does not name", hosts[1])
	}
	if connects(denied, hosts[0], port) {
		t.Fatalf("denyOut %s: the sandbox reached it", hosts[0])
	}
	n, err := cli.NetworkInspect(ctx, netName, network.InspectOptions{})
	if err != nil || len(n.IPAM.Config) == 0 {
		t.Fatalf("inspect %s: %v", netName, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(n.IPAM.Config[0].Gateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if connects(plain, n.IPAM.Config[0].Gateway, ln.Addr().(*net.TCPAddr).Port) {
		t.Fatal("a sandbox reached the host's address on its bridge")
	}

	poll.Until(t, 30*time.Second, 100*time.Millisecond, func() error {
		if d := diagnostic(denied); !strings.Contains(d, "egress: ") || !strings.Contains(d, "by policy (allowOut/denyOut)") {
			return fmt.Errorf("the denied sandbox's diagnostic is %q", d)
		}
		if d := diagnostic(plain); !strings.Contains(d, "egress: ") || !strings.Contains(d, "to the host") {
			return fmt.Errorf("the sandbox that tried the host has diagnostic %q", d)
		}
		return nil
	})
	if d := diagnostic(denied); strings.Contains(d, "to the host") {
		t.Errorf("one sandbox's violations show in another's diagnostic: %q", d)
	}
	if s := ta.req("GET", "/sandboxes/"+denied, nil).json(t); s["state"] != "running" {
		t.Errorf("a violation must not end the sandbox: %v", s)
	}
	m := string(ta.reqKey(testAdminKey, "GET", "/metrics", nil).body)
	for _, want := range []string{`dreadnode_egress_violating_containers{reason="policy"}`, `dreadnode_egress_violating_containers{reason="host"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	cs := ta.containersOf(denied)
	in, err := cli.ContainerInspect(ctx, cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	mac := in.NetworkSettings.Networks[netName].MacAddress
	if r := ta.req("DELETE", "/sandboxes/"+denied, nil); r.code != 204 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	ta.waitGone(denied, time.Minute)
	if out, err := exec.Command("nft", "list", "set", "inet", "dreadnode", "drops").CombinedOutput(); err != nil || strings.Contains(string(out), mac) {
		t.Errorf("the deleted sandbox's counts (MAC %s) are still kept: %v\n%s", mac, err, out)
	}
}
