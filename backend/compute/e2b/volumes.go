package e2b

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Spec.Volumes are volumes private to one instance. E2B volumes are team
// objects (POST /volumes) mounted by name (NewSandbox.volumeMounts), so each
// Spec volume becomes a team volume named
// "dn-<scope>-<record id>-<volume name>": made before the sandbox (or found,
// when a create is retried after a crash), remembered in Ref.Data, and
// deleted by Delete after the sandbox.

var volumeUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]+`) // NewVolume.name: ^[a-zA-Z0-9_-]+$

func (p *Provider) volumePrefix() string {
	return "dn-" + volumeUnsafe.ReplaceAllString(p.cfg.Scope, "-") + "-"
}

func (p *Provider) volumeName(recordID, name string) string {
	return p.volumePrefix() + volumeUnsafe.ReplaceAllString(recordID, "-") + "-" + volumeUnsafe.ReplaceAllString(name, "-")
}

// ourVolumes picks the mounts that are volumes this deployment made.
func (p *Provider) ourVolumes(mounts []e2btypes.SandboxVolumeMount) []string {
	var out []string
	for _, m := range mounts {
		if strings.HasPrefix(m.Name, p.volumePrefix()) {
			out = append(out, m.Name)
		}
	}
	return out
}

func (p *Provider) listVolumes(ctx context.Context, op string) ([]e2btypes.Volume, error) {
	var vols []e2btypes.Volume
	_, err := p.do(ctx, &call{op: op, method: http.MethodGet, path: "/volumes", ok: []int{http.StatusOK}, out: &vols})
	return vols, err
}

// ensureVolumes makes (or finds) the team volumes of a Spec and returns the
// mounts plus the names this call created.
func (p *Provider) ensureVolumes(ctx context.Context, spec compute.Spec) (mounts []e2btypes.SandboxVolumeMount, created []string, err error) {
	const op = "create"
	if len(spec.Volumes) == 0 {
		return nil, nil, nil
	}
	for _, v := range spec.Volumes {
		if v.ReadOnly {
			return nil, nil, compute.Errorf(compute.KindInvalid, op, nil,
				"E2B cannot mount volume %q read-only (its volume mounts have no read-only flag)", v.Name)
		}
		if v.Name == "" || !strings.HasPrefix(v.Path, "/") {
			return nil, nil, compute.Errorf(compute.KindInvalid, op, nil, "volume %q needs a name and an absolute mount path (got %q)", v.Name, v.Path)
		}
	}
	record := spec.RecordID
	if record == "" {
		record = randomSuffix()
	}
	existing, err := p.listVolumes(ctx, op)
	if err != nil {
		return nil, nil, err
	}
	have := map[string]bool{}
	for _, v := range existing {
		have[v.Name] = true
	}
	for _, v := range spec.Volumes {
		if v.VolumeID != "" { // an org volume: made by CreateVolume, kept after the sandbox
			mounts = append(mounts, e2btypes.SandboxVolumeMount{Name: p.orgVolumeName(v.VolumeID), Path: v.Path})
			continue
		}
		name := p.volumeName(record, v.Name)
		if !have[name] {
			var made e2btypes.Volume
			_, err := p.do(ctx, &call{op: op, method: http.MethodPost, path: "/volumes", body: e2btypes.NewVolume{Name: name},
				ok: []int{http.StatusCreated}, out: &made})
			if err != nil {
				_ = p.deleteVolumes(context.WithoutCancel(ctx), op, created) // best effort: the create's error is the one to report
				return nil, nil, err
			}
			have[name] = true
			created = append(created, name)
		}
		mounts = append(mounts, e2btypes.SandboxVolumeMount{Name: name, Path: v.Path})
	}
	return mounts, created, nil
}

// deleteVolumes removes team volumes by name (best effort for names that are
// gone already).
func (p *Provider) deleteVolumes(ctx context.Context, op string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	vols, err := p.listVolumes(ctx, op)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range names {
		if strings.HasPrefix(n, p.volumePrefix()) || strings.HasPrefix(n, p.orgVolumeName("")) { // never anyone else's
			want[n] = true
		}
	}
	for _, v := range vols {
		if !want[v.Name] {
			continue
		}
		_, err := p.do(ctx, &call{op: op, method: http.MethodDelete, path: "/volumes/" + url.PathEscape(v.VolumeID),
			ok: []int{http.StatusNoContent}})
		if err != nil && !compute.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// Org volumes (API.md §14) are team volumes named
// "dnvol-<scope>-<volume id>": not volumePrefix, so a sandbox's Delete
// never takes one for its own.
func (p *Provider) orgVolumeName(id string) string {
	return "dnvol-" + volumeUnsafe.ReplaceAllString(p.cfg.Scope, "-") + "-" + volumeUnsafe.ReplaceAllString(id, "-")
}

var _ compute.VolumeProvider = (*Provider)(nil)

// CreateVolume implements compute.VolumeProvider: POST /volumes, unless the
// team already has the volume (a create retried).
func (p *Provider) CreateVolume(ctx context.Context, v compute.VolumeSpec) error {
	const op = "volume"
	name := p.orgVolumeName(v.ID)
	vols, err := p.listVolumes(ctx, op)
	if err != nil {
		return err
	}
	for _, have := range vols {
		if have.Name == name {
			return nil
		}
	}
	_, err = p.do(ctx, &call{op: op, method: http.MethodPost, path: "/volumes", body: e2btypes.NewVolume{Name: name},
		ok: []int{http.StatusCreated}, out: &e2btypes.VolumeAndToken{}})
	return err
}

// DeleteVolume implements compute.VolumeProvider: DELETE /volumes/{id} of
// the team volume of that name (none: no error).
func (p *Provider) DeleteVolume(ctx context.Context, id string) error {
	return p.deleteVolumes(ctx, "volume", []string{p.orgVolumeName(id)})
}

// VolumeBytes implements compute.VolumeProvider: E2B's volume routes report
// no size, so nothing is measured (nil).
func (p *Provider) VolumeBytes(context.Context) (map[string]int64, error) { return nil, nil }
