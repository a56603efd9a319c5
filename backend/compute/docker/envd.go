package docker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// envdCache remembers where each container's agent listens and its token:
// both are fixed for the container's life (a paused container keeps its
// address), so the traffic router inspects a container once, not once per
// envd request. Bounded: past envdCacheMax entries it starts over.
type envdCache struct {
	mu sync.Mutex
	m  map[string]envdAddr
}

type envdAddr struct{ url, token string }

const envdCacheMax = 4096

// Envd implements compute.EnvdLocator: the injected agent on port
// compute.EnvdPort of the container's address, with the token of its label.
func (p *Provider) Envd(ctx context.Context, ref compute.Ref) (string, string, error) {
	p.envds.mu.Lock()
	a, ok := p.envds.m[ref.ID]
	p.envds.mu.Unlock()
	if ok {
		return a.url, a.token, nil
	}
	c, err := p.cli.ContainerInspect(ctx, ref.ID)
	if err != nil {
		return "", "", classify("envd", err)
	}
	ip, token := agentEndpoint(c)
	if token == "" {
		return "", "", compute.Errorf(compute.KindNotFound, "envd", nil,
			"this sandbox runs no agent (it was created without one), so nothing serves envd on port %d", compute.EnvdPort)
	}
	if ip == "" {
		return "", "", compute.Errorf(compute.KindUnavailable, "envd", nil, "the sandbox has no network address yet")
	}
	a = envdAddr{url: fmt.Sprintf("http://%s:%d", ip, compute.EnvdPort), token: token}
	p.envds.mu.Lock()
	if p.envds.m == nil || len(p.envds.m) >= envdCacheMax {
		p.envds.m = map[string]envdAddr{}
	}
	p.envds.m[ref.ID] = a
	p.envds.mu.Unlock()
	return a.url, a.token, nil
}

// agentEndpoint is where a container's agent listens (its first network
// address, by network name) and the token of its label; either is "" when
// the container has none.
func agentEndpoint(c container.InspectResponse) (ip, token string) {
	if c.Config != nil {
		token = c.Config.Labels[labelAgentToken]
	}
	if c.NetworkSettings != nil {
		for _, name := range slices.Sorted(maps.Keys(c.NetworkSettings.Networks)) {
			if n := c.NetworkSettings.Networks[name]; n != nil && n.IPAddress != "" {
				return n.IPAddress, token
			}
		}
	}
	return "", token
}
