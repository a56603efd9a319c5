package e2b

import (
	"context"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Envd implements compute.EnvdLocator: envd through E2B's proxy, with the
// sandbox's envdAccessToken (from Ref.Data, else as E2B reports it now).
func (p *Provider) Envd(ctx context.Context, ref compute.Ref) (string, string, error) {
	token := parseRefData(ref.Data).EnvdAccessToken
	if token == "" {
		inst, err := p.get(ctx, "envd", ref, false)
		if err != nil {
			return "", "", err
		}
		token = parseRefData(inst.Ref.Data).EnvdAccessToken
	}
	return p.cfg.EnvdURL(ref.ID), token, nil
}
