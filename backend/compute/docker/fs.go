package docker

import (
	"context"
	"io"
	"path"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// OpenFile implements compute.Files through the agent's GET /files,
// streamed (a range is skipped to by reading).
func (p *Provider) OpenFile(ctx context.Context, ref compute.Ref, name string, offset, length int64) (io.ReadCloser, compute.FileInfo, error) {
	const op = "read file"
	name, err := absPath(op, name)
	if err != nil {
		return nil, compute.FileInfo{}, err
	}
	c, err := p.agentClient(ctx, op, ref)
	if err != nil {
		return nil, compute.FileInfo{}, err
	}
	return c.OpenFile(ctx, name, offset, length)
}

// CreateFile implements compute.Files through the agent's POST /files,
// streamed; missing parent directories are created.
func (p *Provider) CreateFile(ctx context.Context, ref compute.Ref, name string, r io.Reader, size int64) error {
	const op = "write file"
	name, err := absPath(op, name)
	if err != nil || name == "/" {
		return compute.Errorf(compute.KindInvalid, op, nil, "path must be an absolute file path, got %q", name)
	}
	c, err := p.agentClient(ctx, op, ref)
	if err != nil {
		return err
	}
	return c.CreateFile(ctx, name, r, size)
}

// Remove implements compute.Files.
func (p *Provider) Remove(ctx context.Context, ref compute.Ref, name string) error {
	const op = "remove"
	name, err := absPath(op, name)
	if err != nil {
		return err
	}
	c, err := p.agentClient(ctx, op, ref)
	if err != nil {
		return err
	}
	return c.Remove(ctx, name)
}

// ListDir implements compute.Files: at most compute.MaxListEntries
// entries (and one message of compute.MaxMessageBytes); a larger listing
// is refused, naming the path.
func (p *Provider) ListDir(ctx context.Context, ref compute.Ref, name string, depth int) ([]compute.FileInfo, error) {
	const op = "list"
	name, err := absPath(op, name)
	if err != nil {
		return nil, err
	}
	c, err := p.agentClient(ctx, op, ref)
	if err != nil {
		return nil, err
	}
	return c.ListDir(ctx, name, max(depth, 1))
}

// MakeDir implements compute.Files.
func (p *Provider) MakeDir(ctx context.Context, ref compute.Ref, name string) error {
	const op = "mkdir"
	name, err := absPath(op, name)
	if err != nil {
		return err
	}
	c, err := p.agentClient(ctx, op, ref)
	if err != nil {
		return err
	}
	return c.MakeDir(ctx, name)
}

// Move implements compute.Files; missing parents of to are created.
func (p *Provider) Move(ctx context.Context, ref compute.Ref, from, to string) error {
	const op = "move"
	from, err := absPath(op, from)
	if err != nil {
		return err
	}
	if to, err = absPath(op, to); err != nil {
		return err
	}
	c, err := p.agentClient(ctx, op, ref)
	if err != nil {
		return err
	}
	return c.Move(ctx, from, to)
}

// ReadArchive implements compute.Files: the engine's archive of "dir/."
// names the entries relative to dir ("./a", "./sub/b").
func (p *Provider) ReadArchive(ctx context.Context, ref compute.Ref, dir string) (io.ReadCloser, error) {
	const op = "download archive"
	dir, err := absPath(op, dir)
	if err != nil {
		return nil, err
	}
	rc, stat, err := p.cli.CopyFromContainer(ctx, ref.ID, path.Join(dir, ".")+"/.")
	if err != nil {
		return nil, fileError(op, dir, err)
	}
	if !stat.Mode.IsDir() {
		rc.Close()
		return nil, compute.Errorf(compute.KindInvalid, op, nil, "%s is not a directory; read a file with /files", dir)
	}
	return rc, nil
}

// WriteArchive implements compute.Files through the agent, which extracts
// beneath dir only and as the sandbox's user (backend/agent/archive.go).
// The engine's own extraction (CopyToContainer), used before, writes as
// root and follows symlinks the archive or the sandbox put in the way.
func (p *Provider) WriteArchive(ctx context.Context, ref compute.Ref, dir string, r io.Reader) error {
	const op = "upload archive"
	dir, err := absPath(op, dir)
	if err != nil {
		return err
	}
	c, err := p.agentClient(ctx, op, ref)
	if err != nil {
		return err
	}
	return c.PutArchive(ctx, dir, r)
}

// WatchDir implements compute.Files with the agent's inotify watch of dir
// and the directories below it.
func (p *Provider) WatchDir(ctx context.Context, ref compute.Ref, dir string, emit func(compute.FileEvent) error) error {
	const op = "watch"
	dir, err := absPath(op, dir)
	if err != nil {
		return err
	}
	c, err := p.agentClient(ctx, op, ref)
	if err != nil {
		return err
	}
	return c.WatchDir(ctx, dir, true, emit)
}

var (
	_ compute.Processes = (*Provider)(nil)
	_ compute.Files     = (*Provider)(nil)
)
