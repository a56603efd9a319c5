package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// ReadFile implements compute.Provider. A symlink is followed; a missing
// file is KindNotFound, a directory or a relative path KindInvalid.
func (p *Provider) ReadFile(ctx context.Context, ref compute.Ref, name string) ([]byte, error) {
	const op = "read file"
	if !path.IsAbs(name) {
		return nil, compute.Errorf(compute.KindInvalid, op, nil, "path must be absolute, got %q", name)
	}
	name = path.Clean(name)
	for range 2 { // the second round reads a symlink's (fully resolved) target
		rc, stat, err := p.cli.CopyFromContainer(ctx, ref.ID, name)
		if err != nil {
			return nil, fileError(op, name, err)
		}
		defer rc.Close()
		switch {
		case stat.Mode.IsDir():
			return nil, compute.Errorf(compute.KindInvalid, op, nil, "%s is a directory", name)
		case stat.Mode&os.ModeSymlink != 0 && stat.LinkTarget != "":
			name = stat.LinkTarget
			continue
		}
		if stat.Size > compute.MaxFileBytes {
			return nil, compute.Errorf(compute.KindInvalid, op, nil, "%s is larger than %d bytes", name, compute.MaxFileBytes)
		}
		tr := tar.NewReader(rc)
		if _, err := tr.Next(); err != nil {
			return nil, compute.Errorf(compute.KindInternal, op, err, "reading %s: %v", name, err)
		}
		data, err := io.ReadAll(io.LimitReader(tr, compute.MaxFileBytes))
		if err != nil {
			return nil, classify(op, err)
		}
		return data, nil
	}
	return nil, compute.Errorf(compute.KindInvalid, op, nil, "%s is a symlink loop", name)
}

// WriteFile implements compute.Provider. The file is written as root with
// mode 0644, replacing an existing one; missing parent directories are
// created (0755), like E2B's files API does.
func (p *Provider) WriteFile(ctx context.Context, ref compute.Ref, name string, data []byte) error {
	const op = "write file"
	if !path.IsAbs(name) || path.Clean(name) == "/" {
		return compute.Errorf(compute.KindInvalid, op, nil, "path must be an absolute file path, got %q", name)
	}
	name = path.Clean(name)
	// Common case first: the parent exists, so one request suffices.
	dir, rel := path.Dir(name), []string{path.Base(name)}
	err := p.copyTo(ctx, ref.ID, dir, rel, data)
	for err != nil && cerrdefs.IsNotFound(err) && !isNoSuchContainer(err) && dir != "/" {
		// Walk up to the deepest existing ancestor and create the rest.
		rel = append([]string{path.Base(dir)}, rel...)
		dir = path.Dir(dir)
		if _, serr := p.cli.ContainerStatPath(ctx, ref.ID, dir); serr == nil {
			err = p.copyTo(ctx, ref.ID, dir, rel, data)
			break
		} else if !cerrdefs.IsNotFound(serr) || isNoSuchContainer(serr) {
			err = serr
		}
	}
	if err != nil {
		return fileError(op, name, err)
	}
	return nil
}

// copyTo extracts into dir a tar holding the directories rel[:len-1] and the
// file path.Join(rel...).
func (p *Provider) copyTo(ctx context.Context, id, dir string, rel []string, data []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for i := 1; i < len(rel); i++ {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: path.Join(rel[:i]...) + "/", Mode: 0o755, ModTime: now}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(rel...), Mode: 0o644, Size: int64(len(data)), ModTime: now}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return p.cli.CopyToContainer(ctx, id, dir, &buf, container.CopyToContainerOptions{})
}

func fileError(op, name string, err error) error {
	if cerrdefs.IsNotFound(err) && !isNoSuchContainer(err) {
		return compute.Errorf(compute.KindNotFound, op, err, "no such file or directory: %s", name)
	}
	if strings.HasSuffix(daemonMessage(err), "not a directory") { // "lstat …: not a directory", "extraction point is not a directory"
		return compute.Errorf(compute.KindInvalid, op, err, "a parent of %s is not a directory", name)
	}
	return classify(op, err)
}
