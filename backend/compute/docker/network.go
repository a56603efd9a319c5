package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/subnets"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// iccOption turns inter-container traffic off on a bridge: its containers
// reach the outside (unless internal) but not each other, so sandboxes of
// every org can share one network without reaching one another.
const iccOption = "com.docker.network.bridge.enable_icc"

// ensureNetwork returns the id of the bridge network name, creating it when
// missing, with inter-container traffic off. An existing network of that
// name that lets containers talk (or that is not internal when internal is
// asked) is refused, never silently used. Creation is race-safe: within the
// process a mutex serialises it; across processes the daemon's duplicate
// check refuses the second create (a conflict we ignore), and should two
// creates still slip through, every caller settles on the oldest network of
// that name and removes the others. Containers then join by id, so a
// duplicate name can never be ambiguous.
func (p *Provider) ensureNetwork(ctx context.Context, name string, internal bool) (string, error) {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	if id, ok := p.netIDs[name]; ok {
		return id, nil
	}
	// Docker 20.10's duplicate-name check is racy; a host-wide file lock
	// serialises creators on this machine (every process sharing a local
	// engine), and oldest-wins below settles creators on other machines.
	unlock := subnets.LockHost("network-" + name)
	defer unlock()
	net, err := p.findNetwork(ctx, name)
	if err == nil && net == nil {
		p.pruneNetworks(ctx)
		opts := network.CreateOptions{
			Driver:   "bridge",
			Internal: internal,
			Labels:   map[string]string{compute.LabelManaged: "true", labelScope: p.cfg.Scope},
			Options:  map[string]string{iccOption: "false"},
		}
		// An explicit subnet from the provider's pool, never one of the
		// engine's default pools (subnet.go).
		_, cerr := subnets.Create(ctx, p.cli, name, opts, p.netPool, cmp.Or(p.cfg.networkBits, NetworkBits))
		var exhausted *subnets.ExhaustedError
		switch {
		case errors.As(cerr, &exhausted):
			return "", compute.Errorf(compute.KindNetwork, "network", cerr,
				"could not create Docker network %s: %v; remove unused networks (`docker network ls`) or set DOCKER_NETWORK_POOL to a wider or another range", name, cerr)
		case cerr != nil && !cerrdefs.IsConflict(cerr):
			return "", compute.Errorf(compute.KindNetwork, "network", cerr, "could not create Docker network %s: %s", name, daemonMessage(cerr))
		}
		net, err = p.findNetwork(ctx, name)
	}
	switch {
	case err != nil:
		return "", classify("network", err)
	case net == nil:
		return "", compute.Errorf(compute.KindNetwork, "network", nil, "Docker network %s vanished while it was being created", name)
	case internal && !net.Internal:
		return "", compute.Errorf(compute.KindNetwork, "network", nil,
			"Docker network %s exists but is not internal; remove it so that sandboxes without internet access stay cut off", name)
	case net.Options[iccOption] != "false":
		return "", compute.Errorf(compute.KindNetwork, "network", nil,
			"Docker network %s lets its containers reach each other (inter-container traffic is on), so a sandbox on it could reach "+
				"other sandboxes; remove it (`docker network rm %s`, once no container uses it) or set DOCKER_NETWORK to a new name, "+
				"which the backend creates with inter-container traffic off", name, name)
	}
	if err := p.attachEgress(ctx, *net); err != nil {
		return "", err
	}
	p.netIDs[name] = net.ID
	return net.ID, nil
}

// pruneNetworks removes, best effort, the unused per-deployment networks
// (dreadnode-<deployment>) of deployments no backend on this host runs any
// more: a backend that was killed never removed its own, and each holds one
// of the engine's few default address pools. The daemon refuses to remove a
// network a container uses; a live deployment's network, idle or not, is
// left alone (its backends hold its lock, liveness.go).
func (p *Provider) pruneNetworks(ctx context.Context) {
	nets, err := p.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", compute.LabelManaged+"=true"), filters.Arg("label", labelScope), filters.Arg("name", DefaultNetwork+"-"))})
	if err != nil {
		return
	}
	for _, n := range nets {
		scope := n.Labels[labelScope]
		own := n.Name == networkOf(scope) || n.Name == networkOf(scope)+isolatedSuffix
		// The list does not say whether a network is used (the daemon
		// refuses then) nor whether its deployment still runs (the
		// deployment lock says; liveness.go).
		if own && scope != p.cfg.Scope && deploymentGone(scope) {
			_ = p.cli.NetworkRemove(ctx, n.ID)
		}
	}
}

