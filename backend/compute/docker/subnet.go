package docker

import (
	"fmt"
	"net/netip"
	"strings"
)

// DefaultNetworkPool is where the provider's own networks (the sandboxes'
// bridge and its -isolated twin) take their subnets from
// (DOCKER_NETWORK_POOL; package subnets says why they name one): beside
// the task environments' DefaultSubnetPool, and outside Docker's default
// address pools (172.17–172.31/16, 192.168/16), loopback and link-local.
const DefaultNetworkPool = "10.214.0.0/16"

// NetworkBits is the size of a provider network: a /22 holds 1,021
// containers, about what one Linux bridge takes (1,024 ports), so the
// default pool holds 64 networks (32 deployments with both).
const NetworkBits = 22

// ParseNetworkPool checks a provider network pool: an IPv4 prefix holding
// at least one /NetworkBits.
func ParseNetworkPool(s string) (netip.Prefix, error) { return parseNetworkPool(s, NetworkBits) }

func parseNetworkPool(s string, bits int) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || !p.Addr().Is4() || p.Bits() > bits {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 prefix of /%d or larger, such as %s", s, bits, DefaultNetworkPool)
	}
	return p.Masked(), nil
}
