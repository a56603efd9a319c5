package docker

// WarmReady is the number of warm containers of the base template ready to
// be claimed (0 without a pool); benchmarks wait on it between samples.
func (p *Provider) WarmReady() int {
	if p.pool == nil {
		return 0
	}
	return p.pool.readyCount(BaseTemplate)
}
