package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/egress"
)

// EgressConfig is the operator's egress settings (DREADNODE_EGRESS,
// DREADNODE_EGRESS_ALLOW_PRIVATE).
type EgressConfig struct {
	// Off runs sandboxes without any egress rule (unsafe; for hosts where
	// the backend cannot install firewall rules).
	Off bool
	// AllowPrivate are private ranges sandboxes may reach.
	AllowPrivate []netip.Prefix
	// Upstreams are the resolvers the DNS forwarder of allowOut's domain
	// names asks (egress/dns.go). Default: the host's, from
	// /etc/resolv.conf (loopback ones included: the forwarder asks from
	// the host's namespace).
	Upstreams []netip.AddrPort
}

// EgressConfigFrom parses DREADNODE_EGRESS (on, the default, or off) and
// DREADNODE_EGRESS_ALLOW_PRIVATE.
func EgressConfigFrom(mode, allowPrivate string) (EgressConfig, error) {
	var c EgressConfig
	switch v := strings.ToLower(mode); v {
	case "", "on":
	case "off":
		c.Off = true
	default:
		return c, fmt.Errorf("DREADNODE_EGRESS: must be on (the default) or off, got %q", v)
	}
	var err error
	c.AllowPrivate, err = egress.ParseAllowPrivate(allowPrivate)
	return c, err
}

// Labels carrying a sandbox's own egress policy, so that adopt after a
// crash and the start-up sweep know its rules.
const (
	labelEgressMAC   = "dev.dreadnode.egress.mac"
	labelEgressAllow = "dev.dreadnode.egress.allow"
	labelEgressDeny  = "dev.dreadnode.egress.deny"
	labelEgressNames = "dev.dreadnode.egress.names"
)

// egressState is the provider's firewall, or why there is none.
type egressState struct {
	fw  *egress.Firewall // nil when off or not installed
	err error            // why the rules could not be installed

	dns *egress.Forwarder // allowOut's domain names (egress_dns.go)
}

