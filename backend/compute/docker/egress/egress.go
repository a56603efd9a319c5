// Package egress owns the host firewall rules that hold a sandbox's traffic
// out, outside its network namespace, where the sandbox's own root cannot
// undo them. The rules live in one nftables table of their own
// (inet dreadnode), so the host's other rules and Docker's iptables chains
// are untouched: a drop in any table is final, an accept here only ends
// this table's verdict.
//
// Layout (nothing grows with the number of sandboxes in the packet path:
// lookups are hashed sets and verdict maps):
//
//	forward (hook forward): only packets entering from an attached sandbox
//	  bridge (set @bridges); replies of established flows pass; then the
//	  bridge's own chain via the verdict map @nets.
//	n-<bridge>: traffic staying on the bridge is Docker's to judge (ICC);
//	  link-local is dropped; DNS to the host's resolvers (the engine's
//	  embedded DNS forwards from the sandbox's namespace) meets the
//	  sandbox's own chain first, and passes only if that chain has no
//	  verdict on it (a sandbox denying everything reaches no resolver);
//	  private ranges the operator did not allow are dropped, then the
//	  sandbox's own chain via the verdict map @sandboxes keyed by its MAC
//	  address. A packet meets its sandbox's chain at most once.
//	s-<mac>: the sandbox's allowOut (accepted first: it wins) and denyOut.
//	input (hook input): a sandbox bridge reaches no address of the host
//	  itself, only replies to connections the host opened.
//
// Every drop counts in a named counter, read for the metrics.
package egress

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Table is the nftables table (family inet) holding every rule.
const Table = "dreadnode"

// Counter names, one per reason a packet is dropped.
const (
	ReasonLinkLocal = "link_local"
	ReasonPrivate   = "private"
	ReasonHost      = "host"
	ReasonPolicy    = "policy"
	ReasonOffline   = "offline"
)

// counterName is the nft counter of a reason (prefixed: some reasons are
// nft keywords).
func counterName(reason string) string { return "dropped_" + reason }

// Reasons lists the counters in a stable order.
var Reasons = []string{ReasonLinkLocal, ReasonPrivate, ReasonHost, ReasonPolicy, ReasonOffline}

// PrivateRanges are dropped unless the operator allows them: RFC 1918,
// carrier-grade NAT, and IPv6 unique-local addresses.
var PrivateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
}

// Config is the operator's part of the baseline.
type Config struct {
	// AllowPrivate are private ranges sandboxes may reach
	// (DREADNODE_EGRESS_ALLOW_PRIVATE).
	AllowPrivate []netip.Prefix
	// Nameservers are the host's resolvers, reachable on port 53 only.
	Nameservers []netip.Addr
}

// Runner applies an nft script atomically (nft -f -) or runs nft with
// args, returning its output.
type Runner func(ctx context.Context, stdin string, args ...string) (string, error)

