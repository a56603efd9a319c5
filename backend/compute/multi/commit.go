package multi

import (
	"context"
	"fmt"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

var _ compute.Committer = (*Provider)(nil)

// Commit goes to the provider owning ref; one that cannot commit answers
// KindInvalid, naming itself.
func (p *Provider) Commit(ctx context.Context, ref compute.Ref, opts compute.CommitOptions) (compute.CommittedImage, error) {
	sub := p.of(ref)
	c, ok := sub.(compute.Committer)
	if !ok {
		return compute.CommittedImage{}, compute.Errorf(compute.KindInvalid, "commit", nil, "the %s provider cannot copy a sandbox's filesystem", sub.Name())
	}
	return c.Commit(ctx, ref, opts)
}

// RemoveImage asks every provider that commits: an image id names one
// engine's image, and a missing image is no error to the others.
func (p *Provider) RemoveImage(ctx context.Context, image string) error {
	for _, name := range p.names() {
		if c, ok := p.byName[name].(compute.Committer); ok {
			if err := c.RemoveImage(ctx, image); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}
