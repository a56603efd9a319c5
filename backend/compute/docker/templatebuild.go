package docker

import (
	"context"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/templatebuild"
)

var _ compute.TemplateBuilder = (*Provider)(nil)

// builder is the template build engine over this provider's client and
// sandbox network.
func (p *Provider) builder() *templatebuild.Builder {
	p.tbOnce.Do(func() {
		p.tb = templatebuild.New(templatebuild.Host{
			Client: p.cli,
			Network: func(ctx context.Context) (string, error) {
				return p.ensureNetwork(ctx, p.networkName(false), false)
			},
			Labels:     map[string]string{labelScope: p.cfg.Scope},
			StorageOpt: p.storageOpt,
		})
	})
	return p.tb
}

// BuildTemplate implements compute.TemplateBuilder.
func (p *Provider) BuildTemplate(ctx context.Context, req compute.TemplateBuild) (compute.TemplateBuildResult, error) {
	if err := p.egressReady(); err != nil {
		return compute.TemplateBuildResult{}, &compute.TemplateBuildError{Kind: compute.KindNetwork, Msg: err.Error(), Err: err}
	}
	return p.builder().Build(ctx, req)
}

// TemplateImage implements compute.TemplateBuilder.
func (p *Provider) TemplateImage(ctx context.Context, ref string) (compute.TemplateImage, error) {
	return p.builder().Image(ctx, ref)
}

// RemoveTemplateImage implements compute.TemplateBuilder.
func (p *Provider) RemoveTemplateImage(ctx context.Context, ref string) error {
	return p.builder().Remove(ctx, ref)
}