// NFT runs the nft binary.
func NFT(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nft", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("nft %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// Firewall edits the table. It is safe for concurrent use and across
// processes: every change is one nft transaction, and the shared parts are
// rewritten whole with the same content by every writer.
type Firewall struct {
	cfg Config
	run Runner
}

// New returns a Firewall applying cfg through run (NFT when nil).
func New(cfg Config, run Runner) *Firewall {
	if run == nil {
		run = NFT
	}
	return &Firewall{cfg: cfg, run: run}
}

func (f *Firewall) apply(ctx context.Context, script string) error {
	_, err := f.run(ctx, script, "-f", "-")
	return err
}

// Install creates the table and rewrites its base chains (idempotent). The
// maps of attached bridges and sandboxes are kept, so a restart never
// leaves a running sandbox unfiltered.
func (f *Firewall) Install(ctx context.Context) error {
	var b strings.Builder
	fmt.Fprintf(&b, "add table inet %s\n", Table)
	for _, r := range Reasons {
		fmt.Fprintf(&b, "add counter inet %s %s\n", Table, counterName(r))
	}
	fmt.Fprintf(&b, "add set inet %s bridges { type ifname; }\n", Table)
	fmt.Fprintf(&b, "add map inet %s nets { type ifname : verdict; }\n", Table)
	fmt.Fprintf(&b, "add map inet %s sandboxes { type ether_addr : verdict; }\n", Table)
	b.WriteString(resolvedSets()) // what the DNS forwarder opened (dns.go)
	fmt.Fprintf(&b, "add set inet %s %s { type ether_addr . mark; size %d; flags dynamic; counter; }\n", Table, dropsSet, dropsSize)
	// priority -1: judged before Docker's own filter chains (priority 0).
	fmt.Fprintf(&b, "add chain inet %s forward { type filter hook forward priority -1; policy accept; }\n", Table)
	fmt.Fprintf(&b, "add chain inet %s input { type filter hook input priority -1; policy accept; }\n", Table)
	fmt.Fprintf(&b, "flush chain inet %s forward\nflush chain inet %s input\n", Table, Table)
	fmt.Fprintf(&b, "add rule inet %s forward iifname != @bridges accept\n", Table)
	fmt.Fprintf(&b, "add rule inet %s forward ct state established,related accept\n", Table)
	fmt.Fprintf(&b, "add rule inet %s forward iifname vmap @nets\n", Table)
	fmt.Fprintf(&b, "add rule inet %s input iifname != @bridges accept\n", Table)
	fmt.Fprintf(&b, "add rule inet %s input ct state established,related accept\n", Table)
	for _, r := range dropRules("", ReasonHost) {
		fmt.Fprintf(&b, "add rule inet %s input %s\n", Table, r)
	}
	if err := f.apply(ctx, b.String()); err != nil {
		return fmt.Errorf("installing the egress rules: %w", err)
	}
	return nil
}

// bridgeName keeps interface names usable as chain names and in scripts.
var bridgeName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,15}$`)

func netChain(bridge string) string { return "n-" + bridge }

// AttachNetwork puts a sandbox bridge under the baseline (idempotent; the
// bridge's chain is rewritten with this process's Config). Nothing leaves an
// offline bridge (the network of sandboxes without internet access): not
// even the engine's DNS forwarding, which queries the host's resolvers
// from the sandbox's own namespace, so external names do not resolve.
func (f *Firewall) AttachNetwork(ctx context.Context, bridge string, offline bool) error {
	return f.attachNetwork(ctx, bridge, offline, nil)
}

// attachNetwork renders a bridge's chain; env, when set, is the allowOut
// of a task environment's network (see AttachEnvironment).
func (f *Firewall) attachNetwork(ctx context.Context, bridge string, offline bool, env *[]netip.Prefix) error {
	if !bridgeName.MatchString(bridge) {
		return fmt.Errorf("bridge name %q is not a usable interface name", bridge)
	}
	c := netChain(bridge)
	var b strings.Builder
	fmt.Fprintf(&b, "add chain inet %s %s\nflush chain inet %s %s\n", Table, c, Table, c)
	rule := func(format string, a ...any) {
		fmt.Fprintf(&b, "add rule inet %s %s %s\n", Table, c, fmt.Sprintf(format, a...))
	}
	rule(`oifname "%s" accept`, bridge) // between containers of the bridge: Docker's ICC setting decides
	drop := func(match, reason string) {
		for _, r := range dropRules(match, reason) {
			rule("%s", r)
		}
	}
	if offline {
		drop("", ReasonOffline)
	}
	drop("ip daddr 169.254.0.0/16", ReasonLinkLocal)
	drop("ip6 daddr fe80::/10", ReasonLinkLocal)
	var ns4, ns6 []string
	seen := map[netip.Addr]bool{}
	for _, a := range f.cfg.Nameservers {
		if seen[a] {
			continue // a duplicate element fails the whole transaction
		}
		seen[a] = true
		if a.Unmap().Is4() {
			ns4 = append(ns4, a.Unmap().String())
		} else {
			ns6 = append(ns6, a.String())
		}
	}
	if env != nil && len(*env) == 0 {
		ns4, ns6 = nil, nil // an environment declaring nothing resolves no external name
	}
	// DNS to the host's resolvers passes for sandboxes without a verdict
	// of their own on it. A sandbox's own chain judges it first (a deny
	// covering the resolver, denyOut 0.0.0.0/0, drops it: deny means deny,
	// DNS included); its chain ends without a verdict otherwise, and the
	// accept that follows applies. Only then the private drop, which a
	// resolver on a private address must get past.
	for _, ns := range []struct {
		family string
		addrs  []string
	}{{"ip", ns4}, {"ip6", ns6}} {
		if len(ns.addrs) == 0 {
			continue
		}
		match := fmt.Sprintf("%s daddr { %s } meta l4proto { tcp, udp } th dport 53", ns.family, strings.Join(ns.addrs, ", "))
		if env == nil {
			rule("%s ether saddr vmap @sandboxes", match)
		}
		rule("%s accept", match)
	}
	allow4, allow6 := split(f.cfg.AllowPrivate)
	priv4, priv6 := split(PrivateRanges)
	drop(except("ip", priv4, allow4), ReasonPrivate)
	drop(except("ip6", priv6, allow6), ReasonPrivate)
	if env != nil {
		environmentRules(*env, rule, drop)
	} else {
		rule("ether saddr vmap @sandboxes")
	}
	fmt.Fprintf(&b, "add element inet %s bridges { \"%s\" }\n", Table, bridge)
	fmt.Fprintf(&b, "add element inet %s nets { \"%s\" : jump %s }\n", Table, bridge, c)
	if err := f.apply(ctx, b.String()); err != nil {
		return fmt.Errorf("attaching bridge %s to the egress rules: %w", bridge, err)
	}
	return nil
}

// DetachNetwork removes a bridge whose network is gone (idempotent).
func (f *Firewall) DetachNetwork(ctx context.Context, bridge string) error {
	if !bridgeName.MatchString(bridge) {
		return nil
	}
	// add-then-delete makes each step succeed whether or not it existed.
	script := fmt.Sprintf(`add element inet %[1]s bridges { "%[2]s" }
