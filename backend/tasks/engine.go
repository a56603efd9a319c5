package tasks

import (
	"context"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Engine is the runtime task environments run on: a group provider
// (compute/docker's, the default, or compute/e2b's), one group per
// environment, the group id being the environment's id. Every resource it
// creates is labelled with that id so that Snapshot, Remove and the sweep
// find it again after a restart.
type Engine = compute.GroupProvider

// KeepAliver is implemented by engines whose instances have a provider-side
// time to live (E2B): the service asks them to keep an environment's
// instances alive at least d from now when it becomes ready and when it is
// resumed. The service's own sweep still ends the environment at its
// expires_at; the provider's TTL is only the backstop for a backend that is
// down.
type KeepAliver = compute.GroupKeepAliver

// Named is implemented by engines that are not Docker: the name goes into
// the ledger record's provider field (default "docker").
type Named interface {
	Name() string
}

// RuntimeChecker is implemented by engines that run services on a named
// runtime (Docker): CheckRuntime returns a *hardening.RuntimeError when the
// engine does not offer runtime. Engines without it (E2B, whose instances
// are microVMs already) ignore task.yaml's runtime.
type RuntimeChecker interface {
	CheckRuntime(ctx context.Context, field, runtime string) error
}
