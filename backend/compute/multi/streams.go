package multi

import (
	"context"
	"errors"
	"io"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// processes returns the owning provider's compute.Processes, or an error
// naming the provider that lacks them.
func (p *Provider) processes(op string, ref compute.Ref) (compute.Processes, error) {
	sub := p.of(ref)
	if ps, ok := sub.(compute.Processes); ok {
		return ps, nil
	}
	return nil, compute.Errorf(compute.KindInvalid, op, errors.ErrUnsupported, "the %s provider does not support streaming processes yet", sub.Name())
}

func (p *Provider) files(op string, ref compute.Ref) (compute.Files, error) {
	sub := p.of(ref)
	if fs, ok := sub.(compute.Files); ok {
		return fs, nil
	}
	return nil, compute.Errorf(compute.KindInvalid, op, errors.ErrUnsupported, "the %s provider does not support the streaming filesystem API yet", sub.Name())
}

func (p *Provider) ExecStream(ctx context.Context, ref compute.Ref, req compute.ExecRequest, stdin io.Reader, emit compute.Emit) error {
	ps, err := p.processes("exec", ref)
	if err != nil {
		return err
	}
	return ps.ExecStream(ctx, ref, req, stdin, emit)
}

func (p *Provider) StartProcess(ctx context.Context, ref compute.Ref, req compute.ProcessRequest) (compute.Process, error) {
	ps, err := p.processes("start process", ref)
	if err != nil {
		return compute.Process{}, err
	}
	return ps.StartProcess(ctx, ref, req)
}

func (p *Provider) ListProcesses(ctx context.Context, ref compute.Ref) ([]compute.Process, error) {
	ps, err := p.processes("list processes", ref)
	if err != nil {
		return nil, err
	}
	return ps.ListProcesses(ctx, ref)
}

func (p *Provider) ProcessOutput(ctx context.Context, ref compute.Ref, pid int, follow bool, emit compute.Emit) error {
	ps, err := p.processes("process output", ref)
	if err != nil {
		return err
	}
	return ps.ProcessOutput(ctx, ref, pid, follow, emit)
}

func (p *Provider) WriteStdin(ctx context.Context, ref compute.Ref, pid int, data io.Reader, eof bool) error {
	ps, err := p.processes("write stdin", ref)
	if err != nil {
		return err
	}
	return ps.WriteStdin(ctx, ref, pid, data, eof)
}

func (p *Provider) SignalProcess(ctx context.Context, ref compute.Ref, pid int, sig string) error {
	ps, err := p.processes("signal", ref)
	if err != nil {
		return err
	}
	return ps.SignalProcess(ctx, ref, pid, sig)
}

func (p *Provider) OpenFile(ctx context.Context, ref compute.Ref, path string, offset, length int64) (io.ReadCloser, compute.FileInfo, error) {
	fs, err := p.files("read file", ref)
	if err != nil {
		return nil, compute.FileInfo{}, err
	}
	return fs.OpenFile(ctx, ref, path, offset, length)
}

func (p *Provider) CreateFile(ctx context.Context, ref compute.Ref, path string, r io.Reader, size int64) error {
	fs, err := p.files("write file", ref)
	if err != nil {
		return err
	}
	return fs.CreateFile(ctx, ref, path, r, size)
}

func (p *Provider) Remove(ctx context.Context, ref compute.Ref, path string) error {
	fs, err := p.files("remove", ref)
	if err != nil {
		return err
	}
	return fs.Remove(ctx, ref, path)
}

func (p *Provider) ListDir(ctx context.Context, ref compute.Ref, path string, depth int) ([]compute.FileInfo, error) {
	fs, err := p.files("list", ref)
	if err != nil {
		return nil, err
	}
	return fs.ListDir(ctx, ref, path, depth)
}

func (p *Provider) MakeDir(ctx context.Context, ref compute.Ref, path string) error {
	fs, err := p.files("mkdir", ref)
	if err != nil {
		return err
	}
	return fs.MakeDir(ctx, ref, path)
}

func (p *Provider) Move(ctx context.Context, ref compute.Ref, from, to string) error {
	fs, err := p.files("move", ref)
	if err != nil {
		return err
	}
	return fs.Move(ctx, ref, from, to)
}

func (p *Provider) ReadArchive(ctx context.Context, ref compute.Ref, dir string) (io.ReadCloser, error) {
	fs, err := p.files("download archive", ref)
	if err != nil {
		return nil, err
	}
	return fs.ReadArchive(ctx, ref, dir)
}

func (p *Provider) WriteArchive(ctx context.Context, ref compute.Ref, dir string, r io.Reader) error {
	fs, err := p.files("upload archive", ref)
	if err != nil {
		return err
	}
	return fs.WriteArchive(ctx, ref, dir, r)
}

func (p *Provider) WatchDir(ctx context.Context, ref compute.Ref, dir string, emit func(compute.FileEvent) error) error {
	fs, err := p.files("watch", ref)
	if err != nil {
		return err
	}
	return fs.WatchDir(ctx, ref, dir, emit)
}

var (
	_ compute.Processes = (*Provider)(nil)
	_ compute.Files     = (*Provider)(nil)
)

// Envd implements compute.EnvdLocator through the owning provider.
func (p *Provider) Envd(ctx context.Context, ref compute.Ref) (string, string, error) {
	sub := p.of(ref)
	if l, ok := sub.(compute.EnvdLocator); ok {
		return l.Envd(ctx, ref)
	}
	return "", "", compute.Errorf(compute.KindNotFound, "envd", nil, "the %s provider runs no envd in its sandboxes", sub.Name())
}