delete element inet %[1]s bridges { "%[2]s" }
add element inet %[1]s nets { "%[2]s" : jump %[3]s }
delete element inet %[1]s nets { "%[2]s" }
delete chain inet %[1]s %[3]s
`, Table, bridge, netChain(bridge))
	if _, err := f.run(ctx, "", "list", "chain", "inet", Table, netChain(bridge)); err != nil {
		return nil // no chain: nothing attached
	}
	return f.apply(ctx, script)
}

// except renders "ip daddr != { allowed } ip daddr { ranges }".
func except(family string, ranges, allowed []netip.Prefix) string {
	s := fmt.Sprintf("%s daddr { %s }", family, join(ranges))
	if len(allowed) > 0 {
		s = fmt.Sprintf("%s daddr != { %s } %s", family, join(allowed), s)
	}
	return s
}

func split(ps []netip.Prefix) (v4, v6 []netip.Prefix) {
	for _, p := range ps {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return v4, v6
}

func join(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Masked().String()
	}
	return strings.Join(out, ", ")
}

// Violations reads the drop counters (packets) by reason.
func (f *Firewall) Violations(ctx context.Context) (map[string]uint64, error) {
	out, err := f.run(ctx, "", "list", "counters", "table", "inet", Table)
	if err != nil {
		return nil, err
	}
	return parseCounters(out), nil
}

var counterLine = regexp.MustCompile(`counter (\w+) \{\s*packets (\d+) bytes \d+`)

func parseCounters(out string) map[string]uint64 {
	res := map[string]uint64{}
	for _, m := range counterLine.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.ParseUint(m[2], 10, 64)
		if reason, ok := strings.CutPrefix(m[1], "dropped_"); ok {
			res[reason] = n
		}
	}
	return res
}
