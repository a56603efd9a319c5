package docker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/egress"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/testhosts"
)

// testResolver is a DNS server on 127.0.0.1 answering the names of zone
// (name -> IPv4 address, TTL 5 s) and NXDOMAIN for others; it counts the
// queries per name. Only the backend's forwarder asks it.
type testResolver struct {
	addr netip.AddrPort
	mu   sync.Mutex
	asks map[string]int
}

func newTestResolver(t *testing.T, zone map[string]string) *testResolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveTestResolver(t, pc, nil, zone)
}

// serveTestResolver is newTestResolver on pc and, when not nil, ln (the
// same server over TCP).
func serveTestResolver(t *testing.T, pc net.PacketConn, ln net.Listener, zone map[string]string) *testResolver {
	t.Helper()
	r := &testResolver{addr: netip.MustParseAddrPort(pc.LocalAddr().String()), asks: map[string]int{}}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.ToLower(strings.TrimSuffix(q.Question[0].Name, "."))
		r.mu.Lock()
		r.asks[name]++
		r.mu.Unlock()
		ip, ok := zone[name]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Question[0].Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
				A: net.ParseIP(ip)})
		}
		_ = w.WriteMsg(m)
	})
	srvs := []*dns.Server{{PacketConn: pc, Handler: h}}
	if ln != nil {
		srvs = append(srvs, &dns.Server{Listener: ln, Handler: h})
	}
	for _, srv := range srvs {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return r
}

func (r *testResolver) asked(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asks[name]
}

// resolve is the address name resolves to inside the sandbox, through
// its normal resolver (the engine's embedded DNS); "" when it does not.
func resolve(t *testing.T, p *Provider, inst compute.Instance, name string) string {
	t.Helper()
	res := exec(t, p, inst, "python3", "-c",
		"import socket,sys\ntry: print(socket.gethostbyname(sys.argv[1]))\nexcept OSError as e: print('error', e, file=sys.stderr)", name)
	return strings.TrimSpace(string(res.Stdout))
}

// askDirectly sends one A query for name to server:53 from the sandbox,
// bypassing the engine's embedded DNS, and returns the answer's rcode
// ("none" when none came).
func askDirectly(t *testing.T, p *Provider, inst compute.Instance, server, name string) string {
	t.Helper()
	res := exec(t, p, inst, "python3", "-c", `import socket,sys
q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + b"".join(bytes([len(l)]) + l.encode() for l in sys.argv[2].split(".")) + b"\x00\x00\x01\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.sendto(q, (sys.argv[1], 53))
try: print(s.recv(4096)[3] & 15)
except OSError as e: print("none", e)`, server, name)
	return strings.TrimSpace(string(res.Stdout))
}

func policySpec(allow ...string) compute.Spec {
	spec := testSpec()
	spec.Network.AllowOut, spec.Network.DenyOut = allow, []string{"0.0.0.0/0"}
	return spec
}

