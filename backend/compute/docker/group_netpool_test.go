package docker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// With a network pool, an environment after the first runs on a network
// made ahead (its own, not the first's); removing it, or one that failed
// after its claim, removes its network; Close removes the networks still
// in the pool. Nothing of the pool is left behind.
func TestGroupNetworkPool(t *testing.T) {
	t.Parallel()
	owner := "test-groups-" + randomHex(4)
	g, err := newProvider(t, Config{DiskLimitMB: -1}).Groups(GroupConfig{Owner: owner, BuildNetwork: noBuildNetwork, NetworkPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = g.RemoveAll(ctx)
		if !closed {
			_ = g.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ready := func() error {
		g.netPool.mu.Lock()
		defer g.netPool.mu.Unlock()
		if len(g.netPool.ready) < 1 {
			return errors.New("the pool has no ready network yet")
		}
		return nil
	}
	netOf := func(res *compute.GroupResult) (string, map[string]string) {
		c, err := g.cli.ContainerInspect(ctx, res.Containers["app"])
		if err != nil {
			t.Fatal(err)
		}
		for name := range c.NetworkSettings.Networks {
			return name, c.Config.Labels
		}
		t.Fatal("the service is on no network")
		return "", nil
	}
	a, b := "pa"+randomHex(4), "pb"+randomHex(4)
	first, _ := netOf(bringGroup(ctx, t, g, a, map[string]compute.GroupService{"app": baseService()}))
	if first != compute.GroupNetworkName(a) {
		t.Fatalf("the first environment runs on %s: want its own network (the pool fills after it)", first)
	}
	poll.Until(t, 3*time.Minute, 100*time.Millisecond, ready)
	pooled, labels := netOf(bringGroup(ctx, t, g, b, map[string]compute.GroupService{"app": baseService()}))
	if !strings.HasPrefix(pooled, poolNetPrefix) || labels[labelGroupNet] != pooled {
		t.Fatalf("the second environment runs on %s (label %q): want a pooled network its container names", pooled, labels[labelGroupNet])
	}
	n, err := g.cli.NetworkInspect(ctx, pooled, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Containers) != 1 || n.Labels[compute.LabelDeployment] != owner || n.Labels[labelNetPool] != g.netPool.instance {
		t.Fatalf("pooled network: %d containers, labels %v: want the environment's one container alone, labelled with its owner", len(n.Containers), n.Labels)
	}
	if err := g.Remove(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := g.cli.NetworkInspect(ctx, pooled, network.InspectOptions{}); !errdefs.IsNotFound(err) {
		t.Fatalf("the removed environment's pooled network: %v, want it gone", err)
	}

	// Claimed, then failed before any container: Remove still finds it.
	poll.Until(t, 3*time.Minute, 100*time.Millisecond, ready)
	c := "pc" + randomHex(4)
	missing := baseService()
	missing.Image = "dreadnode/no-such-image:" + randomHex(4)
	if _, err := g.Bring(ctx, &compute.Group{GroupTarget: compute.GroupTarget{ID: c, RecordID: "rec-" + c, OrgID: "org1", TaskRef: "org1/demo@1"},
		Services: map[string]compute.GroupService{"app": missing}}); err == nil {
		t.Fatal("a service of a missing image came up")
	}
	claim, ok := g.claimedNetwork(c)
	if !ok {
		t.Fatal("the failed environment claimed no pooled network")
	}
	if err := g.Remove(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := g.cli.NetworkInspect(ctx, claim.id, network.InspectOptions{}); !errdefs.IsNotFound(err) {
		t.Fatalf("the failed environment's claimed network: %v, want it gone", err)
	}

	poll.Until(t, 3*time.Minute, 100*time.Millisecond, ready)
	closed = true
	if err := g.RemoveAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	left, err := g.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", compute.LabelDeployment+"="+owner))})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("after Close, %d network(s) of the owner are left: %v", len(left), left[0].Name)
	}
}

// A pooled network left by a killed backend (its instance's lock file
// held by nobody) is removed by the next pool of the deployment once it
// fills; one whose instance lives stays.
func TestGroupNetworkPoolSweepsAKilledInstances(t *testing.T) {
	t.Parallel()
	owner := "test-groups-" + randomHex(4)
	g, err := newProvider(t, Config{DiskLimitMB: -1}).Groups(GroupConfig{Owner: owner, BuildNetwork: noBuildNetwork, NetworkPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = g.RemoveAll(ctx)
		_ = g.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dead, live := "dead"+randomHex(6), "live"+randomHex(6)
	f, err := os.Create(poolLockPath(dead)) // as a killed instance leaves it: there, unheld
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { _ = os.Remove(poolLockPath(dead)) })
	release := holdPoolInstance(live)
	t.Cleanup(release)
	made := map[string]string{}
	for _, inst := range []string{dead, live} {
		id, err := g.createSubnetNetwork(ctx, poolNetPrefix+inst, map[string]string{compute.LabelDeployment: owner, labelNetPool: inst})
		if err != nil {
			t.Fatal(err)
		}
		made[inst] = id
		t.Cleanup(func() { _ = g.cli.NetworkRemove(context.Background(), id) })
	}
	bringGroup(ctx, t, g, "ps"+randomHex(4), map[string]compute.GroupService{"app": baseService()})
	poll.Until(t, 3*time.Minute, 100*time.Millisecond, func() error {
		if _, err := g.cli.NetworkInspect(ctx, made[dead], network.InspectOptions{}); !errdefs.IsNotFound(err) {
			return errors.New("the killed instance's pooled network is still there")
		}
		return nil
	})
	if _, err := g.cli.NetworkInspect(ctx, made[live], network.InspectOptions{}); err != nil {
		t.Fatalf("the live instance's pooled network: %v, want it kept", err)
	}
}
