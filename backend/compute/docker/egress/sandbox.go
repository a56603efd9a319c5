package egress

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
)

// Policy is a sandbox's own part: E2B's semantics, allowOut wins over
// denyOut, and denyOut 0.0.0.0/0 with an allowOut list means only those.
type Policy struct {
	Allow, Deny []netip.Prefix
	// Names are allowOut's domain names (ParseName's form): the addresses
	// the DNS forwarder resolved for them pass (dns.go).
	Names []string
}

// Empty reports whether the policy adds nothing to the baseline.
func (p Policy) Empty() bool { return len(p.Allow) == 0 && len(p.Deny) == 0 && len(p.Names) == 0 }

// ParseRule reads one allowOut/denyOut entry: an IP address or a CIDR
// block. ok is false for anything else (a host name).
func ParseRule(s string) (netip.Prefix, bool) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

// NewMAC returns a random locally administered unicast MAC address: the
// key of a sandbox's rules, chosen before the container exists so its
// rules are in place before its first packet.
func NewMAC() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	b[0] = b[0]&0xfc | 0x02
	return net.HardwareAddr(b).String()
}

var macPattern = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)

// SandboxChain names the chain of the sandbox with this MAC address.
func SandboxChain(mac string) string { return "s-" + strings.ReplaceAll(strings.ToLower(mac), ":", "") }

// SetSandbox installs (or replaces) the rules of the sandbox with this MAC.
func (f *Firewall) SetSandbox(ctx context.Context, mac string, p Policy) error {
	mac = strings.ToLower(mac)
	if !macPattern.MatchString(mac) {
		return fmt.Errorf("MAC address %q is not usable", mac)
	}
	c := SandboxChain(mac)
	var b strings.Builder
	fmt.Fprintf(&b, "add chain inet %s %s\nflush chain inet %s %s\n", Table, c, Table, c)
	if len(p.Names) > 0 { // allowOut wins: the resolved addresses of its names come first
		b.WriteString(resolvedSets())
		fmt.Fprintf(&b, "add rule inet %s %s ether saddr . ip daddr @resolved4 accept\n", Table, c)
		fmt.Fprintf(&b, "add rule inet %s %s ether saddr . ip6 daddr @resolved6 accept\n", Table, c)
	}
	for _, fam := range []struct {
		name        string
		allow, deny []netip.Prefix
	}{{"ip", v4(p.Allow), v4(p.Deny)}, {"ip6", v6(p.Allow), v6(p.Deny)}} {
		if len(fam.allow) > 0 {
			fmt.Fprintf(&b, "add rule inet %s %s %s daddr { %s } accept\n", Table, c, fam.name, join(fam.allow))
		}
		if len(fam.deny) > 0 {
			for _, r := range dropRules(fmt.Sprintf("%s daddr { %s }", fam.name, join(fam.deny)), ReasonPolicy) {
				fmt.Fprintf(&b, "add rule inet %s %s %s\n", Table, c, r)
			}
		}
	}
	fmt.Fprintf(&b, "add element inet %s sandboxes { %s : jump %s }\n", Table, mac, c)
	if err := f.apply(ctx, b.String()); err != nil {
		return fmt.Errorf("installing the egress rules of the sandbox: %w", err)
	}
	return nil
}

// RemoveSandbox deletes the rules of the sandbox with this MAC (idempotent).
func (f *Firewall) RemoveSandbox(ctx context.Context, mac string) error {
	mac = strings.ToLower(mac)
	if !macPattern.MatchString(mac) {
		return nil
	}
	c := SandboxChain(mac)
	if _, err := f.run(ctx, "", "list", "chain", "inet", Table, c); err != nil {
		return nil // never installed, or already removed
	}
	// add-then-delete: the element may be missing after a partial removal.
	return f.apply(ctx, fmt.Sprintf("add element inet %[1]s sandboxes { %[2]s : jump %[3]s }\ndelete element inet %[1]s sandboxes { %[2]s }\ndelete chain inet %[1]s %[3]s\n",
		Table, mac, c))
}

// Installed lists the bridges and sandbox MACs that have rules, for the
// orphan sweep.
func (f *Firewall) Installed(ctx context.Context) (bridges, macs []string, err error) {
	out, err := f.run(ctx, "", "list", "chains", "inet")
	if err != nil {
		return nil, nil, err
	}
	inTable := false
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 3 && fields[0] == "table" {
			inTable = fields[2] == Table
			continue
		}
		if !inTable || len(fields) < 2 || fields[0] != "chain" {
			continue
		}
		switch name := fields[1]; {
		case strings.HasPrefix(name, "n-"):
			bridges = append(bridges, strings.TrimPrefix(name, "n-"))
		case strings.HasPrefix(name, "s-") && len(name) == 14:
			h := name[2:]
			macs = append(macs, strings.Join([]string{h[0:2], h[2:4], h[4:6], h[6:8], h[8:10], h[10:12]}, ":"))
		}
	}
	return bridges, macs, nil
}

func v4(ps []netip.Prefix) []netip.Prefix { a, _ := split(ps); return a }
func v6(ps []netip.Prefix) []netip.Prefix { _, b := split(ps); return b }
