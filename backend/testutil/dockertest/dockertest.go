// Package dockertest inspects the real Docker engine from tests.
package dockertest

import (
	"context"
	"net/netip"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/subnets"
)

// Client returns a client of the engine, closed at test cleanup.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// ContainersWithLabel lists the containers (all states) carrying label=value.
func ContainersWithLabel(t testing.TB, label, value string) []container.Summary {
	t.Helper()
	cs, err := Client(t).ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", label+"="+value))})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// ContainersOfRecord lists the containers of a sandbox record.
func ContainersOfRecord(t testing.TB, id string) []container.Summary {
	t.Helper()
	return ContainersWithLabel(t, compute.LabelRecord, id)
}

// SubnetPool is where tests' own networks take their subnets from, a
// /SubnetBits each: apart from the backend's pools (compute/docker's
// DefaultNetworkPool and DefaultSubnetPool) and Docker's default ones,
// which networks left by killed runs would otherwise exhaust for every
// process sharing the engine (package subnets).
const SubnetPool = "10.215.0.0/16"

// SubnetBits is the size of a test network: a /24 holds 253 containers,
// more than any test starts on one, and the pool 256 networks.
const SubnetBits = 24

// CreateNetwork creates the network name as opts say, on a free subnet of
// SubnetPool, and returns its id. The caller removes it.
func CreateNetwork(t testing.TB, cli client.NetworkAPIClient, name string, opts network.CreateOptions) string {
	t.Helper()
	resp, err := subnets.Create(context.Background(), cli, name, opts, netip.MustParsePrefix(SubnetPool), SubnetBits)
	if err != nil {
		t.Fatalf("creating network %s: %v", name, err)
	}
	return resp.ID
}
