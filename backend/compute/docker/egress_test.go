package docker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	osexec "os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/egress"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/testhosts"
)

// canConnect reports whether the sandbox opens a TCP connection to ip:port
// (a drop shows as a timeout).
func canConnect(t *testing.T, p *Provider, inst compute.Instance, ip string, port int) bool {
	t.Helper()
	res := exec(t, p, inst, "python3", "-c",
		"import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)", ip, strconv.Itoa(port))
	return res.ExitCode == 0
}

// gatewayOf is the host's address on the bridge network name.
func gatewayOf(t *testing.T, p *Provider, name string) (gateway, bridge string) {
	t.Helper()
	ctx := context.Background()
	id, err := p.ensureNetwork(ctx, name, strings.HasSuffix(name, "-isolated"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.cli.NetworkInspect(ctx, id, network.InspectOptions{})
	if err != nil || len(n.IPAM.Config) == 0 {
		t.Fatalf("inspect network %s: %v", name, err)
	}
	return n.IPAM.Config[0].Gateway, "br-" + n.ID[:12]
}

func nftList(t *testing.T, args ...string) string {
	t.Helper()
	out, err := osexec.Command("nft", append([]string{"list"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list %v: %v: %s", args, err, out)
	}
	return string(out)
}

// TestEgressBaselineBlocksTheHost: a default sandbox reaches no address
// of the host (a listener on its bridge's gateway address), and the
// link-local range is dropped on its bridge (asserted on the installed
// rules: no packet is ever sent there). The same sandbox on a backend with
// DREADNODE_EGRESS=off reaches the listener: the rules are what stops it.
func TestEgressBaselineBlocksTheHost(t *testing.T) {
	off := newProvider(t, Config{Network: testNetwork + "-unfiltered", Egress: EgressConfig{Off: true}})
	gw0, _ := gatewayOf(t, off, testNetwork+"-unfiltered")
	ln0, err := net.Listen("tcp", net.JoinHostPort(gw0, "0"))
	if err != nil {
		t.Fatal(err)
	}
	if !canConnect(t, off, mustCreate(t, off, testSpec()), gw0, testhosts.AcceptAll(t, ln0)) {
		t.Fatal("control: without egress rules a sandbox must reach the host's bridge address (else this test proves nothing)")
	}

	p := newProvider(t, Config{Network: testNetwork + "-egress"})
	gw, bridge := gatewayOf(t, p, testNetwork+"-egress")
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := testhosts.AcceptAll(t, ln)
	before, err := p.EgressViolations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	inst := mustCreate(t, p, testSpec())
	if canConnect(t, p, inst, gw, port) {
		t.Fatalf("a sandbox reached the host's address %s:%d", gw, port)
	}
	after, err := p.EgressViolations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after[egress.ReasonHost] <= before[egress.ReasonHost] {
		t.Errorf("the host counter did not count the drop: before %v, after %v", before, after)
	}

	if set := nftList(t, "set", "inet", egress.Table, "bridges"); !strings.Contains(set, `"`+bridge+`"`) {
		t.Errorf("bridge %s is not under the rules:\n%s", bridge, set)
	}
	chain := nftList(t, "chain", "inet", egress.Table, "n-"+bridge)
	for _, want := range []string{`ip daddr 169.254.0.0/16 counter name "dropped_link_local" drop`, `ip6 daddr fe80::/10 counter name "dropped_link_local" drop`,
		`ip daddr { 10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12, 192.168.0.0/16 } counter name "dropped_private" drop`} {
		if !strings.Contains(chain, want) {
			t.Errorf("the bridge's chain lacks %q:\n%s", want, chain)
		}
	}
	if in := nftList(t, "chain", "inet", egress.Table, "input"); !strings.Contains(in, `counter name "dropped_host" drop`) {
		t.Errorf("the input chain does not drop sandbox traffic to the host:\n%s", in)
	}
}

// testHosts serves hosts A and B of a private /24 of its own
// (testhosts.Start), removed at the end of the test. Sandboxes reach them
// through the host's forwarding, as they would machines of the operator's
// network.
func testHosts(t *testing.T) (prefix netip.Prefix, a, b string, port int) {
	t.Helper()
	prefix = netip.MustParsePrefix(fmt.Sprintf("10.254.%d.0/24", 100+rand.IntN(100)))
	hosts, port := testhosts.Start(t, prefix, 2)
	return prefix, hosts[0], hosts[1], port
}

// TestEgressAllowDenyOut: on a backend allowing the test hosts' private
// range, a default sandbox reaches both hosts (the control), denyOut of
// host A's address blocks A while B stays reachable, and denyOut
// 0.0.0.0/0 with allowOut B lets only B through. A backend not allowing
// the range reaches neither. Delete removes the sandbox's rules.
func TestEgressAllowDenyOut(t *testing.T) {
	prefix, a, b, port := testHosts(t)
	p := newProvider(t, Config{Network: testNetwork + "-egress-policy", Egress: EgressConfig{AllowPrivate: []netip.Prefix{prefix}}})

	open := mustCreate(t, p, testSpec())
	if !canConnect(t, p, open, a, port) || !canConnect(t, p, open, b, port) {
		t.Fatal("control: a sandbox without a policy must reach both test hosts of an allowed private range")
	}

	spec := testSpec()
	spec.Network.DenyOut = []string{a}
	denied := mustCreate(t, p, spec)
	if canConnect(t, p, denied, a, port) {
		t.Errorf("denyOut %s: the sandbox still reached it", a)
	}
	if !canConnect(t, p, denied, b, port) {
		t.Errorf("denyOut %s: the sandbox lost %s too", a, b)
	}

	spec = testSpec()
	spec.Network.DenyOut, spec.Network.AllowOut = []string{"0.0.0.0/0"}, []string{b + "/32"}
	only := mustCreate(t, p, spec)
	if canConnect(t, p, only, a, port) || !canConnect(t, p, only, b, port) {
		t.Errorf("denyOut 0.0.0.0/0 with allowOut %s must reach only %s", b, b)
	}

	c, err := p.cli.ContainerInspect(context.Background(), only.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	chain := egress.SandboxChain(c.Config.Labels[labelEgressMAC])
	if _, err := osexec.Command("nft", "list", "chain", "inet", egress.Table, chain).CombinedOutput(); err != nil {
		t.Fatalf("the sandbox's chain %s is missing: %v", chain, err)
	}
	if err := p.Delete(context.Background(), only.Ref); err != nil {
		t.Fatal(err)
	}
	if out, err := osexec.Command("nft", "list", "chain", "inet", egress.Table, chain).CombinedOutput(); err == nil {
		t.Errorf("Delete left the sandbox's chain behind:\n%s", out)
	}

	strict := newProvider(t, Config{Network: testNetwork + "-egress-strict"})
	if canConnect(t, strict, mustCreate(t, strict, testSpec()), a, port) {
		t.Errorf("a backend that did not allow %s must not reach %s", prefix, a)
	}
}

// TestEgressOfflineSandbox: a sandbox without internet access reaches no
// host port (a listener on its internal network's gateway address) and
// nothing beyond its bridge, even a private range the operator allowed;
// its bridge's chain drops everything that leaves it, the engine's DNS
// forwarding included (asserted on the installed rule).
func TestEgressOfflineSandbox(t *testing.T) {
	prefix, a, _, port := testHosts(t)
	name := testNetwork + "-egress-offline"
	p := newProvider(t, Config{Network: name, Egress: EgressConfig{AllowPrivate: []netip.Prefix{prefix}}})
	gw, bridge := gatewayOf(t, p, name+"-isolated")
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	hostPort := testhosts.AcceptAll(t, ln)
	spec := testSpec()
	spec.Network.AllowInternetAccess = ptr(false)
	inst := mustCreate(t, p, spec)
	if canConnect(t, p, inst, gw, hostPort) {
		t.Errorf("an offline sandbox reached the host's address %s:%d", gw, hostPort)
	}
	if canConnect(t, p, inst, a, port) {
		t.Errorf("an offline sandbox reached %s", a)
	}
	chain := nftList(t, "chain", "inet", egress.Table, "n-"+bridge)
	if !strings.Contains(chain, `counter name "dropped_offline" drop`) {
		t.Errorf("the offline bridge's chain does not drop what leaves it:\n%s", chain)
	}
}

// BenchmarkCreateRunningWithPolicy is BenchmarkCreateRunning for a sandbox
// with allowOut/denyOut: its own chain is installed before it starts.
func BenchmarkCreateRunningWithPolicy(b *testing.B) {
	benchCreate(b, newProvider(b, Config{}), func(spec *compute.Spec) {
		spec.Network.DenyOut, spec.Network.AllowOut = []string{"0.0.0.0/0"}, []string{"192.0.2.0/24"}
	})
}

// BenchmarkCreateRunningWithDomainPolicy is BenchmarkCreateRunningWithPolicy
// with a domain name in allowOut: the forwarder's sockets are opened in the
// sandbox's namespace as it starts.
func BenchmarkCreateRunningWithDomainPolicy(b *testing.B) {
	benchCreate(b, newProvider(b, Config{}), func(spec *compute.Spec) {
		spec.Network.DenyOut, spec.Network.AllowOut = []string{"0.0.0.0/0"}, []string{"192.0.2.0/24", "allowed.test"}
	})
}

// BenchmarkCreateRunningUnfiltered is BenchmarkCreateRunning with
// DREADNODE_EGRESS=off: the cost of the rules on a default create.
func BenchmarkCreateRunningUnfiltered(b *testing.B) {
	benchCreate(b, newProvider(b, Config{Network: testNetwork + "-unfiltered", Egress: EgressConfig{Off: true}}))
}

// TestEgressSweepsOrphans: at start-up the rules of a sandbox whose
// container is gone, and of a bridge whose network is gone, are removed;
// those of a live sandbox stay.
func TestEgressSweepsOrphans(t *testing.T) {
	p := newProvider(t, Config{Network: testNetwork + "-egress-sweep"})
	spec := testSpec()
	spec.Network.DenyOut = []string{"192.0.2.0/24"}
	live := mustCreate(t, p, spec)
	c, err := p.cli.ContainerInspect(context.Background(), live.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	liveChain := egress.SandboxChain(c.Config.Labels[labelEgressMAC])

	ctx := context.Background()
	orphanMAC, orphanBridge := egress.NewMAC(), "br-0rphan"+randomHex(2)
	if err := p.egress.fw.SetSandbox(ctx, orphanMAC, egress.Policy{Deny: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}); err != nil {
		t.Fatal(err)
	}
	if err := p.egress.fw.AttachNetwork(ctx, orphanBridge, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.egress.fw.RemoveSandbox(ctx, orphanMAC)
		_ = p.egress.fw.DetachNetwork(ctx, orphanBridge)
	})

	newProvider(t, Config{Network: testNetwork + "-egress-sweep"}) // a restart sweeps
	bridges, macs, err := p.egress.fw.Installed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chains := map[string]bool{}
	for _, m := range macs {
		chains[egress.SandboxChain(m)] = true
	}
	if chains[egress.SandboxChain(orphanMAC)] || slices.Contains(bridges, orphanBridge) {
		t.Errorf("orphans left: sandbox chains %v, bridges %v", macs, bridges)
	}
	if !chains[liveChain] {
		t.Errorf("the live sandbox's chain %s was swept: %v", liveChain, macs)
	}
}
