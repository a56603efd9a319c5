package docker

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/miekg/dns"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/egress"
)

// Domain names in allowOut (egress/dns.go): a sandbox whose allowOut names
// domains gets sandboxDNSAddr as the upstream of the engine's embedded DNS,
// a loopback address of its own namespace where the backend's forwarder
// listens on sockets it opened there as the sandbox started. The forwarder
// answers only what the sandbox's policy lets through and opens the
// answers' addresses to that sandbox alone.
//
// A sandbox whose denyOut covers every address (0.0.0.0/0) gets the
// forwarder too, domain names or not: its chain drops DNS to the host's
// resolvers like anything else (egress.AttachNetwork), so the forwarder is
// the only resolver it reaches, and it answers NXDOMAIN at once for every
// name outside allowOut instead of leaving the sandbox's lookups to time
// out.
//
// A sandbox without internet access gets its own loopback as upstream
// instead, with nothing listening: the engine's embedded DNS still answers
// the names of its network, and forwards nothing out of the sandbox's
// namespace (Docker 20.10 forwards the queries of internal networks to the
// host's resolvers from the sandbox's namespace), so no external name
// resolves whatever the routes and rules around it.

// sandboxDNSAddr is where the forwarder listens inside a sandbox with
// domain names in its allowOut (not 127.0.0.11, the engine's own DNS).
var sandboxDNSAddr = netip.MustParseAddrPort("127.0.0.2:53")

// offlineDNS is the upstream of sandboxes without internet access: the
// sandbox's own loopback, where no external resolver can ever be.
const offlineDNS = "127.0.0.1"

// hostUpstreams are the resolvers of the host's /etc/resolv.conf.
func hostUpstreams() []netip.AddrPort {
	cfg, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	port, _ := strconv.Atoi(cfg.Port)
	var out []netip.AddrPort
	for _, s := range cfg.Servers {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.AddrPortFrom(a, uint16(cmp.Or(port, 53))))
		}
	}
	return out
}

// namesOf reads a sandbox's allowOut domain names back from its labels.
func namesOf(labels map[string]string) []string {
	var out []string
	for _, n := range strings.Split(labels[labelEgressNames], ",") {
		if n, ok := egress.ParseName(n); ok {
			out = append(out, n)
		}
	}
	return out
}

// startDNS creates the forwarder and, after a restart, serves again the
// running sandboxes of this deployment it serves (usesForwarder).
func (p *Provider) startDNS(ctx context.Context) {
	ups := p.cfg.Egress.Upstreams
	if len(ups) == 0 {
		ups = hostUpstreams()
	}
	p.egress.dns = egress.NewForwarder(p.egress.fw, ups)
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", labelEgressMAC), filters.Arg("label", labelScope+"="+p.cfg.Scope))})
	if err != nil {
		return
	}
	for _, c := range cs {
		_ = p.serveSandboxDNS(ctx, c.ID, c.Labels) // best effort: one gone meanwhile needs nothing
	}
}

// deniesAll reports whether a sandbox's denyOut covers every IPv4 address.
func deniesAll(labels map[string]string) bool {
	for _, d := range policyOf(labels).Deny {
		if d.Addr().Is4() && d.Bits() == 0 {
			return true
		}
	}
	return false
}

// usesForwarder reports whether an online sandbox resolves through the
// backend's forwarder: it has domain names in its allowOut, or denies
// every address (and so reaches no other resolver).
func usesForwarder(labels map[string]string) bool {
	return labels[labelEgressMAC] != "" && (len(namesOf(labels)) > 0 || deniesAll(labels))
}

// sandboxDNS sets the upstream of the engine's embedded DNS for a sandbox
// without internet access or served by the forwarder (usesForwarder).
func (p *Provider) sandboxDNS(hc *container.HostConfig, labels map[string]string, isolated bool) error {
	switch {
	case isolated:
		hc.DNS = []string{offlineDNS}
	case usesForwarder(labels):
		if p.egress.dns == nil {
			if p.cfg.Egress.Off {
				return compute.Errorf(compute.KindNetwork, "create", nil,
					"allowOut/denyOut cannot be enforced: egress filtering is off on this backend (DREADNODE_EGRESS=off)")
			}
			return p.egressReady()
		}
		hc.DNS = []string{sandboxDNSAddr.Addr().String()}
	}
	return nil
}

// serveSandboxDNS opens the forwarder's sockets in the namespace of a
// started sandbox it serves (usesForwarder; idempotent).
func (p *Provider) serveSandboxDNS(ctx context.Context, id string, labels map[string]string) error {
	names, mac := namesOf(labels), labels[labelEgressMAC]
	if !usesForwarder(labels) || p.egress.dns == nil || labels[labelNetwork] == isolatedValue {
		return nil // an offline sandbox resolves nothing external, allowOut or not
	}
	c, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		return classify("create", err)
	}
	if c.State == nil || c.State.Pid == 0 {
		return nil // not running: served when it runs
	}
	cl := egress.Client{MAC: mac, Names: names, DenyAll: deniesAll(labels)}
	if err := p.egress.dns.ServeIn(strings.ToLower(mac), fmt.Sprintf("/proc/%d/ns/net", c.State.Pid), sandboxDNSAddr, cl); err != nil {
		return compute.Errorf(compute.KindNetwork, "create", err,
			"could not serve DNS to the sandbox under its allowOut/denyOut: %v (the backend must run on the engine's host, in its PID namespace)", err)
	}
	return nil
}
