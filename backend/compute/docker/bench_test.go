package docker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// BenchmarkCreateRunning measures Provider.Create until the sandbox runs
// (including reading its endpoints back); the delete is not timed.
func BenchmarkCreateRunning(b *testing.B) {
	p := newProvider(b, Config{})
	benchCreate(b, p)
}

// BenchmarkCreateRunningWarmPool is the same with a warm pool that is refilled
// (untimed) between iterations: the best case of a claim.
func BenchmarkCreateRunningWarmPool(b *testing.B) {
	p := newProvider(b, Config{Network: testNetwork + "-poolbench", WarmPoolSize: 1})
	benchCreate(b, p)
}

// benchCreate times creates of testSpec, changed by each mutate.
func benchCreate(b *testing.B, p *Provider, mutate ...func(*compute.Spec)) {
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if p.pool != nil {
			b.StopTimer()
			deadline := time.Now().Add(time.Minute)
			for p.pool.readyCount(BaseTemplate) == 0 {
				if time.Now().After(deadline) {
					b.Fatal("the warm pool was not refilled within a minute")
				}
				<-time.After(5 * time.Millisecond) // poll the refill, untimed
			}
			b.StartTimer()
		}
		spec := testSpec()
		for _, m := range mutate {
			m(&spec)
		}
		inst, err := p.Create(ctx, spec)
		if err != nil || inst.Status != compute.StatusRunning {
			b.Fatalf("create: %+v %v", inst, err)
		}
		b.StopTimer()
		if err := p.Delete(ctx, inst.Ref); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkRawDockerCreateStart is the floor: the same image and options
// through the SDK directly (create + start), to compare with CreateRunning.
func BenchmarkRawDockerCreateStart(b *testing.B) {
	p := newProvider(b, Config{})
	ctx := context.Background()
	netID, err := p.ensureNetwork(ctx, p.cfg.Network, false)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := testSpec().RecordID
		cfg := &container.Config{
			Image:  DefaultBaseImage,
			Labels: map[string]string{compute.LabelManaged: "true", compute.LabelRecord: rec, labelScope: p.cfg.Scope},
		}
		hc := &container.HostConfig{
			NetworkMode: container.NetworkMode(netID),
			Resources:   container.Resources{NanoCPUs: 1e9, Memory: 512 << 20, MemorySwap: 512 << 20, PidsLimit: ptr(int64(pidsLimit))},
		}
		resp, err := p.cli.ContainerCreate(ctx, cfg, hc, nil, nil, containerName(rec))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := p.cli.ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkAgentInjection measures what injecting the agent adds to a
// cold create (no warm pool): creates with and without the agent
// alternate in one process, the agent's volume filled beforehand (once
// per engine and binary), and the medians are reported with their
// difference (added-p50-ms) and ratio.
func BenchmarkAgentInjection(b *testing.B) {
	with := newProvider(b, Config{})
	without := newProvider(b, Config{AgentBinary: noAgent})
	ctx := context.Background()
	create := func(p *Provider) time.Duration {
		spec := testSpec()
		start := time.Now()
		inst, err := p.Create(ctx, spec)
		d := time.Since(start)
		if err != nil || inst.Status != compute.StatusRunning {
			b.Fatalf("create: %+v %v", inst, err)
		}
		if err := p.Delete(ctx, inst.Ref); err != nil {
			b.Fatal(err)
		}
		return d
	}
	create(with) // fills the volume, untimed as far as the medians go
	create(without)
	var dw, dn []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dw = append(dw, create(with))
		dn = append(dn, create(without))
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	mw, mn := med(dw), med(dn)
	b.ReportMetric(mw, "agent-p50-ms")
	b.ReportMetric(mn, "none-p50-ms")
	b.ReportMetric(mw-mn, "added-p50-ms")
	b.ReportMetric(mw/mn, "ratio")
}
