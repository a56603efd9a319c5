package egress

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// ParseAllowPrivate reads DREADNODE_EGRESS_ALLOW_PRIVATE: empty (no private
// range reachable), "true" (every private range), or a comma-separated
// list of CIDR blocks or addresses.
func ParseAllowPrivate(s string) ([]netip.Prefix, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "", "false":
		return nil, nil
	case "true":
		return PrivateRanges, nil
	}
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		p, ok := ParseRule(part)
		if !ok {
			return nil, fmt.Errorf("DREADNODE_EGRESS_ALLOW_PRIVATE: %q is not a CIDR block or an IP address (or set true to allow every private range)", strings.TrimSpace(part))
		}
		out = append(out, p)
	}
	return out, nil
}

// HostNameservers reads the IP resolvers of resolv.conf (the engine's
// embedded DNS forwards to them from the sandbox's own namespace, so they
// must stay reachable on port 53 even when they are private addresses).
// Loopback resolvers are skipped: the engine reaches those from the host.
func HostNameservers(path string) []netip.Addr {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(fields[1]); err == nil && !a.IsLoopback() && a.Zone() == "" {
			out = append(out, a)
		}
	}
	return out
}
