package docker

import (
	"context"
	"maps"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

var _ compute.Committer = (*Provider)(nil)

// Commit implements compute.Committer: by reading the container's writable
// layer directly where the storage driver allows it (loadCheckpoint), else
// with the engine's commit. The engine
// freezes a running container for the copy (Pause) and thaws it after; a
// paused container is copied as it is and stays paused. The copy keeps the
// container's configuration (env, working directory; its entrypoint is
// the agent's, so the copy names its source image in labelSourceImage and
// the agent takes the main command from there) and its labels merged under
// opts.Labels: an image cannot lose a label, so Create clears the
// inherited ones instead (clearInherited).
func (p *Provider) Commit(ctx context.Context, ref compute.Ref, opts compute.CommitOptions) (compute.CommittedImage, error) {
	const op = "commit"
	labels := maps.Clone(opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelScope] = p.cfg.Scope
	src, running, err := p.sourceImage(ctx, ref.ID)
	if err != nil {
		return compute.CommittedImage{}, err
	}
	defer p.commits.begin(ref.ID, running)()
	labels[labelSourceImage] = src
	if out, err := p.loadCheckpoint(ctx, ref.ID, opts.Name, labels); err == nil {
		return out, nil
	} else if ctx.Err() != nil {
		return compute.CommittedImage{}, classify(op, ctx.Err())
	} else {
		p.cfg.Logger.Debug("commit: the writable layer could not be read directly; committing through the engine", "container", ref.ID, "err", err)
	}
	res, err := p.cli.ContainerCommit(ctx, ref.ID, container.CommitOptions{
		Reference: opts.Name,
		Pause:     true,
		Comment:   "dreadnode: filesystem of " + ref.ID,
		Config:    &container.Config{Labels: labels},
	})
	if err != nil {
		return compute.CommittedImage{}, classify(op, err)
	}
	img, err := p.cli.ImageInspect(ctx, res.ID)
	if err != nil {
		// The image exists but cannot be read back: remove it rather than
		// leave an image no record names.
		_ = p.RemoveImage(context.WithoutCancel(ctx), res.ID)
		return compute.CommittedImage{}, classify(op, err)
	}
	created, _ := time.Parse(time.RFC3339Nano, img.Created)
	return compute.CommittedImage{ID: res.ID, Name: opts.Name, SizeBytes: img.Size, CreatedAt: created}, nil
}

// RemoveImage implements compute.Committer. Untagged parents left by the
// removal go with it (PruneChildren); an image a container still uses is
// KindConflict, so a snapshot in use is never pulled from under a sandbox.
func (p *Provider) RemoveImage(ctx context.Context, ref string) error {
	_, err := p.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	return classify("remove image", err)
}

// sourceImage is the image whose configuration (entrypoint, command,
// user) a copy of container id keeps: the image id was made from, or the
// one that image names when it is itself a copy. The copy's own
// configuration is the container's, whose entrypoint starts the agent
// (withAgent); a copy started from it would have its agent start another.
// running says whether id runs unpaused.
func (p *Provider) sourceImage(ctx context.Context, id string) (src string, running bool, err error) {
	c, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		return "", false, classify("commit", err)
	}
	running = c.State != nil && c.State.Running && !c.State.Paused
	img, err := p.cli.ImageInspect(ctx, c.Image)
	if err != nil {
		return "", false, classify("commit", err)
	}
	if img.Config != nil && img.Config.Labels[labelSourceImage] != "" {
		return img.Config.Labels[labelSourceImage], running, nil
	}
	return img.ID, running, nil
}

// clearInherited blanks, in labels, every label of ours that the image
// carries and labels does not set. A committed image carries the labels
// of the container it was copied from (egress rules, ports, pool and
// network markers among them), and a container inherits its image's
// labels: left alone, a fork would take its parent's firewall MAC or
// network marker. Every reader treats an empty value as absent.
func (p *Provider) clearInherited(ctx context.Context, ref string, labels map[string]string) error {
	img, err := p.cli.ImageInspect(ctx, ref)
	if err != nil {
		return classify("create", err)
	}
	if img.Config == nil {
		return nil
	}
	for k := range img.Config.Labels {
		if _, set := labels[k]; !set && strings.HasPrefix(k, "dev.dreadnode.") {
			labels[k] = ""
		}
	}
	return nil
}
