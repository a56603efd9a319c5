package docker

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/subnets"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// subnetOf returns the one subnet and gateway of the network name.
func subnetOf(t *testing.T, p *Provider, name string) (netip.Prefix, string) {
	t.Helper()
	n, err := p.cli.NetworkInspect(context.Background(), name, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.IPAM.Config) != 1 {
		t.Fatalf("network %s: IPAM %+v, want one subnet", name, n.IPAM.Config)
	}
	s, err := netip.ParsePrefix(n.IPAM.Config[0].Subnet)
	if err != nil {
		t.Fatalf("network %s: subnet %q: %v", name, n.IPAM.Config[0].Subnet, err)
	}
	return s, n.IPAM.Config[0].Gateway
}

// TestNetworkSubnetFromPool: the sandbox networks of a deployment take
// /22s of DOCKER_NETWORK_POOL (default 10.214.0.0/16), not Docker's
// default address pools (which networks left by killed runs exhaust), and
// two deployments sharing the engine, their networks created at once, get
// distinct ones. Seen failing without the pool: the networks were on
// 172.18.0.0/16 and 172.19.0.0/16.
func TestNetworkSubnetFromPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := netip.MustParsePrefix(DefaultNetworkPool)
	var ps []*Provider
	for _, name := range []string{"a", "b"} {
		p, err := New(Config{Scope: "test-pool-" + name + "-" + randomHex(4)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = p.Close() // removes its unused networks
			for _, n := range []string{p.networkName(false), p.networkName(true)} {
				_ = p.cli.NetworkRemove(context.Background(), n)
			}
		})
		ps = append(ps, p)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(ps))
	for _, p := range ps {
		for _, isolated := range []bool{false, true} {
			wg.Go(func() {
				_, err := p.ensureNetwork(ctx, p.networkName(isolated), isolated)
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]netip.Prefix{}
	for _, p := range ps {
		for _, name := range []string{p.networkName(false), p.networkName(true)} {
			s, gw := subnetOf(t, p, name)
			if !pool.Contains(s.Addr()) || s.Bits() != NetworkBits {
				t.Errorf("network %s: subnet %s, want a /%d of %s", name, s, NetworkBits, pool)
			}
			if gw != s.Addr().Next().String() {
				t.Errorf("network %s: gateway %q, want %s (the subnet's first address)", name, gw, s.Addr().Next())
			}
			for other, o := range seen {
				if s.Overlaps(o) {
					t.Errorf("networks %s (%s) and %s (%s) overlap", name, s, other, o)
				}
			}
			seen[name] = s
		}
	}
}

// TestNetworkPoolTakenAndExhausted: a subnet of the pool another network
// holds is skipped, and a pool with none left fails the create with a
// network diagnostic naming the pool and DOCKER_NETWORK_POOL.
func TestNetworkPoolTakenAndExhausted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cli := dockertest.Client(t)
	// A /23 of the tests' pool that no network holds now (two /24s).
	used, err := subnets.Used(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	pool, ok := subnets.Free(netip.MustParsePrefix(dockertest.SubnetPool), 23, used)
	if !ok {
		t.Fatal("the tests' subnet pool has no free /23")
	}
	low := netip.PrefixFrom(pool.Addr(), 24)
	taken := testNetwork + "-taken-" + randomHex(4)
	if _, err := cli.NetworkCreate(ctx, taken, network.CreateOptions{
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: low.String()}}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), taken) })

	cfg := Config{Network: testNetwork + "-pool-" + randomHex(4), NetworkPool: pool.String(), networkBits: 24}
	p := newProvider(t, cfg)
	t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), cfg.Network) })
	if _, err := p.ensureNetwork(ctx, cfg.Network, false); err != nil {
		t.Fatal(err)
	}
	if s, _ := subnetOf(t, p, cfg.Network); !pool.Contains(s.Addr()) || s.Bits() != 24 || s == low {
		t.Fatalf("network %s took %s, want the free /24 of %s (%s is taken)", cfg.Network, s, pool, low)
	}

	full := Config{Network: testNetwork + "-full-" + randomHex(4), NetworkPool: pool.String(), networkBits: 24}
	q := newProvider(t, full)
	t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), full.Network) })
	_, err = q.ensureNetwork(ctx, full.Network, false)
	wantKind(t, err, compute.KindNetwork)
	if !strings.Contains(err.Error(), pool.String()) || !strings.Contains(err.Error(), "DOCKER_NETWORK_POOL") {
		t.Fatalf("error does not name the pool and its setting: %v", err)
	}
}

// TestNetworkPoolIsChecked: a pool that is not an IPv4 prefix holding a
// network is refused when the provider is made, naming the setting.
func TestNetworkPoolIsChecked(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"10.214.0.0", "10.214.0.0/23", "fd00::/64", "nonsense"} {
		_, err := New(Config{Network: testNetwork, NetworkPool: bad})
		wantKind(t, err, compute.KindInvalid)
		if !strings.Contains(err.Error(), "NetworkPool") || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: error does not name the setting and the value: %v", bad, err)
		}
	}
	for _, good := range []string{"10.214.0.0/16", " 10.220.4.0/22 ", "10.214.1.2/20"} {
		if _, err := ParseNetworkPool(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}
