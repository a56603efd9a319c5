package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
// containers and task services; writableSize) and stops those past the
// limit. It ends when the engine turns out to cap
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
		// Generous: where the upper directories cannot be read the engine
		// sizes each container by walking its layers, which under load can
		// take minutes, and a round cut short enforces nothing.
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
// writable layer is past the limit. It lists the containers without their
// sizes and measures each on its own (writableSize): the engine's list
// with sizes walks every layer of every container in one call (on
// fuse-overlayfs, a naive diff of each container's whole filesystem),
// which on a loaded engine outlasted the round's two minutes every time,
// so nothing was ever stopped (issue 34's live probe: a sandbox that wrote
// 200 MB past a 64 MB limit still ran after 3 minutes).
func (p *Provider) enforceDiskLimit(ctx context.Context) {
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{Filters: p.scopeFilter()})
	if err != nil {
		p.cfg.Logger.Warn("disk watchdog: cannot list containers; will try again", "error", err)
		return
	}
	limit := int64(p.cfg.DiskLimitMB) << 20
	for _, c := range cs {
		size, err := p.writableSize(ctx, c.ID, limit)
		if err != nil {
			if ctx.Err() != nil {
				p.cfg.Logger.Warn("disk watchdog: the round ran out of time; will try again", "error", err)
				return
			}
			continue // gone meanwhile, or the engine could not size it: the next round
		}
		if size > limit {
			c.SizeRw = size
			p.stopOverDisk(ctx, c)
		}
	}
	p.diskRounds.Add(1)
}

// errPastLimit ends a walk of a writable layer once it is past the limit.
var errPastLimit = errors.New("past the limit")

// writableSize measures container id's writable layer: the bytes of the
// regular files in its upper directory, walked directly when this process
// can read it (the backend on the engine's host; the walk never follows a
// link and stops once past limit), else as the engine sizes it.
func (p *Provider) writableSize(ctx context.Context, id string, limit int64) (int64, error) {
	c, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		return 0, err
	}
	upper := ""
	if c.GraphDriver.Data != nil {
		upper = c.GraphDriver.Data["UpperDir"]
	}
	if fi, err := os.Stat(upper); upper == "" || err != nil || !fi.IsDir() {
		c, _, err := p.cli.ContainerInspectWithRaw(ctx, id, true)
		if err != nil || c.SizeRw == nil {
			return 0, fmt.Errorf("the engine did not size container %s: %v", id, err)
		}
		return *c.SizeRw, nil
	}
	var total int64
	err = filepath.WalkDir(upper, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed meanwhile
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		if total > limit {
			return errPastLimit
		}
		return nil
	})
	if err != nil && !errors.Is(err, errPastLimit) {
		return 0, err
	}
	return total, nil
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
