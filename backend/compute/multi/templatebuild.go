package multi

import (
	"context"
	"sort"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

var _ compute.TemplateBuilder = (*Provider)(nil)

// builder is the provider that builds templates: the default one when it
// can, else the first (by name) that can.
func (p *Provider) builder() (compute.TemplateBuilder, error) {
	if b, ok := p.def.(compute.TemplateBuilder); ok {
		return b, nil
	}
	names := make([]string, 0, len(p.byName))
	for n := range p.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if b, ok := p.byName[n].(compute.TemplateBuilder); ok {
			return b, nil
		}
	}
	return nil, &compute.TemplateBuildError{Kind: compute.KindInvalid, Msg: "no configured provider builds templates (the Docker provider does)"}
}

// BuildTemplate implements compute.TemplateBuilder.
func (p *Provider) BuildTemplate(ctx context.Context, req compute.TemplateBuild) (compute.TemplateBuildResult, error) {
	b, err := p.builder()
	if err != nil {
		return compute.TemplateBuildResult{}, err
	}
	return b.BuildTemplate(ctx, req)
}

// TemplateImage implements compute.TemplateBuilder.
func (p *Provider) TemplateImage(ctx context.Context, ref string) (compute.TemplateImage, error) {
	b, err := p.builder()
	if err != nil {
		return compute.TemplateImage{}, err
	}
	return b.TemplateImage(ctx, ref)
}

// RemoveTemplateImage implements compute.TemplateBuilder.
func (p *Provider) RemoveTemplateImage(ctx context.Context, ref string) error {
	b, err := p.builder()
	if err != nil {
		return err
	}
	return b.RemoveTemplateImage(ctx, ref)
}