// initEgress installs the baseline rules and sweeps rules whose container
// or network is gone. A failure is kept: Ping and Create report it.
func (p *Provider) initEgress() {
	if p.cfg.Egress.Off {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if h := p.cli.DaemonHost(); !strings.HasPrefix(h, "unix://") {
		p.egress.err = fmt.Errorf("the Docker engine at %s is not on this host, and the rules must be installed on the engine's host", h)
		return
	}
	if err := p.sameNetns(ctx); err != nil {
		p.egress.err = err
		return
	}
	ns := p.cfg.egressNameservers
	if ns == nil {
		ns = hostResolvers()
	}
	fw := egress.New(egress.Config{AllowPrivate: p.cfg.Egress.AllowPrivate, Nameservers: ns}, p.cfg.egressRunner)
	if err := fw.Install(ctx); err != nil {
		p.egress.err = err
		return
	}
	p.egress.fw = fw
	_ = p.sweepEgress(ctx) // best effort: leftovers only cost a map entry
	p.startDNS(ctx)
	p.sweepDrops(ctx)
}

// sameNetns checks the backend sees the engine's bridges: rules installed
// in another network namespace (a backend in a container of its own
// network) would filter nothing while looking installed.
func (p *Provider) sameNetns(ctx context.Context) error {
	n, err := p.cli.NetworkInspect(ctx, "bridge", network.InspectOptions{})
	if err != nil || n.Driver != "bridge" {
		return nil // no default bridge to compare with; attach checks each network
	}
	if _, err := net.InterfaceByName(bridgeOf(network.Summary(n))); err != nil {
		return fmt.Errorf("the Docker engine's bridge %s is not in the backend's network namespace (is the backend in a container? run it with network_mode: host and CAP_NET_ADMIN)", bridgeOf(network.Summary(n)))
	}
	return nil
}

// hostResolvers are the resolvers the engine forwards to: those of
// /etc/resolv.conf, or systemd-resolved's upstreams when the host's own
// resolver is its loopback stub (the engine then uses those).
func hostResolvers() []netip.Addr {
	return append(egress.HostNameservers("/etc/resolv.conf"), egress.HostNameservers("/run/systemd/resolve/resolv.conf")...)
}

// egressReady says why sandboxes cannot be filtered (nil: they are, or the
// operator turned filtering off).
func (p *Provider) egressReady() error {
	if p.egress.err == nil {
		return nil
	}
	return compute.Errorf(compute.KindNetwork, "egress", p.egress.err,
		"the egress rules could not be installed, so sandboxes would run unfiltered (%v); run the backend as root with nft installed, or set DREADNODE_EGRESS=off to accept unfiltered sandboxes (unsafe)",
		p.egress.err)
}

// bridgeOf names the host interface of a bridge network.
func bridgeOf(n network.Summary) string {
	if b := n.Options["com.docker.network.bridge.name"]; b != "" {
		return b
	}
	return "br-" + n.ID[:min(12, len(n.ID))]
}

// attachEgress puts a sandbox network under the baseline.
func (p *Provider) attachEgress(ctx context.Context, n network.Summary) error {
	if p.egress.fw == nil {
		return p.egressReady()
	}
	if _, err := net.InterfaceByName(bridgeOf(n)); err != nil {
		return compute.Errorf(compute.KindNetwork, "network", err,
			"the bridge %s of Docker network %s is not in the backend's network namespace, so its egress cannot be filtered; run the backend on the engine's host", bridgeOf(n), n.Name)
	}
	if err := p.egress.fw.AttachNetwork(ctx, bridgeOf(n), n.Internal); err != nil {
		return compute.Errorf(compute.KindNetwork, "network", err, "could not filter the egress of Docker network %s: %v", n.Name, err)
	}
	return nil
}

// FilterNetwork puts another bridge network of this engine (a task
// environment's) under the baseline rules and the task's own policy: its
// containers reach each other and, beyond the bridge, only allowOut (IP
// addresses and CIDR blocks; empty: nothing).
func (p *Provider) FilterNetwork(ctx context.Context, networkID string, allowOut []string) error {
	if p.cfg.Egress.Off {
		return nil
	}
	allow := make([]netip.Prefix, 0, len(allowOut))
	for i, r := range allowOut {
		pfx, ok := egress.ParseRule(r)
		if !ok {
			return compute.Errorf(compute.KindInvalid, "network", nil,
				"network.allowOut.%d: %q is not an IP address or a CIDR block; task environments on Docker reach IP addresses and CIDR blocks only", i, r)
		}
		allow = append(allow, pfx)
	}
	n, err := p.cli.NetworkInspect(ctx, networkID, network.InspectOptions{})
	if err != nil {
		return classify("network", err)
	}
	if p.egress.fw == nil {
		return p.egressReady()
	}
	if _, err := net.InterfaceByName(bridgeOf(network.Summary(n))); err != nil {
		return compute.Errorf(compute.KindNetwork, "network", err,
			"the bridge %s of Docker network %s is not in the backend's network namespace, so its egress cannot be filtered; run the backend on the engine's host", bridgeOf(network.Summary(n)), n.Name)
	}
	if err := p.egress.fw.AttachEnvironment(ctx, bridgeOf(network.Summary(n)), allow); err != nil {
		return compute.Errorf(compute.KindNetwork, "network", err, "could not filter the egress of Docker network %s: %v", n.Name, err)
	}
	// Environment networks come and go with their environments: drop the
	// chains of those gone, so the table does not grow until a restart.
	_ = p.sweepEgress(ctx)
	p.sweepDrops(ctx)
	return nil
}

// policyRules reads the spec's allowOut/denyOut as canonical CIDR blocks
// and allowOut's domain names; field names the first entry the provider
// cannot enforce.
func policyRules(n compute.Network) (allow, deny, names []string, field, reason string) {
	for _, l := range []struct {
		field string
		rules []string
		out   *[]string
	}{{"network.allowOut", n.AllowOut, &allow}, {"network.denyOut", n.DenyOut, &deny}} {
		for i, r := range l.rules {
			if p, ok := egress.ParseRule(r); ok {
				*l.out = append(*l.out, p.String())
				continue
			}
			name, ok := egress.ParseName(r)
			switch {
			case ok && l.field == "network.allowOut":
				names = append(names, name)
				continue
			case ok:
				reason = fmt.Sprintf("%q is a domain name; denyOut takes IP addresses and CIDR blocks (domain names go in allowOut, with denyOut [\"0.0.0.0/0\"] to allow only them)", r)
			default:
				reason = fmt.Sprintf("%q is not an IP address, a CIDR block or a domain name (exact, like api.example.com, or a wildcard of its subdomains, like *.example.com)", r)
			}
			return nil, nil, nil, fmt.Sprintf("%s.%d", l.field, i), reason
		}
	}
	return allow, deny, names, "", ""
}

// CheckNetwork implements compute.NetworkChecker.
func (p *Provider) CheckNetwork(_ string, n compute.Network) (field, reason string) {
	_, _, _, field, reason = policyRules(n)
	return field, reason
}

// egressLabels checks the spec's allowOut/denyOut and records them (with
// the MAC address keying the sandbox's rules) in labels.
func egressLabels(spec compute.Spec, labels map[string]string) error {
	allow, deny, names, field, reason := policyRules(spec.Network)
	if field != "" {
		return compute.Errorf(compute.KindInvalid, "create", nil, "%s: %s", field, reason)
	}
	if len(allow)+len(deny)+len(names) == 0 {
		return nil
	}
	labels[labelEgressMAC] = egress.NewMAC()
	labels[labelEgressAllow] = strings.Join(allow, ",")
	labels[labelEgressDeny] = strings.Join(deny, ",")
	if len(names) > 0 {
		labels[labelEgressNames] = strings.Join(names, ",")
	}
	return nil
}

// egressMAC gives the container the MAC address its rules are keyed on.
// Docker 20.10 applies Config.MacAddress only when the network mode names
// the network (not its id); a duplicate name fails as "ambiguous", which
// Create retries like any network race.
func egressMAC(cfg *container.Config, hc *container.HostConfig, netName string) {
	if mac := cfg.Labels[labelEgressMAC]; mac != "" {
		cfg.MacAddress = mac //nolint:staticcheck // the field of API 1.41, Docker 20.10's
		hc.NetworkMode = container.NetworkMode(netName)
	}
}

// policyOf reads a sandbox's policy back from its labels.
func policyOf(labels map[string]string) egress.Policy {
	var pol egress.Policy
	for _, l := range []struct {
		label string
		out   *[]netip.Prefix
	}{{labelEgressAllow, &pol.Allow}, {labelEgressDeny, &pol.Deny}} {
		for _, r := range strings.Split(labels[l.label], ",") {
			if p, ok := egress.ParseRule(r); ok {
				*l.out = append(*l.out, p)
			}
		}
	}
	pol.Names = namesOf(labels)
	return pol
}

// sandboxEgress installs the sandbox's own rules before it starts, so its
// first packet already meets them.
func (p *Provider) sandboxEgress(ctx context.Context, labels map[string]string) error {
	mac := labels[labelEgressMAC]
	if mac == "" {
		return nil
	}
	if p.egress.fw == nil {
		if p.cfg.Egress.Off {
			return compute.Errorf(compute.KindNetwork, "create", nil,
				"allowOut/denyOut cannot be enforced: egress filtering is off on this backend (DREADNODE_EGRESS=off)")
		}
		return p.egressReady()
	}
	if err := p.egress.fw.SetSandbox(ctx, mac, policyOf(labels)); err != nil {
		return compute.Errorf(compute.KindNetwork, "create", err, "could not apply the sandbox's allowOut/denyOut: %v", err)
	}
	return nil
}

// checkEgressMAC verifies the engine honoured the MAC address the rules are
// keyed on (an engine that ignored it would leave the policy unapplied).
func checkEgressMAC(c container.InspectResponse) error {
	want := c.Config.Labels[labelEgressMAC]
	if want == "" || c.NetworkSettings == nil {
		return nil
	}
	for _, ep := range c.NetworkSettings.Networks {
		if ep != nil && !strings.EqualFold(ep.MacAddress, want) {
			return compute.Errorf(compute.KindNetwork, "create", nil,
				"the Docker engine did not give the sandbox the MAC address its allowOut/denyOut rules are keyed on (got %s); this engine cannot enforce the policy", ep.MacAddress)
		}
	}
	return nil
}

// forgetEgress removes a deleted sandbox's own rules.
func (p *Provider) forgetEgress(ctx context.Context, labels map[string]string) {
	if mac := labels[labelEgressMAC]; mac != "" && p.egress.fw != nil {
		_ = p.egress.fw.RemoveSandbox(ctx, mac) // a leftover is swept at the next start
		if p.egress.dns != nil {
			p.egress.dns.Stop(mac)
		}
	}
}

// sweepEgress removes the rules of sandboxes and networks that no longer
// exist. Rules are listed before containers: a sandbox's rules are
// installed after its container exists, so every rule listed whose
// container is not listed afterwards is truly orphaned.
func (p *Provider) sweepEgress(ctx context.Context) error {
	bridges, macs, err := p.egress.fw.Installed(ctx)
	if err != nil {
		return err
	}
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", labelEgressMAC))})
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, c := range cs {
		live[strings.ToLower(c.Labels[labelEgressMAC])] = true
	}
	for _, mac := range macs {
		if !live[mac] {
			_ = p.egress.fw.RemoveSandbox(ctx, mac)
		}
	}
	if p.egress.dns != nil {
		for _, mac := range p.egress.dns.Serving() {
			if !live[mac] {
				p.egress.dns.Stop(mac)
			}
		}
	}
	nets, err := p.cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return err
	}
	exists := map[string]bool{}
	for _, n := range nets {
		exists[bridgeOf(n)] = true
	}
	for _, b := range bridges {
		if !exists[b] {
			_ = p.egress.fw.DetachNetwork(ctx, b)
		}
	}
	return nil
}

// EgressReady says why sandboxes cannot be filtered (nil: they are, or the
// operator turned filtering off), for the start-up log.
func (p *Provider) EgressReady() error { return p.egressReady() }

// EgressViolations reads the packets dropped by the egress rules, by
// reason (for the metrics). Empty when filtering is off.
func (p *Provider) EgressViolations(ctx context.Context) (map[string]uint64, error) {
	if p.egress.fw == nil {
		return nil, p.egressReady()
	}
	return p.egress.fw.Violations(ctx)
}

// getChecked is get for a freshly started sandbox, refusing (and removing)
// one whose MAC address is not the one its rules are keyed on.
func (p *Provider) getChecked(ctx context.Context, op, id string, labels map[string]string) (compute.Instance, error) {
	if labels[labelEgressMAC] == "" {
		return p.get(ctx, op, id)
	}
	c, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		return compute.Instance{}, classify(op, err)
	}
	if err := checkEgressMAC(c); err != nil {
		p.removeQuietly(id)
		return compute.Instance{}, err
	}
	return fromInspect(c), nil
}
