package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// DefaultDiskWatchEvery is how often the disk watchdog measures writable
// layers where the storage driver cannot cap them (Config.DiskWatchEvery).
const DefaultDiskWatchEvery = 10 * time.Second

// diskStoppedPath marks, in its writable layer, a container the watchdog
// stopped, so that every backend (not only the one that stopped it) tells
// the record why. Only its presence is read: the sandbox could write it.
const diskStoppedPath = "/.dreadnode-disk-limit"

// watchDisk enforces Config.DiskLimitMB where the storage driver cannot
// (disk.go): every Config.DiskWatchEvery it measures the writable layer of
// each running container of the deployment (sandboxes, warm-pool
// containers and task services: what `docker ps --size` reports) and
// stops those past the limit. It ends when the engine turns out to cap
// writable layers itself, or at Close.
func (p *Provider) watchDisk(stop <-chan struct{}) {
	t := time.NewTicker(p.cfg.DiskWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		// Generous: the engine sizes each container's layers by walking them,
		// which under load can take tens of seconds, and a round cut short
		// enforces nothing (a CI run at load 20+ saw a minute of them).
		ctx, cancel := context.WithTimeout(context.Background(), max(p.cfg.DiskWatchEvery, 2*time.Minute))
		capped, known := p.diskCap(ctx)
		if known && capped {
			cancel()
			return // the engine enforces it: ENOSPC at the limit
		}
		p.enforceDiskLimit(ctx)
		cancel()
	}
}

// enforceDiskLimit stops every running container of the deployment whose
// writable layer is past the limit. The engine measures by walking each
// layer, so this runs off every request's path.
func (p *Provider) enforceDiskLimit(ctx context.Context) {
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{Size: true, Filters: p.scopeFilter()})
	if err != nil {
		p.cfg.Logger.Warn("disk watchdog: cannot list containers with their sizes; will try again", "error", err)
		return
	}
	limit := int64(p.cfg.DiskLimitMB) << 20
	for _, c := range cs {
		if c.SizeRw > limit {
			p.stopOverDisk(ctx, c)
		}
	}
	p.diskRounds.Add(1)
}

// stopOverDisk marks and kills container c, and logs it.
func (p *Provider) stopOverDisk(ctx context.Context, c container.Summary) {
	// Marked first, so whoever sees the exit can tell why. A read-only
	// root refuses the mark: the exit then reads as a kill from outside.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(diskStoppedPath, "/"), Mode: 0o444, ModTime: time.Now()})
	_ = tw.Close()
	_ = p.cli.CopyToContainer(ctx, c.ID, "/", &buf, container.CopyToContainerOptions{})
	if c.State == "paused" {
		_ = p.cli.ContainerUnpause(ctx, c.ID) // a frozen container cannot be killed
	}
	err := p.cli.ContainerKill(ctx, c.ID, "KILL")
	name := c.ID
	if len(c.Names) > 0 {
		name = strings.TrimPrefix(c.Names[0], "/")
	}
	log := p.cfg.Logger.With("container", name, "record", c.Labels[compute.LabelRecord], "org", c.Labels[compute.LabelOrg],
		"written_mb", c.SizeRw>>20, "limit_mb", p.cfg.DiskLimitMB)
	if err != nil {
		log.Error("disk watchdog: a container is past the disk limit and could not be stopped; will try again", "error", err)
		return
	}
	log.Warn("disk watchdog: stopped a container whose writable layer passed the disk limit (DOCKER_DISK_LIMIT_MB)")
}

// diskExitReason tells an exited container the watchdog stopped (its
// marker is there and it was killed) from any other exit.
func (p *Provider) diskExitReason(ctx context.Context, c container.InspectResponse) string {
	st := c.State
	if st == nil || st.Running || st.ExitCode != 137 || st.OOMKilled || p.cfg.DiskLimitMB <= 0 {
		return ""
	}
	if _, err := p.cli.ContainerStatPath(ctx, c.ID, diskStoppedPath); err != nil {
		return ""
	}
	return fmt.Sprintf("stopped by the backend: its writable layer passed the disk limit of %d MB (DOCKER_DISK_LIMIT_MB); "+
		"this Docker host's storage driver cannot make a write past it fail with ENOSPC", p.cfg.DiskLimitMB)
}
