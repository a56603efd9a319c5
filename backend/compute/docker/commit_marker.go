package docker

import (
	"sync"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// commitPauses counts, per container, the commits in flight that found it
// running (not paused): such a container is paused for the copy only
// (loadLayer's pause, or the engine's commit's), and Get and List show it
// running meanwhile. Otherwise the reconciler, which compares a running
// record with a paused instance as drift, would unpause it in the middle
// of the copy (a checkpoint of a filesystem still being written, or the
// engine's commit failing on its own unpause). Only this process's commits
// are known: a replica sharing the engine, holding the record's lease,
// still sees the pause (it repairs it; the copy is then not consistent).
type commitPauses struct {
	mu sync.Mutex
	n  map[string]int
}

// begin notes a commit of container id (running: it ran unpaused when
// the commit began); the returned func ends it.
func (c *commitPauses) begin(id string, running bool) func() {
	if !running {
		return func() {}
	}
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.n[id]--; c.n[id] <= 0 {
			delete(c.n, id)
		}
		c.mu.Unlock()
	}
}

// mask shows inst running while a commit that found it running holds it
// paused.
func (c *commitPauses) mask(inst *compute.Instance) {
	if inst.Status != compute.StatusPaused {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[inst.Ref.ID] > 0 {
		inst.Status = compute.StatusRunning
	}
}
