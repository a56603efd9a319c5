package docker

import (
	"context"
	"sync"
	"time"

	"github.com/docker/docker/client"
)

// diskFresh is how long a disk-usage sample is served before Metrics asks
// for a new one (in the background).
const diskFresh = 10 * time.Second

// diskCache holds each container's writable-layer size. The engine computes
// it by walking the layer, which takes over a second under load and
// serialises in the daemon, so it is never on a request's path but once: the
// first Metrics of an instance waits for its first sample; later calls get
// the last sample at once and, when it is older than diskFresh, start one
// refresh in the background (one at a time per instance).
type diskCache struct {
	mu sync.Mutex
	m  map[string]*diskSample
}

type diskSample struct {
	bytes      uint64
	at         time.Time
	refreshing bool
	ready      chan struct{} // closed after the first sample
}

// used returns id's last sampled disk usage (0 when unknown), waiting only
// for the very first sample, and at most until ctx ends.
func (d *diskCache) used(ctx context.Context, cli *client.Client, id string) uint64 {
	d.mu.Lock()
	if d.m == nil || len(d.m) > 10000 { // forget instances deleted behind our back
		d.m = map[string]*diskSample{}
	}
	s, ok := d.m[id]
	if !ok {
		s = &diskSample{ready: make(chan struct{}), refreshing: true}
		d.m[id] = s
		go d.sample(cli, id, s)
	} else if !s.refreshing && !s.at.IsZero() && time.Since(s.at) > diskFresh {
		s.refreshing = true
		go d.sample(cli, id, s)
	}
	d.mu.Unlock()
	select {
	case <-s.ready:
	case <-ctx.Done():
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return s.bytes
}

func (d *diskCache) sample(cli *client.Client, id string, s *diskSample) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := cli.ContainerInspectWithRaw(ctx, id, true)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && c.SizeRw != nil && *c.SizeRw > 0 {
		s.bytes = uint64(*c.SizeRw)
	}
	first := s.at.IsZero()
	s.at, s.refreshing = time.Now(), false
	if first {
		close(s.ready)
	}
}

func (d *diskCache) forget(id string) {
	d.mu.Lock()
	delete(d.m, id)
	d.mu.Unlock()
}
