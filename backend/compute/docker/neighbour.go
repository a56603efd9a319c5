package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"syscall"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/vishvananda/netlink"
)

// The engine hands a freed bridge address to the next container at once
// (its IPAM takes the lowest free one), and this host keeps the previous
// holder's MAC address for it in its neighbour (ARP) table: REACHABLE for
// up to 45 s, then a few seconds more of probes. When the two holders'
// MACs differ, every packet to the new one goes to a MAC nobody has until
// the entry ages out, and its agent cannot be reached (issue 33: one agent
// call in twenty under churn). MACs differ whenever an address passes
// between a sandbox with an egress policy (a random MAC, the key of its
// rules, egress.go) and one without (the engine's MAC, derived from the
// address), in either order.
//
// So every container this backend starts claims its addresses: the host's
// entry for each is set to the container's own MAC (state STALE: used at
// once, confirmed by the kernel's own probes), whatever held the address
// before and whichever replica removed it. A dial to an agent that fails is
// also followed by a claim before it is tried again (agentCall), which
// mends an entry made stale by anything else.

// claimAddresses points this host's neighbour entries for c's addresses at
// c's MAC addresses. An address this host does not reach on a link of its
// own (the backend in another network namespace) has no entry to mend.
func claimAddresses(c container.InspectResponse) error {
	if c.NetworkSettings == nil {
		return nil
	}
	var errs []error
	for name, ep := range c.NetworkSettings.Networks {
		if ep == nil || ep.IPAddress == "" || ep.MacAddress == "" {
			continue
		}
		if err := claimAddress(ep.IPAddress, ep.MacAddress); err != nil {
			errs = append(errs, fmt.Errorf("network %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func claimAddress(ipText, macText string) error {
	ip := net.ParseIP(ipText).To4()
	mac, err := net.ParseMAC(macText)
	if ip == nil || err != nil {
		return fmt.Errorf("the engine reported address %q and MAC %q, which do not parse", ipText, macText)
	}
	routes, err := netlink.RouteGet(ip)
	if err != nil {
		return fmt.Errorf("looking up the route to %s: %w", ip, err)
	}
	for _, r := range routes {
		if r.LinkIndex == 0 || r.Gw != nil {
			continue // reached through a gateway: the entry is the gateway's, not ours to set
		}
		n := &netlink.Neigh{LinkIndex: r.LinkIndex, Family: netlink.FAMILY_V4, State: netlink.NUD_STALE, IP: ip, HardwareAddr: mac}
		if err := netlink.NeighSet(n); err != nil {
			if errors.Is(err, syscall.EPERM) {
				return fmt.Errorf("setting the neighbour entry of %s needs CAP_NET_ADMIN in the host's network namespace (run the backend as root on the engine's host): %w", ip, err)
			}
			return fmt.Errorf("setting the neighbour entry of %s to %s: %w", ip, mac, err)
		}
	}
	return nil
}

// claimContainer inspects the started container id and claims its
// addresses (claimAddresses).
func claimContainer(ctx context.Context, cli client.APIClient, id string) error {
	c, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		return err
	}
	return claimAddresses(c)
}

// claimStarted claims the addresses of a container just started. A failure
// leaves the host's entry to age out as before (the agent calls' retry
// claims again), so it is logged, not returned: the container is fine.
func claimStarted(ctx context.Context, cli client.APIClient, id string) {
	if err := claimContainer(ctx, cli, id); err != nil && ctx.Err() == nil {
		slog.Warn("could not point this host's neighbour (ARP) entry at a new container; calls to it may fail until the old entry expires",
			"container", id, "err", err)
	}
}

// forgetNeighbour drops this host's neighbour entry for ip, best effort, so
// that the next packet to it asks the bridge who holds it now. The dial to
// an agent calls it when a connection is not made (agentdial.go): it mends
// an entry made stale by anything, without knowing the new holder.
func forgetNeighbour(ipText string) {
	ip := net.ParseIP(ipText).To4()
	if ip == nil {
		return
	}
	routes, err := netlink.RouteGet(ip)
	if err != nil {
		return
	}
	for _, r := range routes {
		if r.LinkIndex != 0 && r.Gw == nil {
			_ = netlink.NeighDel(&netlink.Neigh{LinkIndex: r.LinkIndex, Family: netlink.FAMILY_V4, IP: ip})
		}
	}
}
