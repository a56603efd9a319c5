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
// compute.EnvdPort of the container's address, with its token (agenttoken.go).
func (p *Provider) Envd(ctx context.Context, ref compute.Ref) (string, string, error) {
	if a, ok := p.envds.get(ref.ID); ok {
		return a.url, a.token, nil
	}
	c, err := p.cli.ContainerInspect(ctx, ref.ID)
	if err != nil {
		return "", "", classify("envd", err)
	}
	if !hasAgent(c) {
		return "", "", compute.Errorf(compute.KindNotFound, "envd", nil,
			"this sandbox runs no agent (it was created without one), so nothing serves envd on port %d", compute.EnvdPort)
	}
	ip, token := agentIP(c), p.agentKey.tokenOf(c)
	if ip == "" {
		return "", "", compute.Errorf(compute.KindUnavailable, "envd", nil, "the sandbox has no network address yet")
	}
	a := envdAddr{url: envdURL(ip), token: token}
	p.envds.put(ref.ID, a)
	return a.url, a.token, nil
}

func envdURL(ip string) string { return fmt.Sprintf("http://%s:%d", ip, compute.EnvdPort) }

func (e *envdCache) get(id string) (envdAddr, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.m[id]
	return a, ok
}

// forget drops id's entry: a container started again (after a
// filesystem-only pause) may have another address.
func (e *envdCache) forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, id)
}

func (e *envdCache) put(id string, a envdAddr) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil || len(e.m) >= envdCacheMax {
		e.m = map[string]envdAddr{}
	}
	e.m[id] = a
}

// agentIP is where a container's agent listens: its first network
// address, by network name ("" when it has none).
func agentIP(c container.InspectResponse) string {
	if c.NetworkSettings != nil {
		for _, name := range slices.Sorted(maps.Keys(c.NetworkSettings.Networks)) {
			if n := c.NetworkSettings.Networks[name]; n != nil && n.IPAddress != "" {
				return n.IPAddress
			}
		}
	}
	return ""
}
