package events

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
)

// Webhook targets follow the sandboxes' egress rules: no loopback,
// link-local (the cloud metadata service), private, CGNAT, multicast,
// unspecified or other special-purpose address (IANA's registries), unless the operator allows private targets
// (DREADNODE_WEBHOOK_ALLOW_PRIVATE=true). Checked at registration and again
// on every connection (DNS can change), on the address actually dialled.

var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// specialPurpose are the ranges of IANA's IPv4 and IPv6 Special-Purpose
// Address Registries that are not globally reachable unicast, beyond those
// the netip predicates already name: a webhook never goes there. The
// translation ranges (NAT64, 6to4, Teredo) are here because they embed an
// IPv4 address a gateway would reach for us, a private one included.
var specialPurpose = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation (TEST-NET-1)
		"192.88.99.0/24",  // 6to4 relay anycast
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation (TEST-NET-2)
		"203.0.113.0/24",  // documentation (TEST-NET-3)
		"240.0.0.0/4",     // reserved, and the limited broadcast address
		"::/96",           // IPv4-compatible (deprecated)
		"64:ff9b::/96",    // NAT64, well-known prefix
		"64:ff9b:1::/48",  // NAT64, local use
		"100::/64",        // discard-only
		"2001::/23",       // IETF protocol assignments (Teredo, benchmarking, ORCHID)
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4
		"3fff::/20",       // documentation
		"5f00::/16",       // SRv6 SIDs
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// deniedAddr says why ip may not be a webhook target, "" when it may.
func deniedAddr(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address"
	case ip.IsPrivate(), sharedAddressSpace.Contains(ip):
		return "a private address"
	case ip.IsUnspecified(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "not a unicast address"
	}
	for _, p := range specialPurpose {
		if p.Contains(ip) {
			return "a special-purpose address (" + p.String() + "), not a public one"
		}
	}
	return ""
}

// checkTarget validates a webhook URL: http(s), a host, and (unless private
// targets are allowed) every address it resolves to public.
func checkTarget(ctx context.Context, raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return fmt.Errorf("must be an http:// or https:// URL with a host and no credentials")
	}
	if allowPrivate {
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname())
	if err != nil {
		return fmt.Errorf("its host %s does not resolve: %v", u.Hostname(), err)
	}
	for _, a := range addrs {
		if why := deniedAddr(a); why != "" {
			return fmt.Errorf("its host %s resolves to %s, %s; webhooks only go to public addresses (an operator may set DREADNODE_WEBHOOK_ALLOW_PRIVATE=true)", u.Hostname(), a, why)
		}
	}
	return nil
}

// dialControl refuses a connection to a denied address (after resolution,
// so a name that now resolves elsewhere is caught too).
func dialControl(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if allowPrivate {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("webhook target %s: %v", address, err)
		}
		if why := deniedAddr(ap.Addr()); why != "" {
			return fmt.Errorf("webhook target %s is %s; refused", ap.Addr(), why)
		}
		return nil
	}
}
