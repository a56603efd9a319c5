package e2b

import (
	"context"
	"errors"
	"io"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/envd"
)

// The filesystem on E2B: envd's /files routes stream file contents, its
// filesystem.Filesystem service does the rest (package envd). envd has no
// archive route, so /archive is not offered on E2B.

// OpenFile implements compute.Files: Stat for the size, then envd's
// GET /files streamed (a range is skipped to by reading).
func (p *Provider) OpenFile(ctx context.Context, ref compute.Ref, name string, offset, length int64) (io.ReadCloser, compute.FileInfo, error) {
	var (
		rc   io.ReadCloser
		info compute.FileInfo
	)
	err := p.withEnvd(ctx, "read file", ref, func(c *envd.Client) error {
		var err error
		rc, info, err = c.OpenFile(ctx, name, offset, length)
		return err
	})
	return rc, info, err
}

// CreateFile implements compute.Files: envd's POST /files with the content
// streamed as the multipart "file" part (envd makes the parents).
func (p *Provider) CreateFile(ctx context.Context, ref compute.Ref, name string, r io.Reader, size int64) error {
	const op = "write file"
	if _, err := envd.AbsPath(op, name); err != nil {
		return err
	}
	// The body can be sent once only: settle the token first (a Stat
	// retries with a fresh one after a resume).
	var client *envd.Client
	if err := p.withEnvd(ctx, op, ref, func(c *envd.Client) error {
		client = c
		return c.Ping(ctx, op)
	}); err != nil {
		return err
	}
	return client.CreateFile(ctx, name, r, size)
}

// Remove implements compute.Files.
func (p *Provider) Remove(ctx context.Context, ref compute.Ref, name string) error {
	return p.withEnvd(ctx, "remove", ref, func(c *envd.Client) error { return c.Remove(ctx, name) })
}

// ListDir implements compute.Files: a file path answers its own entry.
func (p *Provider) ListDir(ctx context.Context, ref compute.Ref, name string, depth int) ([]compute.FileInfo, error) {
	var out []compute.FileInfo
	err := p.withEnvd(ctx, "list", ref, func(c *envd.Client) error {
		var err error
		out, err = c.ListDir(ctx, name, depth)
		return err
	})
	return out, err
}

// MakeDir implements compute.Files; an existing directory is not an error.
func (p *Provider) MakeDir(ctx context.Context, ref compute.Ref, name string) error {
	return p.withEnvd(ctx, "mkdir", ref, func(c *envd.Client) error { return c.MakeDir(ctx, name) })
}

// Move implements compute.Files.
func (p *Provider) Move(ctx context.Context, ref compute.Ref, from, to string) error {
	return p.withEnvd(ctx, "move", ref, func(c *envd.Client) error { return c.Move(ctx, from, to) })
}

var errNoArchive = compute.Errorf(compute.KindInvalid, "archive", errors.ErrUnsupported,
	"E2B's envd has no archive route; download files one by one with /files, or run tar with /exec")

// ReadArchive implements compute.Files: not offered on E2B.
func (p *Provider) ReadArchive(context.Context, compute.Ref, string) (io.ReadCloser, error) {
	return nil, errNoArchive
}

// WriteArchive implements compute.Files: not offered on E2B.
func (p *Provider) WriteArchive(context.Context, compute.Ref, string, io.Reader) error {
	return errNoArchive
}

// WatchDir implements compute.Files with envd's WatchDir stream (not
// recursive). Its start event becomes {"type": "ready"}.
func (p *Provider) WatchDir(ctx context.Context, ref compute.Ref, dir string, emit func(compute.FileEvent) error) error {
	return p.withEnvd(ctx, "watch", ref, func(c *envd.Client) error { return c.WatchDir(ctx, dir, false, emit) })
}

var _ compute.Files = (*Provider)(nil)
