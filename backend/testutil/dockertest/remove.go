package dockertest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// RemoveDeployment force-removes every container, then every network and
// volume, labelled with deployment (and only those: other tests and runs
// share the engine). It is what a test harness or the bench calls last, when
// the backend's own removal (through its reconciler) may have been left
// mid-way by a failure. Networks and named volumes outlive their containers:
// left behind, a few runs exhaust the engine's address pools and every later
// network create fails.
func RemoveDeployment(ctx context.Context, cli *client.Client, deployment string) error {
	if deployment == "" {
		return nil
	}
	by := filters.NewArgs(filters.Arg("label", compute.LabelDeployment+"="+deployment))
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: by})
	if err != nil {
		return fmt.Errorf("listing the containers of deployment %s: %w", deployment, err)
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	each(len(cs), func(i int) {
		if err := cli.ContainerRemove(ctx, cs[i].ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			mu.Lock()
			errs = append(errs, fmt.Errorf("removing container %.12s: %w", cs[i].ID, err))
			mu.Unlock()
		}
	})
	if ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: by}); err == nil {
		each(len(ns), func(i int) { _ = cli.NetworkRemove(ctx, ns[i].ID) })
	}
	if vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: by}); err == nil {
		each(len(vs.Volumes), func(i int) { _ = cli.VolumeRemove(ctx, vs.Volumes[i].Name, true) })
	}
	return errors.Join(errs...)
}

// each runs fn(0..n-1), eight at a time: a loaded engine takes seconds per
// removal, and unbounded it only queues them.
func each(n int, fn func(int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}
