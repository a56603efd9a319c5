package docker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Org volumes (API.md §14) are named Docker volumes dnvol-<volume id>,
// labelled with the deployment, the org, the volume's id and its name.
// Unlike a sandbox's private volumes (dn-<record>-<name>, removed with the
// sandbox), nothing removes them but DeleteVolume: they outlive every
// sandbox that mounts them, and several sandboxes may mount one at once.

// orgVolumePrefix starts an org volume's name; it is not volumePrefix, so
// a sandbox's Delete never takes an org volume for one of its own.
const orgVolumePrefix = "dnvol-"

// labelVolume carries an org volume's id.
const labelVolume = "dev.dreadnode.volume"

// labelVolumeName carries the org's name for it (for the operator).
const labelVolumeName = "dev.dreadnode.volume.name"

// OrgVolumeName is the Docker volume of org volume id.
func OrgVolumeName(id string) string { return orgVolumePrefix + id }

var _ compute.VolumeProvider = (*Provider)(nil)

// CreateVolume implements compute.VolumeProvider.
func (p *Provider) CreateVolume(ctx context.Context, v compute.VolumeSpec) error {
	if !recordIDPattern.MatchString(v.ID) {
		return compute.Errorf(compute.KindInvalid, "volume", nil, "volume id %q is not usable in a Docker volume name", v.ID)
	}
	_, err := p.cli.VolumeCreate(ctx, volume.CreateOptions{Name: OrgVolumeName(v.ID), Labels: map[string]string{
		compute.LabelManaged: "true", labelScope: p.cfg.Scope, compute.LabelOrg: v.OrgID, labelVolume: v.ID, labelVolumeName: v.Name,
	}})
	return classify("volume", err) // creating an existing volume is no error for the engine either
}

// DeleteVolume implements compute.VolumeProvider.
func (p *Provider) DeleteVolume(ctx context.Context, id string) error {
	err := p.cli.VolumeRemove(ctx, OrgVolumeName(id), false)
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		p.volBytes.forget(id)
		return nil
	case cerrdefs.IsConflict(err):
		return compute.Errorf(compute.KindConflict, "volume", err, "volume %s is still mounted by a container", id)
	}
	return classify("volume", err)
}

// volumeBytesTTL is how long a measurement of the org volumes' disk use is
// reused: the engine measures a volume by walking its files.
const volumeBytesTTL = time.Minute

// volBytesCache holds the last measurement of the org volumes' disk use.
type volBytesCache struct {
	mu    sync.Mutex
	at    time.Time
	bytes map[string]int64
}

func (c *volBytesCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.bytes, id)
}

// VolumeBytes implements compute.VolumeProvider: one disk-usage call for
// every volume (the engine walks each volume's files, as `docker system df
// -v` does), made at most once a minute; calls in between answer from it.
func (p *Provider) VolumeBytes(ctx context.Context) (map[string]int64, error) {
	c := &p.volBytes
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes != nil && time.Since(c.at) < volumeBytesTTL {
		return copyBytes(c.bytes), nil
	}
	du, err := p.cli.DiskUsage(ctx, types.DiskUsageOptions{Types: []types.DiskUsageObject{types.VolumeObject}})
	if err != nil {
		return nil, classify("volume", err)
	}
	out := map[string]int64{}
	for _, v := range du.Volumes {
		if v == nil || v.Labels[labelScope] != p.cfg.Scope || v.Labels[labelVolume] == "" || v.UsageData == nil {
			continue
		}
		out[v.Labels[labelVolume]] = max(v.UsageData.Size, 0)
	}
	c.bytes, c.at = out, time.Now()
	return copyBytes(out), nil
}

func copyBytes(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// checkOrgVolumes refuses a spec mounting an org volume that does not
// exist: the engine would make an empty one of that name, which nothing
// would then own.
func (p *Provider) checkOrgVolumes(ctx context.Context, spec compute.Spec) error {
	for _, v := range spec.Volumes {
		if v.VolumeID == "" {
			continue
		}
		if _, err := p.cli.VolumeInspect(ctx, OrgVolumeName(v.VolumeID)); err != nil {
			if cerrdefs.IsNotFound(err) {
				return compute.Errorf(compute.KindInvalid, "create", err, "volume %q (%s) was deleted; create it again or drop the mount", v.Name, v.VolumeID)
			}
			return classify("create", err)
		}
	}
	return nil
}

var _ compute.RecordSweeper = (*Provider)(nil)

// SweepRecord implements compute.RecordSweeper: the record's private
// volumes, which a create stopped (or crashed) after the engine made them
// but before a container held them leaves without a container to find
// them by. Org volumes are never the record's.
func (p *Provider) SweepRecord(ctx context.Context, record string) error {
	return p.removePrivateVolumes(ctx, record)
}

// removePrivateVolumes removes the private volumes (dn-<record>-<name>) of
// record: those a container mounted are removed with it, but a create that
// was stopped between making the container and starting it (or a crash)
// leaves them without a container to find them by.
func (p *Provider) removePrivateVolumes(ctx context.Context, record string) error {
	if record == "" {
		return nil
	}
	vols, err := p.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", compute.LabelRecord+"="+record), filters.Arg("label", labelScope+"="+p.cfg.Scope))})
	if err != nil {
		return classify("delete", err)
	}
	for _, v := range vols.Volumes {
		if v == nil || !strings.HasPrefix(v.Name, volumePrefix+record+"-") {
			continue
		}
		if err := p.cli.VolumeRemove(ctx, v.Name, true); err != nil && !cerrdefs.IsNotFound(err) {
			return classify("delete", fmt.Errorf("removing volume %s: %w", v.Name, err))
		}
	}
	return nil
}

// volumeMounts turns the spec's volumes into mounts: an org volume by its
// name (dnvol-<id>), a private one as a named volume of the sandbox
// (dn-<record>-<name>), labelled like the container so Delete and the
// operator can find it.
func volumeMounts(spec compute.Spec, labels map[string]string) []mount.Mount {
	var out []mount.Mount
	for _, v := range spec.Volumes {
		if v.VolumeID != "" {
			out = append(out, mount.Mount{Type: mount.TypeVolume, Source: OrgVolumeName(v.VolumeID), Target: v.Path, ReadOnly: v.ReadOnly})
			continue
		}
		out = append(out, mount.Mount{Type: mount.TypeVolume, Source: volumePrefix + spec.RecordID + "-" + v.Name, Target: v.Path,
			ReadOnly: v.ReadOnly, VolumeOptions: &mount.VolumeOptions{Labels: labels}})
	}
	return out
}
