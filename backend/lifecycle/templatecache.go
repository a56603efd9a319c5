package lifecycle

import (
	"context"
	"sync"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// templateCache keeps the provider's template list once it has been read.
// A failed read is not kept: the next create asks the provider again, so a
// provider that was briefly unreachable at start does not refuse every
// create until the backend restarts. The mutex (not a sync.Once, which
// cannot be reset while other goroutines may call Do) makes a read and the
// map it fills one step for concurrent creates.
type templateCache struct {
	mu        sync.Mutex
	templates map[string]compute.Template // nil until a read succeeds
}

// get is the template list, read from load on the first call and after a
// failed one.
func (c *templateCache) get(ctx context.Context, load func(context.Context) ([]compute.Template, error)) (map[string]compute.Template, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.templates != nil {
		return c.templates, nil
	}
	ts, err := load(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]compute.Template, len(ts))
	for _, t := range ts {
		m[t.ID] = t
	}
	c.templates = m
	return m, nil
}
