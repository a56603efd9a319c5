package docker

import (
	"bytes"
	"context"
	"io"
	"path"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// ReadFile implements compute.Provider through the agent. A symlink is
// followed; a missing file is KindNotFound, a directory or a relative path
// KindInvalid, a file over compute.MaxFileBytes KindInvalid.
func (p *Provider) ReadFile(ctx context.Context, ref compute.Ref, name string) ([]byte, error) {
	const op = "read file"
	rc, info, err := p.OpenFile(ctx, ref, name, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if info.Size > compute.MaxFileBytes {
		return nil, compute.Errorf(compute.KindInvalid, op, nil, "%s is larger than %d bytes", info.Path, compute.MaxFileBytes)
	}
	var buf compute.CappedBuffer
	buf.Max = compute.MaxFileBytes
	if _, err := io.Copy(&buf, io.LimitReader(rc, compute.MaxFileBytes)); err != nil {
		return nil, compute.Errorf(compute.KindUnavailable, op, err, "reading %s from sandbox %s: %v", name, sandboxName(ref), err)
	}
	return buf.Bytes(), nil
}

// WriteFile implements compute.Provider through the agent: the file
// replaces an existing one; missing parent directories are created, as
// E2B's files API does.
func (p *Provider) WriteFile(ctx context.Context, ref compute.Ref, name string, data []byte) error {
	return p.CreateFile(ctx, ref, name, bytes.NewReader(data), int64(len(data)))
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

func absPath(op, name string) (string, error) {
	if !path.IsAbs(name) {
		return "", compute.Errorf(compute.KindInvalid, op, nil, "path must be absolute, got %q", name)
	}
	return path.Clean(name), nil
}
