package app

import (
	"github.com/dreadnode/terraform-provider-dreadnode/backend/api"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/e2bapi"
)

// e2bEdge is E2B's control plane under /e2b over the same lifecycle service
// (so E2B_API_URL=<backend>/e2b points E2B's SDKs here). Its domain is
// where sandbox traffic is routed: DREADNODE_SANDBOX_DOMAIN (localhost).
func (a *App) e2bEdge() api.Edge {
	edge := e2bapi.New(e2bapi.Config{Lifecycle: a.Lifecycle, DB: a.DB, Domain: a.Config.SandboxDomain,
		Events: a.Events, Volumes: a.Volumes, Metrics: a.Metrics, Templates: a.Templates})
	return api.Edge{Prefix: e2bapi.Prefix, Wrap: e2bapi.Errors, Routes: edge.Register, Public: edge.RegisterPublic}
}