// TestEgressDomainNames: allowOut by domain name, matched on the DNS
// answers of the backend's forwarder (its upstream is a test resolver on
// 127.0.0.1; the names map to two test hosts A and B of a private range
// the backend allows). With denyOut 0.0.0.0/0:
//   - allowOut allowed.test: A is refused until the sandbox resolves
//     allowed.test, then reachable; other.test does not resolve (never
//     asked upstream) and B is refused by IP;
//   - another sandbox with the same policy that has not resolved the
//     name does not reach A: a name opens its address to its resolver only;
//   - allowOut *.allowed.test: api.allowed.test resolves and its host B
//     is reachable, allowed.test itself does not resolve and A is refused.
//
// The control (a sandbox without a policy reaches both hosts) shows the
// hosts are reachable at all.
func TestEgressDomainNames(t *testing.T) {
	prefix, a, b, port := testHosts(t)
	r := newTestResolver(t, map[string]string{"allowed.test": a, "other.test": b, "api.allowed.test": b})
	p := newProvider(t, Config{Network: testNetwork + "-egress-dns",
		Egress: EgressConfig{AllowPrivate: []netip.Prefix{prefix}, Upstreams: []netip.AddrPort{r.addr}}})

	open := mustCreate(t, p, testSpec())
	if !canConnect(t, p, open, a, port) || !canConnect(t, p, open, b, port) {
		t.Fatal("control: a sandbox without a policy must reach both test hosts")
	}

	s1 := mustCreate(t, p, policySpec("allowed.test"))
	s2 := mustCreate(t, p, policySpec("allowed.test"))
	if canConnect(t, p, s1, a, port) {
		t.Fatalf("%s was reachable before allowed.test was resolved: the address must be opened by the DNS answer", a)
	}
	if got := resolve(t, p, s1, "allowed.test"); got != a {
		t.Fatalf("allowed.test resolved to %q in the sandbox allowing it, want %s", got, a)
	}
	if !canConnect(t, p, s1, a, port) {
		t.Errorf("after resolving allowed.test the sandbox does not reach %s", a)
	}
	if got := resolve(t, p, s1, "other.test"); got != "" {
		t.Errorf("other.test resolved to %q in a sandbox allowing only allowed.test", got)
	}
	if n := r.asked("other.test"); n != 0 {
		t.Errorf("the forwarder asked upstream for other.test %d times; a name outside allowOut must not leave", n)
	}
	if canConnect(t, p, s1, b, port) {
		t.Errorf("the sandbox allowing only allowed.test reached %s by IP", b)
	}
	if canConnect(t, p, s2, a, port) {
		t.Errorf("the second sandbox reached %s, which only the first resolved", a)
	}
	if got := resolve(t, p, s2, "allowed.test"); got != a || !canConnect(t, p, s2, a, port) {
		t.Errorf("the second sandbox, once it resolved allowed.test (%q), must reach %s", got, a)
	}

	// Asked directly (not through the engine's DNS), the forwarder in the
	// sandbox's namespace holds to the same policy; and the sandbox still
	// reaches no port of the host.
	if rcode := askDirectly(t, p, s1, sandboxDNSAddr.Addr().String(), "other.test"); rcode != "3" {
		t.Errorf("asked directly, the forwarder answered other.test to a sandbox allowing only allowed.test (rcode %s, want 3, NXDOMAIN)", rcode)
	}
	gw, _ := gatewayOf(t, p, testNetwork+"-egress-dns")
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	if canConnect(t, p, s1, gw, testhosts.AcceptAll(t, ln)) {
		t.Errorf("a sandbox with domain names reached the host's %s", gw)
	}

	wild := mustCreate(t, p, policySpec("*.allowed.test"))
	if got := resolve(t, p, wild, "api.allowed.test"); got != b {
		t.Fatalf("api.allowed.test resolved to %q under *.allowed.test, want %s", got, b)
	}
	if !canConnect(t, p, wild, b, port) {
		t.Errorf("after resolving api.allowed.test the sandbox does not reach %s", b)
	}
	if got := resolve(t, p, wild, "allowed.test"); got != "" {
		t.Errorf("*.allowed.test let the apex allowed.test resolve (to %q)", got)
	}
	if canConnect(t, p, wild, a, port) {
		t.Errorf("the sandbox allowing *.allowed.test reached %s", a)
	}
}

