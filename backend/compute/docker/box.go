package docker

import (
	"context"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// box is a hardened container to create: what a sandbox (create.go) and a
// task's service (group_up.go) are both made of, so that both are confined
// by one piece of code. The caller fills in what is its own (image,
// command, environment, the labels naming the record, mounts, network
// attachment); create adds the confinement and the agent.
type box struct {
	name string
	cfg  *container.Config
	host *container.HostConfig
	net  *network.NetworkingConfig // nil: host.NetworkMode alone
	// capAdd are added back to hardening's minimal set, then capDrop
	// taken out of it except those capAdd names (compose: cap_add wins).
	capAdd, capDrop []string
	limits          hardening.Limits
	runtime         string // "" is the engine's default
	// storageOpt caps the writable layer (disk.go); nil: no cap.
	storageOpt func(context.Context) map[string]string
	// agent copies the agent in before the container is created (nil:
	// none); it runs after the confinement, which it may read.
	agent func(ctx context.Context, cfg *container.Config, host *container.HostConfig) error

	prepared bool // confinement and agent are in: a repeated create only asks the engine again
}

// create creates (but does not start) the container: confined (package
// hardening: minimal capabilities, no-new-privileges, the log cap, the
// limits and runtime), with its writable layer capped and the agent in.
// Calling it again after an engine error (a name conflict the caller
// resolved, a network race) only repeats the engine's create.
func (b *box) create(ctx context.Context, cli *client.Client) (string, error) {
	if !b.prepared {
		hardening.Apply(b.host, b.capAdd...)
		if len(b.capDrop) > 0 {
			b.host.CapAdd = hardening.Without(b.host.CapAdd, b.capDrop, b.capAdd)
		}
		b.limits.Set(&b.host.Resources)
		b.host.Runtime = b.runtime
		if b.agent != nil {
			if err := b.agent(ctx, b.cfg, b.host); err != nil {
				return "", err
			}
		}
		if b.storageOpt != nil {
			b.host.StorageOpt = b.storageOpt(ctx)
		}
		b.prepared = true
	}
	resp, err := cli.ContainerCreate(ctx, b.cfg, b.host, b.net, nil, b.name)
	return resp.ID, err
}

// removeContainer force-removes a container with its anonymous volumes. A
// container that is gone is not an error; one another caller is removing
// already is the engine's conflict (see removing).
func removeContainer(ctx context.Context, cli *client.Client, id string) error {
	err := cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// removing reports the engine's refusal to remove a container another
// call is removing already (it will be gone).
func removing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "already in progress")
}

// pauseContainer freezes a container's processes. runc gives up a cgroup
// v1 freeze that does not settle in time (a process in uninterruptible
// sleep on a loaded host: "unable to freeze") and thaws the container
// again, so the freeze is simply tried again, a few times, before the
// pause is said to fail.
func pauseContainer(ctx context.Context, cli *client.Client, id string) error {
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := cli.ContainerPause(ctx, id)
		if err != nil && !strings.Contains(err.Error(), "unable to freeze") {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 50 * time.Millisecond, Multiplier: 2, MaxInterval: time.Second}),
		backoff.WithMaxTries(6))
	return err
}
