package docker

import (
	"context"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/templatebuild"
)

var _ compute.ImageSweeper = (*Provider)(nil)

// OwnedImages implements compute.ImageSweeper: this deployment's images
// (labelScope) that hold a fork's checkpoint or a snapshot, or carry a
// template build's tag (dreadnode-template/<template>:<build>). A
// template build's step images (its cache) are no record's and are left
// alone; another deployment's images are never listed.
func (p *Provider) OwnedImages(ctx context.Context) ([]compute.OwnedImage, error) {
	imgs, err := p.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labelScope+"="+p.cfg.Scope))})
	if err != nil {
		return nil, classify("list images", err)
	}
	var out []compute.OwnedImage
	for _, img := range imgs {
		o := compute.OwnedImage{ID: img.ID, Created: time.Unix(img.Created, 0),
			Checkpoint: img.Labels[compute.LabelCheckpoint], SnapshotBuild: img.Labels[compute.LabelSnapshotBuild]}
		for _, tag := range img.RepoTags {
			if strings.HasPrefix(tag, templatebuild.RefRepo+"/") {
				o.TemplateTags = append(o.TemplateTags, tag)
			}
		}
		if o.Checkpoint != "" || o.SnapshotBuild != "" || len(o.TemplateTags) > 0 {
			out = append(out, o)
		}
	}
	return out, nil
}