// TestEgressOfflineResolvesNothing: a sandbox without internet access
// resolves no external name, even one its allowOut names, on a backend
// where the name resolves (an online sandbox allowing it resolves it
// through the same backend), and no forwarder serves it. The
// engine's embedded DNS has only the sandbox's own loopback as upstream,
// so it forwards nothing out of the sandbox's namespace.
func TestEgressOfflineResolvesNothing(t *testing.T) {
	prefix, a, _, _ := testHosts(t)
	r := newTestResolver(t, map[string]string{"allowed.test": a})
	p := newProvider(t, Config{Network: testNetwork + "-egress-dns-offline",
		Egress: EgressConfig{AllowPrivate: []netip.Prefix{prefix}, Upstreams: []netip.AddrPort{r.addr}}})
	online := mustCreate(t, p, policySpec("allowed.test"))
	if got := resolve(t, p, online, "allowed.test"); got != a {
		t.Fatalf("control: allowed.test must resolve on this backend, got %q", got)
	}
	spec := policySpec("allowed.test") // offline wins over allowOut
	spec.Network.AllowInternetAccess = ptr(false)
	offline := mustCreate(t, p, spec)
	if got := resolve(t, p, offline, "allowed.test"); got != "" {
		t.Errorf("an offline sandbox resolved allowed.test to %s", got)
	}
	if rcode := askDirectly(t, p, offline, sandboxDNSAddr.Addr().String(), "allowed.test"); !strings.HasPrefix(rcode, "none") {
		t.Errorf("a forwarder answers inside the offline sandbox (rcode %s)", rcode)
	}
	// Where the engine's embedded DNS forwards: a listener inside the
	// sandbox, on its own loopback, receives the query (nothing answers
	// it), so it went nowhere outside the sandbox's namespace.
	res := exec(t, p, offline, "python3", "-c", `import socket,threading
l = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); l.bind(("127.0.0.1", 53)); l.settimeout(8)
def ask():
    try: socket.gethostbyname("allowed.test")
    except OSError: pass
threading.Thread(target=ask, daemon=True).start()
try: print("asked", l.recv(512)[12:].split(b"\0")[0])
except socket.timeout: print("nothing")`)
	if out := strings.TrimSpace(string(res.Stdout)); !strings.Contains(out, "allowed") {
		t.Errorf("the offline sandbox's embedded DNS did not ask its own loopback (got %q %s): it forwards elsewhere", out, res.Stderr)
	}
	c, err := p.cli.ContainerInspect(context.Background(), offline.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range c.HostConfig.DNS {
		if a, err := netip.ParseAddr(ns); err != nil || !a.IsLoopback() {
			t.Errorf("the offline sandbox's embedded DNS forwards to %s, outside its namespace", ns)
		}
	}
	if len(c.HostConfig.DNS) == 0 {
		t.Errorf("the offline sandbox's embedded DNS forwards to the host's resolvers")
	}
}

// TestEgressDomainNameValidation: allowOut takes domain names and
// wildcards, denyOut does not; anything else is refused by field.
func TestEgressDomainNameValidation(t *testing.T) {
	p := newProvider(t, Config{})
	for _, c := range []struct {
		allow, deny []string
		field       string
	}{
		{allow: []string{"10.0.0.1", "exa mple.com"}, field: "network.allowOut.1"},
		{allow: []string{"*.*.example.com"}, field: "network.allowOut.0"},
		{allow: []string{"localhost"}, field: "network.allowOut.0"},
		{deny: []string{"10.0.0.0/8", "example.com"}, field: "network.denyOut.1"},
	} {
		field, _ := p.CheckNetwork("base", compute.Network{AllowOut: c.allow, DenyOut: c.deny})
		if field != c.field {
			t.Errorf("allowOut %q denyOut %q: refused field %q, want %q", c.allow, c.deny, field, c.field)
		}
	}
	if field, reason := p.CheckNetwork("base", compute.Network{AllowOut: []string{"api.example.com", "*.example.com."}}); field != "" {
		t.Errorf("domain names in allowOut must be accepted: %s %s", field, reason)
	}
}

// TestEgressDomainNamesAfterRestart: a backend that starts again serves the
// running sandboxes with domain names it finds (their forwarder's sockets
// went with the old process), and a deleted sandbox's sockets are closed.
func TestEgressDomainNamesAfterRestart(t *testing.T) {
	prefix, a, _, port := testHosts(t)
	r := newTestResolver(t, map[string]string{"allowed.test": a})
	cfg := Config{Network: testNetwork + "-egress-dns-restart",
		Egress:      EgressConfig{AllowPrivate: []netip.Prefix{prefix}, Upstreams: []netip.AddrPort{r.addr}},
		AgentBinary: agentbin.Path(t), AgentTokenSeed: testAgentSeed} // New, unlike newProvider, injects only what it is given (the seed: both are one deployment's backends)
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spec := policySpec("allowed.test")
	inst, err := first.Create(context.Background(), spec)
	_ = first.Close() // the old process ends: its sockets close
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, cfg)
	cleanupRecord(t, p, spec.RecordID)
	if got := resolve(t, p, inst, "allowed.test"); got != a || !canConnect(t, p, inst, a, port) {
		t.Fatalf("after a restart the sandbox resolved allowed.test to %q and must reach %s", got, a)
	}
	if len(p.egress.dns.Serving()) != 1 {
		t.Fatalf("the restarted backend serves %v", p.egress.dns.Serving())
	}
	if err := p.Delete(context.Background(), inst.Ref); err != nil {
		t.Fatal(err)
	}
	if n := len(p.egress.dns.Serving()); n != 0 {
		t.Errorf("Delete left the forwarder serving %d sandboxes", n)
	}
}

