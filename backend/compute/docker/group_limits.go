package docker

import (
	"context"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// harden confines a service's container (see package hardening): the
// minimal capabilities less the service's cap_drop plus its cap_add (the
// catalog allowed those: the service is alone on its group's network),
// no-new-privileges, the log cap, its limits (the defaults for those it
// leaves unset) and the task's runtime.
func (e *Groups) harden(host *container.HostConfig, s compute.GroupService, runtime string) {
	hardening.Apply(host, s.CapAdd...)
	host.CapAdd = hardening.Without(host.CapAdd, s.CapDrop, s.CapAdd)
	d := e.limits
	l := s.Limits.Or(compute.GroupLimits{MemoryBytes: d.MemoryBytes, NanoCPUs: d.NanoCPUs, Pids: d.Pids}, s.MemReservation)
	hardening.Limits{MemoryBytes: l.MemoryBytes, NanoCPUs: l.NanoCPUs, Pids: l.Pids}.Set(&host.Resources)
	host.Runtime = runtime
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
