package compose

import (
	"context"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// serviceLimits are the limits of service s: its own (mem_limit, cpus,
// pids_limit, else deploy.resources.limits; compose-go refuses the two
// forms when they disagree), else def for each one it leaves unset.
func serviceLimits(s types.ServiceConfig, def hardening.Limits) hardening.Limits {
	var dl types.Resource
	if s.Deploy != nil && s.Deploy.Resources.Limits != nil {
		dl = *s.Deploy.Resources.Limits
	}
	l := def
	if m := firstPositive(int64(s.MemLimit), int64(dl.MemoryBytes)); m > 0 {
		l.MemoryBytes = m
	} else {
		// A default below the service's own reservation would be refused.
		l.MemoryBytes = max(l.MemoryBytes, int64(s.MemReservation))
	}
	if c := max(s.CPUS, float32(dl.NanoCPUs)); c > 0 {
		l.NanoCPUs = int64(float64(c) * 1e9)
	}
	if p := firstPositive(s.PidsLimit, dl.Pids); p > 0 {
		l.Pids = p
	}
	return l
}

func firstPositive(vs ...int64) int64 {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}

// harden confines a service's container (see package hardening): the
// minimal capabilities less the service's cap_drop plus its cap_add (the
// catalog allowed those: the service is alone on its environment's
// network), no-new-privileges, the log cap, its limits and the task's
// runtime.
func (e *Engine) harden(host *container.HostConfig, s types.ServiceConfig, runtime string) {
	hardening.Apply(host, s.CapAdd...)
	host.CapAdd = hardening.Without(host.CapAdd, s.CapDrop, s.CapAdd)
	serviceLimits(s, e.limits).Set(&host.Resources)
	host.Runtime = runtime
}

// CheckRuntime reports a runtime the engine does not offer as a
// *hardening.RuntimeError naming field and the engine's runtimes.
func (e *Engine) CheckRuntime(ctx context.Context, field, runtime string) error {
	return hardening.CheckRuntime(ctx, e.cli, field, runtime)
}
