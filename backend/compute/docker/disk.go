package docker

import (
	"context"
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
func (p *Provider) storageOpt(ctx context.Context) map[string]string {
	if p.cfg.DiskLimitMB <= 0 {
		return nil
	}
	p.diskMu.Lock()
	defer p.diskMu.Unlock()
	if p.diskKnown == nil {
		ok, known := p.probeStorageOpt(ctx)
		if !known {
			return nil // ask again at the next create
		}
		p.diskKnown = &ok
	}
	if !*p.diskKnown {
		return nil
	}
	return map[string]string{"size": strconv.Itoa(p.cfg.DiskLimitMB) + "M"}
}

// WritableLayerCapped reports whether containers get Config.DiskLimitMB as
// the cap of their writable layer (false also when no cap is configured).
func (p *Provider) WritableLayerCapped(ctx context.Context) bool {
	return p.storageOpt(ctx) != nil
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
