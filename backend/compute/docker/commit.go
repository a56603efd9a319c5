package docker

import (
	"context"
	"maps"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// checkpointRepo is the repository of checkpoint images (a fork's parent's
// filesystem): dreadnode-checkpoint/<checkpoint>:<service, or "sandbox">.
const checkpointRepo = "dreadnode-checkpoint/"

// labelCheckpoint names a checkpoint image's checkpoint (lifecycle's and
// tasks' LabelCheckpoint).
const labelCheckpoint = "dev.dreadnode.checkpoint"

// Commit commits the filesystem of instance ref (a sandbox's or a task
// service's container: its image and writable layer, not its volumes or
// memory) to a local image, labelled with labels and this deployment. A
// running container is paused for the commit only; a paused one stays
// paused. ErrNotFound (KindNotFound) when the container is gone.
func (p *Provider) Commit(ctx context.Context, ref compute.Ref, labels map[string]string) (string, error) {
	const op = "checkpoint"
	labels = maps.Clone(labels)
	labels[labelScope] = p.cfg.Scope
	labels[compute.LabelManaged] = "true"
	tag := labels[compute.LabelService]
	if tag == "" {
		tag = "sandbox"
	}
	repo := checkpointRepo + labels[labelCheckpoint]
	if labels[labelCheckpoint] == "" {
		repo = checkpointRepo + "unnamed"
	}
	name := repo + ":" + tag
	c, err := p.cli.ContainerInspect(ctx, ref.ID)
	if err != nil {
		return "", classify(op, err)
	}
	err = p.loadCheckpoint(ctx, c, name, labels)
	if err == nil {
		return name, nil
	}
	if ctx.Err() != nil {
		return "", classify(op, ctx.Err())
	}
	p.cfg.Logger.Debug("checkpoint: the fast path did not apply; committing through the engine", "container", ref.ID, "err", err)
	_, err = p.cli.ContainerCommit(ctx, ref.ID, container.CommitOptions{Reference: name, Pause: true,
		Config: &container.Config{Labels: labels}})
	if err != nil {
		return "", classify(op, err)
	}
	return name, nil
}

// RemoveImage removes a checkpoint image; a missing one is not an error,
// and one an instance still uses is refused (KindConflict) and stays.
func (p *Provider) RemoveImage(ctx context.Context, ref string) error {
	_, err := p.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return classify("remove the checkpoint image", err)
	}
	return nil
}
