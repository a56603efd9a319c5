package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Pause implements compute.Provider with a real cgroup freeze; pausing a
// paused or stopped instance is KindConflict.
func (p *Provider) Pause(ctx context.Context, ref compute.Ref) error {
	if err := pauseContainer(ctx, p.cli, ref.ID); err != nil {
		return classify("pause", err)
	}
	_, err := p.settle(ctx, "pause", ref.ID, compute.StatusPaused, p.cli.ContainerPause)
	return err
}

// stopGrace is how long a filesystem-only pause lets the sandbox's
// processes end on SIGTERM before the engine kills them.
const stopGrace = 5 // seconds

// PauseFilesystem implements compute.Provider: the container is stopped
// (`docker stop`), so its memory is freed and only its filesystem (the
// writable layer and its volumes) is kept; Resume starts it again. Pausing
// a container that is not running is KindConflict.
func (p *Provider) PauseFilesystem(ctx context.Context, ref compute.Ref) error {
	const op = "pause"
	c, err := p.cli.ContainerInspect(ctx, ref.ID)
	if err != nil {
		return classify(op, err)
	}
	if c.State == nil || !c.State.Running || c.State.Paused {
		return compute.Errorf(compute.KindConflict, op, nil, "container %s is not running", ref.ID)
	}
	grace := stopGrace
	if err := p.cli.ContainerStop(ctx, ref.ID, container.StopOptions{Timeout: &grace}); err != nil {
		return classify(op, err)
	}
	p.envds.forget(ref.ID) // it may come back at another address
	_, err = p.settle(ctx, op, ref.ID, compute.StatusExited, func(context.Context, string) error { return nil })
	return err
}

// Resume implements compute.Provider; resuming a running one is KindConflict.
// A frozen container (Pause) is thawed; a stopped one (PauseFilesystem) is
// started again: its main process starts from the template's command, the
// agent with the same key, the filesystem as it was.
func (p *Provider) Resume(ctx context.Context, ref compute.Ref) (compute.Instance, error) {
	c, err := p.cli.ContainerInspect(ctx, ref.ID)
	if err != nil {
		return compute.Instance{}, classify("resume", err)
	}
	if c.State != nil && !c.State.Running && c.Config != nil {
		return p.restart(ctx, ref.ID, c.Config.Labels)
	}
	if err := p.cli.ContainerUnpause(ctx, ref.ID); err != nil {
		return compute.Instance{}, classify("resume", err)
	}
	return p.settle(ctx, "resume", ref.ID, compute.StatusRunning, p.cli.ContainerUnpause)
}

// restart starts a stopped sandbox container again, as a create starts it
// (DNS, agent, isolation), but keeps the container when that fails: it
// holds the sandbox's filesystem, and the record decides its end.
func (p *Provider) restart(ctx context.Context, id string, labels map[string]string) (compute.Instance, error) {
	const op = "resume"
	p.envds.forget(id) // another replica may have stopped it: its address may be new
	if p.agent != nil {
		if err := p.markStale(ctx, id); err != nil {
			return compute.Instance{}, classify(op, err)
		}
	}
	if err := p.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return compute.Instance{}, classify(op, err)
	}
	claimStarted(ctx, p.cli, id)
	err := p.serveSandboxDNS(ctx, id, labels)
	if err == nil && p.agent != nil {
		err = p.waitAgent(ctx, id)
	}
	if err == nil && labels[labelNetwork] == isolatedValue {
		err = p.dropDefaultRoute(ctx, id)
	}
	if err != nil {
		var pe *compute.Error
		if errors.As(err, &pe) {
			return compute.Instance{}, err
		}
		return compute.Instance{}, classify(op, err)
	}
	return p.getChecked(ctx, op, id, labels)
}

