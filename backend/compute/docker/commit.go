package docker

import (
	"context"
	"maps"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Commit writes the filesystem of ref's container (its image and writable
// layer) to a new local image named ref, labelled with labels, and returns
// the image's size. The container is paused for the commit only (the
// engine unpauses it after; one already paused stays paused) and keeps
// running. The image gets the configuration of the container's own image
// (entrypoint, command, user, working directory), not the container's: the
// agent the backend injected, its mount and its entrypoint stay out of it,
// and a sandbox started from it gets its own. Its labels are labels only.
func (p *Provider) Commit(ctx context.Context, ref compute.Ref, name string, labels map[string]string) (int64, error) {
	const op = "snapshot"
	c, err := p.cli.ContainerInspect(ctx, ref.ID)
	if err != nil {
		return 0, classify(op, err)
	}
	cfg := &container.Config{Labels: maps.Clone(labels)}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	if img, err := p.cli.ImageInspect(ctx, c.Image); err == nil && img.Config != nil {
		cfg.Entrypoint, cfg.Cmd, cfg.User, cfg.WorkingDir = img.Config.Entrypoint, img.Config.Cmd, img.Config.User, img.Config.WorkingDir
		cfg.Env = img.Config.Env
		if len(cfg.Entrypoint) == 0 && len(cfg.Cmd) == 0 {
			cfg.Cmd = []string{"sleep", "infinity"} // never the agent's entrypoint
		}
	}
	// The agent's ready file stays out of the image: a sandbox started
	// from it would look ready before its own agent listens. Only start
	// reads it, so the running sandbox gets it back after the commit.
	if p.agent != nil && p.execQuietly(ctx, ref.ID, "rm", "-f", agentReadyPath) {
		defer p.execQuietly(context.WithoutCancel(ctx), ref.ID, "touch", agentReadyPath)
	}
	resp, err := p.cli.ContainerCommit(ctx, ref.ID, container.CommitOptions{Reference: name, Pause: true, Config: cfg})
	if err != nil {
		return 0, classify(op, err)
	}
	img, err := p.cli.ImageInspect(ctx, resp.ID)
	if err != nil {
		_ = p.RemoveImage(context.WithoutCancel(ctx), name)
		return 0, classify(op, err)
	}
	return img.Size, nil
}

// RemoveImage removes a local image the backend made (a snapshot's or a
// template build's); one already gone is not an error.
func (p *Provider) RemoveImage(ctx context.Context, name string) error {
	_, err := p.cli.ImageRemove(ctx, name, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return classify("remove image", err)
	}
	return nil
}

// HasImage reports whether the engine has a local image named name.
func (p *Provider) HasImage(ctx context.Context, name string) (bool, error) {
	_, err := p.cli.ImageInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// execQuietly runs cmd in container id as root through the engine and
// reports whether it exited 0.
func (p *Provider) execQuietly(ctx context.Context, id string, cmd ...string) bool {
	ex, err := p.cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, User: "0"})
	if err != nil {
		return false
	}
	if err := p.cli.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{}); err != nil {
		return false
	}
	for range 600 {
		in, err := p.cli.ContainerExecInspect(ctx, ex.ID)
		if err != nil {
			return false
		}
		if !in.Running {
			return in.ExitCode == 0
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}
