package app

import (
	"context"
	"fmt"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/config"
)

// Overcommit of the Docker engine's size in the default capacity. On Docker
// a sandbox's cpuCount and memoryMB are ceilings (a CFS quota, a memory
// limit), not reservations: sandboxes mostly idle, so summing ceilings
// against the bare engine size would refuse work the engine runs well.
// Operators wanting strict limits set DREADNODE_CAPACITY_CPU/_MEMORY_MB.
const (
	dockerCPUOvercommit    = 32
	dockerMemoryOvercommit = 4
)

// capacityConfig reads DREADNODE_CAPACITY_SANDBOXES, DREADNODE_CAPACITY_CPU
// and DREADNODE_CAPACITY_MEMORY_MB (0 or unset: the provider's default).
func capacityConfig(e config.Backend) (admission.Capacity, error) {
	c := admission.Capacity{Sandboxes: e.CapacitySandboxes, CPU: e.CapacityCPU, MemoryMB: e.CapacityMemoryMB}
	for _, v := range []struct {
		name string
		dst  *int
	}{{"DREADNODE_CAPACITY_SANDBOXES", &c.Sandboxes}, {"DREADNODE_CAPACITY_CPU", &c.CPU}, {"DREADNODE_CAPACITY_MEMORY_MB", &c.MemoryMB}} {
		if *v.dst < 0 {
			return c, fmt.Errorf("%s: must be 0 (the provider's default) or more, got %d", v.name, *v.dst)
		}
	}
	return c, nil
}

// providerCapacity is the capacity of the deployment's provider: the
// configured values, and for Docker the engine's size (overcommitted, see
// above) where none is configured. E2B enforces its own concurrency limit
// (its 429 requeues), so it is unlimited here unless configured.
func (a *App) providerCapacity(ctx context.Context) (map[string]admission.Capacity, error) {
	c := a.Config.Capacity
	if a.Config.Provider == "docker" && (c.CPU == 0 || c.MemoryMB == 0) {
		if p, ok := a.Provider.(interface {
			EngineSize(context.Context) (int, int, error)
		}); ok {
			ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cpus, mem, err := p.EngineSize(ictx)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("reading the Docker engine's size for its capacity (or set DREADNODE_CAPACITY_CPU and DREADNODE_CAPACITY_MEMORY_MB): %w", err)
			}
			if c.CPU == 0 {
				c.CPU = cpus * dockerCPUOvercommit
			}
			if c.MemoryMB == 0 {
				c.MemoryMB = mem * dockerMemoryOvercommit
			}
		}
	}
	return map[string]admission.Capacity{a.Config.Provider: c}, nil
}
