package subnets_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/subnets"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// TestEngineOverlapIsRecognised: the engine's refusal of a subnet another
// network holds (what a creator on another host meets when both picked the
// same) is what IsOverlap recognises, and Create on a pool of two /24s,
// one held, takes the other, its gateway named.
func TestEngineOverlapIsRecognised(t *testing.T) {
	ctx := context.Background()
	cli := dockertest.Client(t)
	used, err := subnets.Used(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	pool, ok := subnets.Free(netip.MustParsePrefix(dockertest.SubnetPool), 23, used)
	if !ok {
		t.Fatal("the tests' subnet pool has no free /23")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "dn-test-subnets-" + hex.EncodeToString(b)
	low := netip.PrefixFrom(pool.Addr(), 24)
	if _, err := cli.NetworkCreate(ctx, name+"-a", network.CreateOptions{
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: low.String()}}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), name+"-a") })
	_, err = cli.NetworkCreate(ctx, name+"-b", network.CreateOptions{
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: low.String()}}}})
	t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), name+"-b") })
	if err == nil || !subnets.IsOverlap(err) {
		t.Fatalf("creating a second network on %s: %v, want the engine's overlap refusal", low, err)
	}
	if _, err := subnets.Create(ctx, cli, name+"-b", network.CreateOptions{}, pool, 24); err != nil {
		t.Fatal(err)
	}
	n, err := cli.NetworkInspect(ctx, name+"-b", network.InspectOptions{})
	if err != nil || len(n.IPAM.Config) != 1 {
		t.Fatalf("inspect: %+v, %v", n.IPAM, err)
	}
	got, _ := netip.ParsePrefix(n.IPAM.Config[0].Subnet)
	if got == low || !pool.Contains(got.Addr()) || got.Bits() != 24 || n.IPAM.Config[0].Gateway != got.Addr().Next().String() {
		t.Fatalf("network on %s gateway %q, want the free /24 of %s with its first address", got, n.IPAM.Config[0].Gateway, pool)
	}
}
