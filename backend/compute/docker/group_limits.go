package docker

import (
	"context"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// serviceLimits are a service's limits: its compose file's, the defaults
// for those it leaves unset. Its container is confined as a sandbox's
// (box.create): the minimal capabilities less the service's cap_drop plus
// its cap_add (the catalog allowed those: the service is alone on its
// group's network), no-new-privileges, the log cap, these limits and the
// task's runtime.
func (e *Groups) serviceLimits(s compute.GroupService) hardening.Limits {
	d := e.limits
	l := s.Limits.Or(compute.GroupLimits{MemoryBytes: d.MemoryBytes, NanoCPUs: d.NanoCPUs, Pids: d.Pids}, s.MemReservation)
	return hardening.Limits{MemoryBytes: l.MemoryBytes, NanoCPUs: l.NanoCPUs, Pids: l.Pids}
}

// CheckRuntime reports a runtime the engine does not offer as a
// *hardening.RuntimeError naming field and the engine's runtimes.
func (e *Groups) CheckRuntime(ctx context.Context, field, runtime string) error {
	return hardening.CheckRuntime(ctx, e.cli, field, runtime)
}

// ServiceDefaults are the limits a service runs with where its compose file
// sets none (admission counts them).
func (e *Groups) ServiceDefaults() compute.GroupLimits {
	d := e.limits
	return compute.GroupLimits{MemoryBytes: d.MemoryBytes, NanoCPUs: d.NanoCPUs, Pids: d.Pids}
}
