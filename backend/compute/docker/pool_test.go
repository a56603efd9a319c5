package docker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// poolEntries waits until the pool holds n ready containers of the base template.
func poolEntries(t *testing.T, p *Provider, n int) []poolEntry {
	t.Helper()
	var es []poolEntry
	eventually(t, 60*time.Second, func() error {
		p.pool.mu.Lock()
		es = slices.Clone(p.pool.ready[BaseTemplate])
		p.pool.mu.Unlock()
		if len(es) != n {
			return fmt.Errorf("pool holds %d containers, want %d", len(es), n)
		}
		return nil
	})
	return es
}

func TestWarmPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	net := testNetwork + "-pool"

	// A pool container left by a previous process is removed at start.
	plain := newProvider(t, Config{Network: net})
	staleName := poolPrefix + "stale" + randomHex(4)
	staleID, err := plain.createContainer(ctx, staleName, DefaultBaseImage, nil,
		map[string]string{compute.LabelManaged: "true", labelPool: BaseTemplate, labelScope: net}, nil, nil, 1, 64, false, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.removeQuietly(staleID) })

	p := newProvider(t, Config{Network: net, WarmPoolSize: 1})
	pooled := poolEntries(t, p, 1)[0]
	eventually(t, 30*time.Second, func() error {
		if _, err := p.cli.ContainerInspect(ctx, staleID); err == nil {
			return fmt.Errorf("stale pool container %s still exists", staleName)
		}
		return nil
	})
	list, err := p.List(ctx)
	if err != nil || slices.ContainsFunc(list, func(i compute.Instance) bool { return i.Ref.ID == pooled.id }) {
		t.Fatalf("List shows the unclaimed pool container: %+v %v", list, err)
	}

	// A compatible Create claims it, and the record id survives the rename.
	spec := testSpec()
	spec.Metadata = map[string]string{"ignored": "by the pool"}
	inst := mustCreate(t, p, spec)
	if inst.Ref.ID != pooled.id || inst.RecordID != spec.RecordID || inst.Status != compute.StatusRunning || inst.Endpoints[8080].Port == 0 {
		t.Fatalf("claim: %+v (pool container %s)", inst, pooled.id)
	}
	if got, err := p.Get(ctx, inst.Ref); err != nil || got.RecordID != spec.RecordID {
		t.Fatalf("get of a claimed container: %+v %v", got, err)
	}
	list, err = p.List(ctx)
	if err != nil || !slices.ContainsFunc(list, func(i compute.Instance) bool { return i.Ref.ID == inst.Ref.ID && i.RecordID == spec.RecordID }) {
		t.Fatalf("List misses the claimed container: %+v %v", list, err)
	}
	// Idempotent like any Create: the second one adopts, it does not claim again.
	again, err := p.Create(ctx, spec)
	if err != nil || again.Ref.ID != inst.Ref.ID {
		t.Fatalf("second create: %+v %v", again, err)
	}

	// Other resources are applied to the claimed container.
	pooled = poolEntries(t, p, 1)[0]
	spec = testSpec()
	spec.MemoryMB, spec.CPUCount = 256, 2
	inst = mustCreate(t, p, spec)
	c, err := p.cli.ContainerInspect(ctx, inst.Ref.ID)
	if err != nil || inst.Ref.ID != pooled.id || c.HostConfig.Memory != 256<<20 || c.HostConfig.NanoCPUs != 2e9 || inst.MemoryMB != 256 {
		t.Fatalf("claim with resources: %+v %v", inst, err)
	}

	// Specs the pool cannot serve are created cold.
	pooled = poolEntries(t, p, 1)[0]
	spec = testSpec()
	spec.EnvVars = map[string]string{"A": "b"}
	if inst = mustCreate(t, p, spec); inst.Ref.ID == pooled.id {
		t.Fatal("a spec with env vars claimed a pool container")
	}

	// Close removes the unclaimed container and leaves claimed ones alone.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.cli.ContainerInspect(ctx, pooled.id); err == nil {
		t.Fatal("Close left the unclaimed pool container")
	}
	if _, err := plain.Get(ctx, inst.Ref); err != nil {
		t.Fatalf("Close removed a sandbox: %v", err)
	}
}

// A pool container never shows up in Watch, claimed ones do (by record id).
func TestWarmPoolWatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newProvider(t, Config{Network: testNetwork + "-poolwatch", WarmPoolSize: 1})
	events := p.Watch(ctx)
	pooled := poolEntries(t, p, 1)[0]
	spec := testSpec()
	inst := mustCreate(t, p, spec)
	if inst.Ref.ID != pooled.id {
		t.Fatalf("not claimed from the pool")
	}
	if err := p.cli.ContainerKill(ctx, inst.Ref.ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Ref.ID == inst.Ref.ID && ev.RecordID == spec.RecordID && ev.Status == compute.StatusExited {
				return
			}
		case <-timeout:
			t.Fatal("no exit event for the claimed pool container")
		}
	}
}

// Replicas of one deployment keep one pool each on one engine: a replica
// closing removes its own unclaimed containers only, and a removal never
// takes a container another replica has just claimed.
func TestWarmPoolsOfReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	net := testNetwork + "-pools"
	a := newProvider(t, Config{Network: net, WarmPoolSize: 1})
	poolEntries(t, a, 1)
	b := newProvider(t, Config{Network: net, WarmPoolSize: 1}) // removes a's (it cannot tell a leftover)
	poolEntries(t, b, 1)
	// a finds its container gone at its next claim, creates cold, and refills.
	mustCreate(t, a, testSpec())
	var mine poolEntry
	eventually(t, 60*time.Second, func() error {
		a.pool.mu.Lock()
		es := slices.Clone(a.pool.ready[BaseTemplate])
		a.pool.mu.Unlock()
		for _, e := range es {
			if _, err := a.cli.ContainerInspect(ctx, e.id); err == nil {
				mine = e
				return nil
			}
		}
		return fmt.Errorf("a has no live pool container yet (%d entries)", len(es))
	})

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.ContainerInspect(ctx, mine.id); err != nil {
		t.Fatalf("b's Close removed a's pool container: %v", err)
	}
	inst := mustCreate(t, a, testSpec())
	if inst.Ref.ID != mine.id {
		t.Fatalf("a created %s cold; its pool container %s was there to claim", inst.Ref.ID, mine.id)
	}

	// A removal that listed a pool container just before another replica
	// claimed it (renamed it to its record's name) leaves the sandbox alone.
	next := poolEntries(t, a, 1)[0]
	claimed := mustCreate(t, a, testSpec())
	if claimed.Ref.ID != next.id {
		t.Fatalf("a did not claim its pool container %s", next.id)
	}
	b2 := newProvider(t, Config{Network: net})
	b2pool := &pool{p: b2}
	b2pool.retire(ctx, next.id, next.name) // the name it was listed under
	if got, err := a.Get(ctx, claimed.Ref); err != nil || got.Status != compute.StatusRunning {
		t.Fatalf("a removal of a stale listing took a claimed sandbox: %+v %v", got, err)
	}
}
