package docker

import "context"

// EngineSize is what the engine reports of its host (docker info): CPUs and
// memory in MB. Admission derives the Docker provider's default capacity
// from it.
func (p *Provider) EngineSize(ctx context.Context) (cpus, memoryMB int, err error) {
	info, err := p.cli.Info(ctx)
	if err != nil {
		return 0, 0, classify("info", err)
	}
	return info.NCPU, int(info.MemTotal >> 20), nil
}
