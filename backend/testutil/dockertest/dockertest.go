// Package dockertest inspects the real Docker engine from tests.
package dockertest

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
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
