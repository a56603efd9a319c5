package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Volume is a named volume of the org (API.md §14 "Volumes"): persistent
// until deleted, mountable by several of the org's sandboxes at once.
type Volume = apitypes.Volume

// VolumeMount mounts a volume into a sandbox at create (SandboxCreate's
// VolumeMounts); Shared names one of the org's volumes.
type VolumeMount = apitypes.VolumeMount

// VolumeCreate is the body of POST /volumes.
type VolumeCreate = apitypes.NewVolume

func volumePath(id string) string { return "/volumes/" + url.PathEscape(id) }

// CreateVolume makes a volume of the key's org. A name the org already
// uses is a 409. It is not retried after a server error or a lost answer
// (the route takes no idempotency key): a retry would answer 409 for the
// volume the first attempt made.
func (c *Client) CreateVolume(ctx context.Context, in VolumeCreate) (*Volume, error) {
	var out Volume
	if err := c.do(ctx, request{method: http.MethodPost, path: "/volumes", body: in, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListVolumes lists the org's volumes, oldest first.
func (c *Client) ListVolumes(ctx context.Context) ([]Volume, error) {
	out := []Volume{}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/volumes", out: &out}); err != nil {
		return nil, err
	}
	return out, nil
}

// GetVolume returns one of the org's volumes by id; another org's, or a
// deleted one, is a 404.
func (c *Client) GetVolume(ctx context.Context, id string) (*Volume, error) {
	var out Volume
	if err := c.do(ctx, request{method: http.MethodGet, path: volumePath(id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteVolume deletes a volume and its contents. While a sandbox that has
// not ended mounts it the answer is a 409 whose detail names those
// sandboxes; a deleted volume is a 404.
func (c *Client) DeleteVolume(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: volumePath(id)})
}

// FindVolume returns the org's volume whose id or name is ref (the list
// commands show both); a 404 *APIError when none is.
func (c *Client) FindVolume(ctx context.Context, ref string) (*Volume, error) {
	v, err := c.GetVolume(ctx, ref)
	if err == nil || !IsNotFound(err) {
		return v, err
	}
	list, lerr := c.ListVolumes(ctx)
	if lerr != nil {
		return nil, lerr
	}
	for i := range list {
		if list[i].Name == ref {
			return &list[i], nil
		}
	}
	return nil, err
}
