package main

// Egress at scale (issue #20): the rules of 1,000 live sandboxes hold
// without a create paying for them. Each sandbox with allowOut/denyOut has
// its own nft chain, reached through a verdict map keyed by its MAC
// address, so installing one must cost the same beside 10 or 1,000 others.
// Create→running p50 of a sandbox with a policy is measured at 10 live
// (policy) sandboxes and at -egress-live, each against a sandbox without a
// policy and a raw docker create+start taken at the same moments on the
// same engine (the engine's and the backend's own costs grow with their
// containers too); the growth the rules add is the ratio of the
// policy/no-policy ratios at the two sizes. The rules' install alone (one
// nft transaction) is then timed beside 10 and -egress-live others in a
// network namespace of the bench's own.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/egress"
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
	pol10, plain10, raw10 := b.egressSamples(ctx)
	t0 := time.Now()
	fill(*egressLive)
	fillTime := time.Since(t0)
	polN, plainN, rawN := b.egressSamples(ctx)

	p10, n10, r10 := pct(pol10, 50), pct(plain10, 50), pct(raw10, 50)
	pN, nN, rN := pct(polN, 50), pct(plainN, 50), pct(rawN, 50)
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	for _, row := range []struct {
		live           int
		pol, plain, rw time.Duration
	}{{base, p10, n10, r10}, {*egressLive, pN, nN, rN}} {
		fmt.Printf("%-28s p50 at %4d live: policy %6.1f ms  no policy %6.1f ms  raw %6.1f ms  (policy/no policy %.2f×, policy/raw %.2f×)\n",
			"create with egress policy", row.live, ms(row.pol), ms(row.plain), ms(row.rw), ratio(row.pol, row.plain), ratio(row.pol, row.rw))
	}
	fmt.Printf("%-28s %d→%d live: policy p50 %.2f×, no policy %.2f×, raw %.2f×; the rules' share %.2f× (policy/no-policy growth; target ≤ 1.10×: no per-sandbox scan); filled %d in %.1f s\n",
		"", base, *egressLive, ratio(pN, p10), ratio(nN, n10), ratio(rN, r10),
		ratio(pN, nN)/ratio(p10, n10), *egressLive-base, fillTime.Seconds())
	b.cleanup()
	rulesAlone(base)
}

// rulesAlone times what a create with a policy adds, installing the
// sandbox's chain and map element (one nft transaction), beside base and
// beside -egress-live others, in a network namespace of its own: the
// engine's and the backend's noise left out, nothing of the host touched.
func rulesAlone(base int) {
	fw, release := nsFirewall("dnb-")
	defer release()
	ctx := context.Background()
	pol := egress.Policy{Deny: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, Allow: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}
	live := 0
	fillTo := func(n int) {
		for ; live < n; live++ {
			if err := fw.SetSandbox(ctx, egress.NewMAC(), pol); err != nil {
				fail(err)
			}
		}
	}
	sample := func() []time.Duration {
		var d []time.Duration
		for range max(*samples, 5) {
			mac := egress.NewMAC()
			t0 := time.Now()
			if err := fw.SetSandbox(ctx, mac, pol); err != nil {
				fail(err)
			}
			d = append(d, time.Since(t0))
			if err := fw.RemoveSandbox(ctx, mac); err != nil {
				fail(err)
			}
		}
		return d
	}
	fillTo(base)
	at10 := pct(sample(), 50)
	fillTo(*egressLive)
	atN := pct(sample(), 50)
	fmt.Printf("%-28s p50 beside %d: %.1f ms; beside %d: %.1f ms (%.2f×; nft alone, in a network namespace of its own)\n",
		"install a sandbox's rules", base, ms(at10), *egressLive, ms(atN), float64(atN)/float64(at10))
}

// nsFirewall installs the egress firewall's base rules in a network
// namespace of its own (named prefix + an id), nothing of the host
// touched; release deletes the namespace.
func nsFirewall(prefix string) (*egress.Firewall, func()) {
	ns := prefix + ids.New()[:8]
	if out, err := exec.CommandContext(context.Background(), "ip", "netns", "add", ns).CombinedOutput(); err != nil {
		fail(fmt.Errorf("ip netns add %s: %v: %s", ns, err, out))
	}
	release := atExit(func() { _ = exec.CommandContext(context.Background(), "ip", "netns", "del", ns).Run() })
	fw := egress.New(egress.Config{}, func(ctx context.Context, stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, "nft"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("nft %v: %v: %s", args, err, out)
		}
		return string(out), nil
	})
	if err := fw.Install(context.Background()); err != nil {
		release()
		fail(err)
	}
	return fw, release
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
	return b.createLive(map[string]any{"waitReady": true, "timeout": 3600, "network": egressPolicy})
}

// createLive creates a sandbox from body, waits until it runs and keeps it
// live (cleanup deletes it).
func (b *backend) createLive(req map[string]any) (string, time.Duration) {
	t0 := time.Now()
	code, body := b.do("POST", "/sandboxes", req)
	d := time.Since(t0)
	var sb struct{ SandboxID, State string }
	_ = json.Unmarshal(body, &sb)
	if code != http.StatusCreated || sb.State != string(sbx.StateRunning) {
		fail(fmt.Errorf("create: %d %s", code, body))
	}
	b.mu.Lock()
	b.ids = append(b.ids, sb.SandboxID)
	b.mu.Unlock()
	return sb.SandboxID, d
}

// egressSamples times -n creates with a policy and as many without (each
// deleted before the next, so the live count stays put), interleaved with
// as many raw docker create+starts (removed likewise).
func (b *backend) egressSamples(ctx context.Context) (policy, plain, raw []time.Duration) {
	once := func(body map[string]any) time.Duration {
		id, d := b.createLive(body)
		b.mu.Lock()
		b.ids = b.ids[:len(b.ids)-1]
		b.mu.Unlock()
		if code, body := b.do("DELETE", "/sandboxes/"+id, nil); code != http.StatusNoContent {
			fail(fmt.Errorf("delete %s: %d %s", id, code, body))
		}
		return d
	}
	for i := range *samples {
		policy = append(policy, once(map[string]any{"waitReady": true, "timeout": 3600, "network": egressPolicy}))
		plain = append(plain, once(map[string]any{"waitReady": true, "timeout": 3600}))
		name := fmt.Sprintf("bench-rawe-%d-%s", i, ids.New())
		raw = append(raw, rawCreateStart(ctx, engine, name))
		if err := engine.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil {
			fail(err)
		}
	}
	return policy, plain, raw
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
