package main

// Egress at scale (issue #20): the rules of 1,000 live sandboxes hold
// without a create paying for them. Each sandbox with allowOut/denyOut has
// its own nft chain, reached through a verdict map keyed by its MAC
// address, so installing one must cost the same beside 10 or 1,000 others.
// Create→running p50 of a sandbox with a policy is measured at 10 live
// (policy) sandboxes and at -egress-live, each against a raw docker
// create+start taken at the same moment on the same engine (the engine's
// own cost grows with its containers too); the growth that is ours is the
// ratio of those two ratios.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
)

var egressLive = flag.Int("egress-live", 1000, "live sandboxes with an egress policy for the egress part's second measurement (the first is at 10)")

// egressPolicy is E2B's "only these": nothing is ever sent by the idle
// sandboxes; 192.0.2.0/24 is a documentation range.
var egressPolicy = map[string]any{"denyOut": []string{"0.0.0.0/0"}, "allowOut": []string{"192.0.2.0/24"}}

func egressPart(ctx context.Context) {
	// Registered before the backend: runs after its removal, and removes
	// the rules of sandboxes whose containers the removal force-deleted
	// (a new provider sweeps the rules of every gone container at start).
	atExit(sweepEgressRules)
	b := start(ctx, 0)
	defer b.close()

	base := min(10, *egressLive)
	fill := func(n int) {
		for have := b.live(); have < n; have = b.live() {
			parallel(min(n-have, 16), func(int) { b.createWithPolicy() })
		}
	}
	fill(base)
	ours10, raw10 := b.egressSamples(ctx)
	t0 := time.Now()
	fill(*egressLive)
	fillTime := time.Since(t0)
	oursN, rawN := b.egressSamples(ctx)

	o10, r10, oN, rN := pct(ours10, 50), pct(raw10, 50), pct(oursN, 50), pct(rawN, 50)
	fmt.Printf("%-28s p50 at %d live: ours %6.1f ms raw %6.1f ms (%.2f×); at %d live: ours %6.1f ms raw %6.1f ms (%.2f×)\n",
		"create with egress policy", base, ms(o10), ms(r10), float64(o10)/float64(r10), *egressLive, ms(oN), ms(rN), float64(oN)/float64(rN))
	fmt.Printf("%-28s ours p50 %d→%d live %.2f× (raw %.2f×); ours/raw growth %.2f× (target ≤ 1.10×: no per-sandbox scan); filled %d in %.1f s\n",
		"", base, *egressLive, float64(oN)/float64(o10), float64(rN)/float64(r10),
		(float64(oN)/float64(rN))/(float64(o10)/float64(r10)), *egressLive-base, fillTime.Seconds())
	b.cleanup()
}

// live counts the sandboxes this backend made that are still kept.
func (b *backend) live() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ids)
}

// createWithPolicy creates a sandbox with egressPolicy, waits until it runs
// and keeps it live (cleanup deletes it).
func (b *backend) createWithPolicy() (string, time.Duration) {
	t0 := time.Now()
	code, body := b.do("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 3600, "network": egressPolicy})
	d := time.Since(t0)
	var sb struct{ SandboxID, State string }
	_ = json.Unmarshal(body, &sb)
	if code != http.StatusCreated || sb.State != string(sbx.StateRunning) {
		fail(fmt.Errorf("create with an egress policy: %d %s", code, body))
	}
	b.mu.Lock()
	b.ids = append(b.ids, sb.SandboxID)
	b.mu.Unlock()
	return sb.SandboxID, d
}

// egressSamples times -n creates with a policy (each deleted before the
// next, so the live count stays put), interleaved with as many raw docker
// create+starts (removed likewise).
func (b *backend) egressSamples(ctx context.Context) (ours, raw []time.Duration) {
	for i := range *samples {
		id, d := b.createWithPolicy()
		ours = append(ours, d)
		b.mu.Lock()
		b.ids = b.ids[:len(b.ids)-1]
		b.mu.Unlock()
		if code, body := b.do("DELETE", "/sandboxes/"+id, nil); code != http.StatusNoContent {
			fail(fmt.Errorf("delete %s: %d %s", id, code, body))
		}
		name := fmt.Sprintf("bench-rawe-%d-%s", i, ids.New())
		raw = append(raw, rawCreateStart(ctx, engine, name))
		if err := engine.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil {
			fail(err)
		}
	}
	return ours, raw
}

// sweepEgressRules removes the egress rules whose sandbox container is
// gone, as a backend starting on this host does.
func sweepEgressRules() {
	p, err := docker.New(docker.Config{Network: benchNetwork})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: sweeping the egress rules the bench left: %v\n", err)
		return
	}
	_ = p.Close()
}