// removeNetworks removes the deployment's own networks when no container
// uses them (best effort: the daemon refuses while one does, and a replica
// still creating sandboxes recreates them, see isNetworkRace).
func (p *Provider) removeNetworks() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{p.cfg.Network, p.cfg.Network + isolatedSuffix} {
		unlock := subnets.LockHost("network-" + name)
		if net, err := p.findNetwork(ctx, name); err == nil && net != nil {
			_ = p.cli.NetworkRemove(ctx, net.ID)
		}
		unlock()
		p.forgetNetwork(name)
	}
}

// findNetwork returns the oldest network named exactly name (nil when none)
// and removes younger duplicates, best effort (one in use stays).
func (p *Provider) findNetwork(ctx context.Context, name string) (*network.Summary, error) {
	nets, err := p.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, err
	}
	nets = slices.DeleteFunc(nets, func(n network.Summary) bool { return n.Name != name }) // the filter matches substrings
	if len(nets) == 0 {
		return nil, nil
	}
	slices.SortFunc(nets, func(a, b network.Summary) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	for _, dup := range nets[1:] {
		_ = p.cli.NetworkRemove(ctx, dup.ID)
	}
	return &nets[0], nil
}

// forgetNetwork drops a cached network id after the daemon said it is gone.
func (p *Provider) forgetNetwork(name string) {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	delete(p.netIDs, name)
}

// dropRouteScript deletes every default route and checks none is left (via
// /proc/net/route, so a missing ip binary cannot pass for success).
const dropRouteScript = `command -v ip >/dev/null || exit 127
while ip route del default 2>/dev/null; do :; done
! grep -q '^[^[:space:]]*[[:space:]]00000000[[:space:]]' /proc/net/route`

// dropDefaultRoute removes the default route of an isolated sandbox: Docker
// 20.10 installs one even on an internal network (its iptables rules drop
// the traffic; the sandbox must not even see a route out). Nothing runs
// inside the sandbox for it: a short-lived helper container from the base
// image shares the sandbox's network namespace, with NET_ADMIN as its only
// extra capability and never privileged, so nothing the sandbox put on its
// own filesystem (a replaced ip or sh) is ever executed with privileges. The
// sandbox has no NET_ADMIN, so it cannot put the route back.
func (p *Provider) dropDefaultRoute(ctx context.Context, id string) error {
	if err := p.runRouteHelper(ctx, id); err != nil {
		return compute.Errorf(compute.KindNetwork, "create", err,
			"could not cut internet access of the sandbox (removing its default route failed: %v)", err)
	}
	return nil
}

func (p *Provider) runRouteHelper(ctx context.Context, id string) error {
	hc := &container.HostConfig{NetworkMode: container.NetworkMode("container:" + id)}
	hardening.Apply(hc, "NET_ADMIN")
	hardening.HelperLimits.Set(&hc.Resources)
	resp, err := p.cli.ContainerCreate(ctx,
		&container.Config{Image: p.cfg.BaseImage, Cmd: []string{"sh", "-c", dropRouteScript},
			// The deployment's, as every container of it; not "managed":
			// List (and so the orphan sweep) is for sandboxes only.
			Labels: map[string]string{labelScope: p.cfg.Scope, labelHelper: helperRoute}}, hc, nil, nil, "")
	if err != nil {
		return err
	}
	defer p.removeQuietly(resp.ID)
	waitC, errC := p.cli.ContainerWait(ctx, resp.ID, container.WaitConditionNextExit)
	if err := p.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return err
	}
	select {
	case w := <-waitC:
		if w.StatusCode != 0 {
			return fmt.Errorf("route helper exited with code %d", w.StatusCode)
		}
		return nil
	case err := <-errC:
		return err
	}
}