// settle waits until the engine reports want, repeating op while it does
// not. Docker 20.10 updates a container's paused flag from containerd events
// handled asynchronously, so right after a quick pause/unpause pair a late
// "paused" event can flip the flag back; repeating the call puts it right.
func (p *Provider) settle(ctx context.Context, opName, id string, want compute.Status, op func(context.Context, string) error) (compute.Instance, error) {
	var inst compute.Instance
	var err error
	for attempt := range 10 {
		if inst, err = p.get(ctx, opName, id); err != nil || inst.Status == want || inst.Status == compute.StatusExited {
			return inst, err
		}
		if attempt%3 == 2 { // still wrong after a few looks: repeat the call
			if err := op(ctx, id); err != nil && !cerrdefs.IsConflict(err) {
				return inst, classify(opName, err)
			}
		}
		select {
		case <-ctx.Done():
			return inst, classify(opName, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
	return inst, compute.Errorf(compute.KindInternal, opName, nil, "the Docker engine still reports the container %s, not %s", inst.Status, want)
}

// Delete implements compute.Provider: force-removes the container and its
// anonymous volumes. A missing container, or one already being removed, is
// not an error.
func (p *Provider) Delete(ctx context.Context, ref compute.Ref) error {
	var named []string // the sandbox's volumeMounts: named volumes outlive a plain remove
	var labels map[string]string
	var macs []string
	if c, err := p.cli.ContainerInspect(ctx, ref.ID); err == nil {
		if c.Config != nil {
			labels = c.Config.Labels
		}
		macs = macsOf(c)
		for _, m := range c.Mounts {
			if m.Type == mount.TypeVolume && strings.HasPrefix(m.Name, volumePrefix) {
				named = append(named, m.Name)
			}
		}
	}
	err := removeContainer(ctx, p.cli, ref.ID)
	if err == nil {
		p.forgetEgress(ctx, labels)
		p.forgetDrops(ctx, macs)
	}
	for _, v := range named {
		if verr := p.cli.VolumeRemove(ctx, v, true); verr != nil && !cerrdefs.IsNotFound(verr) {
			return classify("delete", fmt.Errorf("removing volume %s: %w", v, verr))
		}
	}
	if err == nil {
		if verr := p.removePrivateVolumes(ctx, ref.Record); verr != nil {
			return verr
		}
	}
	p.cpuMu.Lock()
	delete(p.cpuSamples, ref.ID)
	p.cpuMu.Unlock()
	p.disk.forget(ref.ID)
	p.metrics.forget(ref.ID)
	if err == nil || removing(err) {
		return nil
	}
	return classify("delete", err)
}

// SetTimeout implements compute.Provider; Docker has no TTL of its own (the
// reconciler enforces it).
func (p *Provider) SetTimeout(context.Context, compute.Ref, time.Duration) error { return nil }

// Log bounds: the tail of the main process output, at most logMaxBytes.
const (
	logTailLines = "2000"
	logMaxBytes  = 1 << 20
)

// Logs implements compute.Provider: the tail of the main process's stdout
// and stderr, interleaved in the order Docker recorded them.
func (p *Provider) Logs(ctx context.Context, ref compute.Ref) (string, error) {
	rc, err := p.cli.ContainerLogs(ctx, ref.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: logTailLines})
	if err != nil {
		return "", classify("logs", err)
	}
	defer rc.Close()
	// Lines are as long as the main process makes them: keep the last
	// logMaxBytes as they come rather than the whole tail.
	buf := &tailBuffer{max: logMaxBytes}
	if _, err := stdcopy.StdCopy(buf, buf, rc); err != nil {
		return "", classify("logs", err)
	}
	return string(buf.Bytes()), nil
}

// Metrics implements compute.Provider. Reading the engine takes from a
// tenth of a second to a second on a busy host, so readings are sampled off
// the request path (see metricsCache): a request gets the latest one.
func (p *Provider) Metrics(ctx context.Context, ref compute.Ref) (compute.Metrics, error) {
	return p.metrics.get(ctx, ref.ID, metricsFresh, func(ctx context.Context) (compute.Metrics, error) { return p.readMetrics(ctx, ref) })
}

// readMetrics reads the engine: the container's (sampled) disk usage and one
// one-shot stats reading. A one-shot reading has no previous sample, so CPU
// percent (100 = one full core) is averaged since this provider's previous
// reading of the instance, or since its start on the first reading.
func (p *Provider) readMetrics(ctx context.Context, ref compute.Ref) (compute.Metrics, error) {
	const op = "metrics"
	type inspected struct {
		c   container.InspectResponse
		err error
	}
	ic := make(chan inspected, 1)
	go func() { // in parallel with the stats; without the size, which is slow (see diskCache)
		c, err := p.cli.ContainerInspect(ctx, ref.ID)
		ic <- inspected{c, err}
	}()
	s, serr := p.stats(ctx, ref.ID)
	in := <-ic
	if in.err != nil {
		return compute.Metrics{}, classify(op, in.err)
	}
	if serr != nil {
		return compute.Metrics{}, classify(op, serr)
	}
	m := compute.Metrics{
		MemoryLimitBytes: s.MemoryStats.Limit,
		MemoryUsedBytes:  s.MemoryStats.Usage,
		Pids:             s.PidsStats.Current,
	}
	// Like `docker stats`: page cache that can be dropped is not "used".
	for _, k := range []string{"total_inactive_file", "inactive_file"} {
		if v, ok := s.MemoryStats.Stats[k]; ok && v < m.MemoryUsedBytes {
			m.MemoryUsedBytes -= v
			break
		}
	}
	for _, n := range s.Networks {
		m.NetworkRxBytes += n.RxBytes
		m.NetworkTxBytes += n.TxBytes
	}
	if in.c.HostConfig != nil {
		m.CPUCount = int((in.c.HostConfig.NanoCPUs + 5e8) / 1e9)
	}
	// The writable layer's size takes the engine up to a minute to add up
	// on a busy host: the latest one is used, and 0 until the first is in.
	m.DiskUsedBytes, _ = p.disk.peek(ref.ID, diskFresh, func(ctx context.Context) (uint64, error) { return p.diskUsed(ctx, ref.ID) })
	if img, err := p.cli.ImageInspect(ctx, in.c.Image); err == nil && img.Size > 0 {
		m.ImageBytes = uint64(img.Size)
	}
	if p.cfg.DiskLimitMB > 0 {
		m.DiskLimitBytes = uint64(p.cfg.DiskLimitMB) << 20
	}
	if in.c.State != nil && in.c.State.Running {
		started, _ := time.Parse(time.RFC3339Nano, in.c.State.StartedAt)
		m.CPUPercent = p.cpuPercent(ref.ID, s.CPUStats.CPUUsage.TotalUsage, s.Read, started)
	}
	return m, nil
}

// cpuSample is the last CPU reading of one instance.
type cpuSample struct {
	usage uint64 // container CPU time, ns
	at    time.Time
}

// cpuPercent averages CPU use since the previous sample of id (or since
// started) and records this one.
func (p *Provider) cpuPercent(id string, usage uint64, at, started time.Time) float64 {
	p.cpuMu.Lock()
	prev, ok := p.cpuSamples[id]
	if len(p.cpuSamples) > 10000 { // forget instances deleted behind our back
		clear(p.cpuSamples)
	}
	p.cpuSamples[id] = cpuSample{usage, at}
	p.cpuMu.Unlock()
	if !ok || !prev.at.Before(at) || usage < prev.usage {
		prev = cpuSample{0, started}
	}
	elapsed := at.Sub(prev.at)
	if prev.at.IsZero() || elapsed <= 0 {
		return 0
	}
	return float64(usage-prev.usage) / float64(elapsed.Nanoseconds()) * 100
}

func (p *Provider) stats(ctx context.Context, id string) (container.StatsResponse, error) {
	var s container.StatsResponse
	r, err := p.cli.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return s, err
	}
	defer r.Body.Close()
	return s, json.NewDecoder(r.Body).Decode(&s)
}