// askDirectlyTCP is askDirectly over TCP ("none" when no answer came: a
// dropped connection).
func askDirectlyTCP(t *testing.T, p *Provider, inst compute.Instance, server, name string) string {
	t.Helper()
	res := exec(t, p, inst, "python3", "-c", `import socket,sys
q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + b"".join(bytes([len(l)]) + l.encode() for l in sys.argv[2].split(".")) + b"\x00\x00\x01\x00\x01"
try:
    s = socket.create_connection((sys.argv[1], 53), timeout=3)
    s.sendall(len(q).to_bytes(2, "big") + q)
    print(s.recv(4096)[5] & 15)
except OSError as e: print("none", e)`, server, name)
	return strings.TrimSpace(string(res.Stdout))
}

// TestEgressDenyAllReachesNoHostResolver: the "host's resolver" is a test
// DNS server of our own (UDP and TCP port 53 on a test host of a private
// range the backend does not allow: only the resolver rule lets sandboxes
// reach it, as it does the host's private resolvers). A sandbox without a
// policy queries it (the control: the resolver rule is what lets it
// through); a sandbox with denyOut 0.0.0.0/0 does not, over UDP or TCP,
// nor one that also allows a domain name, which reaches only the backend's
// forwarder (NXDOMAIN for names outside its allowOut); the forwarder is
// the only resolver of both (for the one without names, NXDOMAIN for
// every name, answered without asking upstream). The queries never
// reach the resolver (counted there per name). In the installed bridge
// chain, every port-53 accept comes after the sandbox's own verdict.
func TestEgressDenyAllReachesNoHostResolver(t *testing.T) {
	prefix := netip.MustParsePrefix(fmt.Sprintf("10.254.%d.0/24", 100+rand.IntN(100)))
	ns, addrs := testhosts.Hosts(t, prefix, 1)
	resolverAddr := addrs[0]
	var pc net.PacketConn
	var ln net.Listener
	testhosts.In(t, ns, func() (err error) {
		if pc, err = net.ListenPacket("udp", net.JoinHostPort(resolverAddr, "53")); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", net.JoinHostPort(resolverAddr, "53"))
		return err
	})
	hostResolver := serveTestResolver(t, pc, ln, map[string]string{"open.test": "192.0.2.1", "open-tcp.test": "192.0.2.1"})
	upstream := newTestResolver(t, map[string]string{"allowed.test": "192.0.2.2"}) // the forwarder's
	name := testNetwork + "-egress-dns-deny"
	p := newProvider(t, Config{Network: name, Egress: EgressConfig{Upstreams: []netip.AddrPort{upstream.addr}},
		egressNameservers: []netip.Addr{netip.MustParseAddr(resolverAddr)}})

	open := mustCreate(t, p, testSpec())
	if rcode := askDirectly(t, p, open, resolverAddr, "open.test"); rcode != "0" {
		t.Fatalf("control: a sandbox without a policy must query the host's resolver %s over UDP (rcode %s)", resolverAddr, rcode)
	}
	if rcode := askDirectlyTCP(t, p, open, resolverAddr, "open-tcp.test"); rcode != "0" {
		t.Fatalf("control: a sandbox without a policy must query the host's resolver %s over TCP (rcode %s)", resolverAddr, rcode)
	}

	deny := mustCreate(t, p, policySpec())
	if rcode := askDirectly(t, p, deny, resolverAddr, "deny.test"); !strings.HasPrefix(rcode, "none") {
		t.Errorf("a sandbox with denyOut 0.0.0.0/0 queried the host's resolver over UDP (rcode %s)", rcode)
	}
	if rcode := askDirectlyTCP(t, p, deny, resolverAddr, "deny-tcp.test"); !strings.HasPrefix(rcode, "none") {
		t.Errorf("a sandbox with denyOut 0.0.0.0/0 queried the host's resolver over TCP (rcode %s)", rcode)
	}

	// Its only resolver is the backend's forwarder, which answers
	// NXDOMAIN for every name (none is allowed): lookups fail at once.
	if rcode := askDirectly(t, p, deny, sandboxDNSAddr.Addr().String(), "open.test"); rcode != "3" {
		t.Errorf("the forwarder of a sandbox denying everything answered open.test with rcode %s, want 3 (NXDOMAIN)", rcode)
	}
	if got := resolve(t, p, deny, "open.test"); got != "" {
		t.Errorf("a sandbox denying everything resolved open.test to %s", got)
	}
	c, err := p.cli.ContainerInspect(context.Background(), deny.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.HostConfig.DNS; len(got) != 1 || got[0] != sandboxDNSAddr.Addr().String() {
		t.Errorf("the embedded DNS of a sandbox denying everything forwards to %v, want only the forwarder %s", got, sandboxDNSAddr.Addr())
	}

	named := mustCreate(t, p, policySpec("allowed.test"))
	if rcode := askDirectly(t, p, named, resolverAddr, "allowed.test"); !strings.HasPrefix(rcode, "none") {
		t.Errorf("a sandbox with denyOut 0.0.0.0/0 and a domain name queried the host's resolver over UDP (rcode %s)", rcode)
	}
	if rcode := askDirectlyTCP(t, p, named, resolverAddr, "named-tcp.test"); !strings.HasPrefix(rcode, "none") {
		t.Errorf("a sandbox with denyOut 0.0.0.0/0 and a domain name queried the host's resolver over TCP (rcode %s)", rcode)
	}
	if rcode := askDirectly(t, p, named, sandboxDNSAddr.Addr().String(), "deny.test"); rcode != "3" {
		t.Errorf("the forwarder answered deny.test, outside the sandbox's allowOut (rcode %s, want 3, NXDOMAIN)", rcode)
	}
	if got := resolve(t, p, named, "allowed.test"); got != "192.0.2.2" {
		t.Errorf("allowed.test resolved to %q through the forwarder, want 192.0.2.2", got)
	}
	if n := upstream.asked("open.test") + upstream.asked("deny.test"); n != 0 {
		t.Errorf("the forwarder asked upstream %d times for names no sandbox allows", n)
	}
	for _, n := range []string{"deny.test", "deny-tcp.test", "allowed.test", "named-tcp.test"} {
		if k := hostResolver.asked(n); k != 0 {
			t.Errorf("the host's resolver was asked %s %d times by a sandbox denying everything", n, k)
		}
	}

	_, bridge := gatewayOf(t, p, name)
	chain := nftList(t, "chain", "inet", egress.Table, "n-"+bridge)
	verdict := -1
	for i, line := range strings.Split(chain, "\n") {
		switch {
		case strings.Contains(line, "vmap @sandboxes") && verdict < 0:
			verdict = i
		case strings.Contains(line, "dport 53") && strings.HasSuffix(strings.TrimSpace(line), "accept") && verdict < 0:
			t.Errorf("the bridge's chain accepts port 53 before the sandbox's own verdict (line %d):\n%s", i, chain)
		}
	}
	if !strings.Contains(chain, resolverAddr) {
		t.Errorf("the bridge's chain does not name the test resolver %s:\n%s", resolverAddr, chain)
	}
}
