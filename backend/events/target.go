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
// link-local (the cloud metadata service), private, CGNAT, multicast or
// unspecified address, unless the operator allows private targets
// (DREADNODE_WEBHOOK_ALLOW_PRIVATE=true). Checked at registration and again
// on every connection (DNS can change), on the address actually dialled.

var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

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
