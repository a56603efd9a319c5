package docker

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// A helper container of the deployment that no record owns (a route
// helper left by a backend killed mid-create) is removed by the sweep
// once its owner is gone, including one made before helpers were
// labelled; a helper whose sandbox still runs, another deployment's
// helper and a sandbox are kept. Seen failing without SweepHelpers's
// removal: "the route helper of a removed sandbox is still there".
func TestSweepHelpersRemovesOwnerless(t *testing.T) {
	ctx := context.Background()
	scope := "test-helpers-" + randomHex(4)
	p, err := New(Config{Network: testNetwork, Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cli := p.cli
	made := []string{}
	t.Cleanup(func() {
		for _, id := range made {
			_ = cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
		}
	})
	run := func(labels map[string]string, mode string, start bool) string {
		t.Helper()
		resp, err := cli.ContainerCreate(ctx, &container.Config{Image: DefaultBaseImage, Cmd: []string{"sleep", "600"}, Labels: labels},
			&container.HostConfig{NetworkMode: container.NetworkMode(mode)}, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, resp.ID)
		if start {
			if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return resp.ID
	}
	own := map[string]string{labelScope: scope}
	sandbox := map[string]string{labelScope: scope, compute.LabelManaged: "true"}
	gone := run(sandbox, "none", true)
	alive := run(sandbox, "none", true)
	helperOfGone := run(map[string]string{labelScope: scope, labelHelper: helperRoute}, "container:"+gone, false)
	unlabelledOfGone := run(own, "container:"+gone, false)
	helperOfAlive := run(map[string]string{labelScope: scope, labelHelper: helperRoute}, "container:"+alive, false)
	otherDeployment := run(map[string]string{labelScope: scope + "-other", labelHelper: helperRoute}, "container:"+gone, false)
	if err := cli.ContainerRemove(ctx, gone, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}

	if err := p.SweepHelpers(ctx); err != nil {
		t.Fatal(err)
	}
	exists := func(id string) bool { _, err := cli.ContainerInspect(ctx, id); return err == nil }
	for name, id := range map[string]string{"the route helper of a removed sandbox": helperOfGone,
		"an unlabelled route helper of a removed sandbox": unlabelledOfGone} {
		if exists(id) {
			t.Errorf("%s is still there after the sweep", name)
		}
	}
	for name, id := range map[string]string{"the route helper of a running sandbox": helperOfAlive,
		"another deployment's helper": otherDeployment, "a running sandbox": alive} {
		if !exists(id) {
			t.Errorf("%s was removed by the sweep", name)
		}
	}
}
