package docker

import (
	"context"
	"sync"
	"time"
)

// Engine readings that are too slow for a request's path (from a tenth of a
// second to over a second on a busy host) are sampled off it here.
const (
	// metricsFresh is the age past which a request for an instance's
	// metrics starts a new reading; the engine's own stats period is 1 s.
	metricsFresh = time.Second
	// diskFresh is the same for disk usage, which the engine computes by
	// walking the container's writable layer.
	diskFresh = 10 * time.Second
)

// sampler keeps the latest reading of each instance asked about. The first
// request for an instance waits for its first reading; later ones get the
// latest at once and, when it is older than fresh, start one new reading in
// the background (one at a time per instance). A failed reading is answered
// once and forgotten, so the next request reads again.
type sampler[T any] struct {
	mu sync.Mutex
	m  map[string]*sample[T]
}

type sample[T any] struct {
	v          T
	err        error
	at         time.Time
	refreshing bool
	ready      chan struct{} // closed after the first reading
}

func (c *sampler[T]) get(ctx context.Context, id string, fresh time.Duration, read func(context.Context) (T, error)) (T, error) {
	c.mu.Lock()
	s := c.entry(id, fresh, read)
	c.mu.Unlock()
	select {
	case <-s.ready:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.v, s.err
}

// entry is id's sample, a reading started when there is none or it is
// older than fresh (c.mu held).
func (c *sampler[T]) entry(id string, fresh time.Duration, read func(context.Context) (T, error)) *sample[T] {
	if c.m == nil || len(c.m) > 10000 { // forget instances deleted behind our back
		c.m = map[string]*sample[T]{}
	}
	s, ok := c.m[id]
	if !ok {
		s = &sample[T]{ready: make(chan struct{}), refreshing: true}
		c.m[id] = s
		go c.read(id, s, read)
	} else if !s.refreshing && !s.at.IsZero() && time.Since(s.at) > fresh {
		s.refreshing = true
		go c.read(id, s, read)
	}
	return s
}

// peek is get without waiting: the latest reading of id (ok false before
// the first), starting a reading when there is none or it is stale.
func (c *sampler[T]) peek(id string, fresh time.Duration, read func(context.Context) (T, error)) (T, bool) {
	c.mu.Lock()
	s := c.entry(id, fresh, read)
	v, have := s.v, !s.at.IsZero() && s.err == nil
	c.mu.Unlock()
	return v, have
}

func (c *sampler[T]) read(id string, s *sample[T], read func(context.Context) (T, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	s.v, s.err = v, err
	first := s.at.IsZero()
	s.at, s.refreshing = time.Now(), false
	if err != nil && c.m[id] == s {
		delete(c.m, id)
	}
	if first {
		close(s.ready)
	}
}

func (c *sampler[T]) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// diskUsed reads the size of a container's writable layer (0 when unknown).
func (p *Provider) diskUsed(ctx context.Context, id string) (uint64, error) {
	c, _, err := p.cli.ContainerInspectWithRaw(ctx, id, true)
	if err != nil || c.SizeRw == nil || *c.SizeRw <= 0 {
		return 0, err
	}
	return uint64(*c.SizeRw), nil
}
