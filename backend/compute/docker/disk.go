package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// DefaultDiskLimitMB caps a container's writable layer where the storage
// driver can (Config.DiskLimitMB).
const DefaultDiskLimitMB = 10 << 10

// storageOpt returns the StorageOpt capping a container's writable layer at
// Config.DiskLimitMB, or nil where the engine's storage driver cannot:
// Docker supports it on overlay2 over xfs mounted with pquota, btrfs, zfs
// and devicemapper only, and refuses the create elsewhere (fuse-overlayfs,
// overlay2 on ext4...). Rather than guess from the driver's name, the first
// create asks the engine with a throwaway container that is never started.
// Where it cannot, the disk watchdog (diskwatch.go) enforces the limit.
//
// No ENOSPC for the root filesystem is possible on such an engine (this
// project's: Docker 20.10 on fuse-overlayfs, data-root on ext4 without
// prjquota). Tried: StorageOpt ("--storage-opt is not supported"); ext4
// project quotas (the host's root filesystem would have to be remounted
// with prjquota, and fuse-overlayfs writes the upper layer as its own
// daemon, without the container's project id); a size-limited tmpfs on
// the work directories (ENOSPC for them only, not /, charged to the
// sandbox's memory, lost on restart); a loop-mounted ext4 image per
// sandbox (ENOSPC for its directories only, a loop device and an mkfs per
// create, both leaked by a backend that dies mid-create). See README,
// Containment.
func (p *Provider) storageOpt(ctx context.Context) map[string]string {
	if capped, _ := p.diskCap(ctx); !capped {
		return nil
	}
	return map[string]string{"size": strconv.Itoa(p.cfg.DiskLimitMB) + "M"}
}

// diskCap reports whether the engine caps writable layers at the limit,
// and whether that is known (false, false: no limit configured, or the
// engine could not be asked yet).
func (p *Provider) diskCap(ctx context.Context) (capped, known bool) {
	if p.cfg.DiskLimitMB <= 0 {
		return false, false
	}
	p.diskMu.Lock()
	defer p.diskMu.Unlock()
	if p.diskKnown == nil {
		ok, known := p.probeStorageOpt(ctx)
		if !known {
			return false, false // ask again at the next create
		}
		p.diskKnown = &ok
		if info, err := p.cli.Info(ctx); err == nil {
			p.diskDriver = info.Driver
		}
	}
	return *p.diskKnown, true
}

// WritableLayerCapped reports whether containers get Config.DiskLimitMB as
// the cap of their writable layer (false also when no cap is configured).
func (p *Provider) WritableLayerCapped(ctx context.Context) bool {
	capped, _ := p.diskCap(ctx)
	return capped
}

// DiskLimit says, in the operator's terms, how sandboxes' and task
// services' disk use is limited on this engine (for /readyz and the
// start-up log): by the storage driver (ENOSPC at the limit), by the
// watchdog (stopped past it), or not at all. warn is set when the limit
// is weaker than ENOSPC at the limit.
func (p *Provider) DiskLimit(ctx context.Context) (detail string, warn bool) {
	if p.cfg.DiskLimitMB <= 0 {
		return "no disk limit (DOCKER_DISK_LIMIT_MB=0): a sandbox can fill the Docker host's disk", true
	}
	capped, known := p.diskCap(ctx)
	p.diskMu.Lock()
	driver := p.diskDriver
	p.diskMu.Unlock()
	switch {
	case !known:
		return fmt.Sprintf("disk limit of %d MB not checked yet: the engine could not be asked whether its storage driver caps writable layers "+
			"(is the daemon up and %s built?); until then the watchdog stops sandboxes past the limit", p.cfg.DiskLimitMB, p.cfg.BaseImage), true
	case capped:
		return fmt.Sprintf("storage driver %s caps each sandbox's and task service's writable layer at %d MB (DOCKER_DISK_LIMIT_MB): "+
			"a write past it fails with ENOSPC", driver, p.cfg.DiskLimitMB), false
	}
	return fmt.Sprintf("storage driver %s cannot cap a container's writable layer (Docker can on overlay2 over xfs mounted with pquota, "+
		"btrfs, zfs and devicemapper): instead every %s the backend stops any sandbox or task service whose writable layer passed %d MB "+
		"(DOCKER_DISK_LIMIT_MB), so one can overshoot by what it writes in that time and gets no ENOSPC; volumes and tmpfs mounts "+
		"are not counted. For ENOSPC at the limit, run the engine with its data-root on xfs mounted with pquota (overlay2)",
		driver, p.cfg.DiskWatchEvery, p.cfg.DiskLimitMB), true
}

// probeStorageOpt creates (never starts) a container with a size option:
// ok when the engine accepts it, known false when it refuses the option.
func (p *Provider) probeStorageOpt(ctx context.Context) (ok, known bool) {
	hc := &container.HostConfig{StorageOpt: map[string]string{"size": strconv.Itoa(p.cfg.DiskLimitMB) + "M"}}
	hardening.Apply(hc) // as every real create has it
	resp, err := p.cli.ContainerCreate(ctx,
		&container.Config{Image: p.cfg.BaseImage, Labels: map[string]string{compute.LabelManaged: "true", labelScope: p.cfg.Scope}}, hc, nil, nil, "")
	if err == nil {
		p.removeQuietly(resp.ID)
		return true, true
	}
	return false, strings.Contains(err.Error(), "storage-opt") || strings.Contains(err.Error(), "storage opt")
}
