package docker

import (
	"context"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
)

// egressDrops reads the packets the egress rules dropped per sender MAC
// address: one read of the rules' accounting set for a whole List, so the
// cost of a pass grows with the sandboxes that violated, never per create.
// nil when filtering is off or the read failed (List still answers).
func (p *Provider) egressDrops(ctx context.Context) map[string]map[string]uint64 {
	if p.egress.fw == nil {
		return nil
	}
	d, err := p.egress.fw.Drops(ctx)
	if err != nil {
		return nil
	}
	return d
}

// dropsOf sums the drops of a container's endpoints (by their MAC address).
func dropsOf(drops map[string]map[string]uint64, nets map[string]*network.EndpointSettings) map[string]uint64 {
	if len(drops) == 0 {
		return nil
	}
	var out map[string]uint64
	for _, ep := range nets {
		if ep == nil {
			continue
		}
		for reason, n := range drops[strings.ToLower(ep.MacAddress)] {
			if out == nil {
				out = map[string]uint64{}
			}
			out[reason] += n
		}
	}
	return out
}

// macsOf lists a container's MAC addresses.
func macsOf(c container.InspectResponse) []string {
	if c.NetworkSettings == nil {
		return nil
	}
	var out []string
	for _, ep := range c.NetworkSettings.Networks {
		if ep != nil && ep.MacAddress != "" {
			out = append(out, ep.MacAddress)
		}
	}
	return out
}

// forgetDrops removes a deleted container's drop counts: the engine derives
// MAC addresses from IP addresses, so the next sandbox given this address
// must not inherit them.
func (p *Provider) forgetDrops(ctx context.Context, macs []string) {
	if p.egress.fw != nil && len(macs) > 0 {
		_ = p.egress.fw.ForgetDrops(ctx, macs...) // best effort: sweepDrops removes leftovers
	}
}

// sweepDrops removes the drop counts of MAC addresses no container has
// (a delete that failed to forget them, a backend that crashed).
func (p *Provider) sweepDrops(ctx context.Context) {
	drops := p.egressDrops(ctx)
	if len(drops) == 0 {
		return
	}
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return
	}
	for _, c := range cs {
		if c.NetworkSettings != nil {
			for _, ep := range c.NetworkSettings.Networks {
				if ep != nil {
					delete(drops, strings.ToLower(ep.MacAddress))
				}
			}
		}
	}
	gone := make([]string, 0, len(drops))
	for mac := range drops {
		gone = append(gone, mac)
	}
	p.forgetDrops(ctx, gone)
}

// EgressSenders counts, by reason, the containers (sandboxes and task
// services) that had packets dropped by the egress rules since they
// started (for the metrics): one read of the accounting set.
func (p *Provider) EgressSenders(ctx context.Context) (map[string]int, error) {
	if p.egress.fw == nil {
		return nil, p.egressReady()
	}
	drops, err := p.egress.fw.Drops(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, byReason := range drops {
		for reason, n := range byReason {
			if n > 0 {
				out[reason]++
			}
		}
	}
	return out, nil
}
