package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

func absPath(op, name string) (string, error) {
	if !path.IsAbs(name) {
		return "", compute.Errorf(compute.KindInvalid, op, nil, "path must be absolute, got %q", name)
	}
	return path.Clean(name), nil
}

// OpenFile implements compute.Files through the engine's archive API: the
// file arrives as a one-entry tar stream, never buffered whole. A range
// skips to offset by reading (the archive API cannot seek).
func (p *Provider) OpenFile(ctx context.Context, ref compute.Ref, name string, offset, length int64) (io.ReadCloser, compute.FileInfo, error) {
	const op = "read file"
	name, err := absPath(op, name)
	if err != nil {
		return nil, compute.FileInfo{}, err
	}
	for range 8 { // later rounds read a symlink's (fully resolved) target
		rc, stat, err := p.cli.CopyFromContainer(ctx, ref.ID, name)
		if err != nil {
			return nil, compute.FileInfo{}, fileError(op, name, err)
		}
		switch {
		case stat.Mode.IsDir():
			rc.Close()
			return nil, compute.FileInfo{}, compute.Errorf(compute.KindInvalid, op, nil, "%s is a directory; list it with /fs or download it with /archive", name)
		case stat.Mode&os.ModeSymlink != 0 && stat.LinkTarget != "":
			rc.Close()
			name = stat.LinkTarget
			continue
		}
		info := compute.FileInfo{Name: path.Base(name), Path: name, Type: compute.FileTypeFile, Size: stat.Size,
			Mode: uint32(stat.Mode.Perm()), ModifiedAt: stat.Mtime.UTC()}
		tr := tar.NewReader(rc)
		if _, err := tr.Next(); err != nil {
			rc.Close()
			return nil, info, compute.Errorf(compute.KindInternal, op, err, "reading %s: %v", name, err)
		}
		if offset > 0 {
			if _, err := io.CopyN(io.Discard, tr, offset); err != nil && !errors.Is(err, io.EOF) {
				rc.Close()
				return nil, info, classify(op, err)
			}
		}
		var r io.Reader = tr
		if length >= 0 {
			r = io.LimitReader(tr, length)
		}
		return readCloser{r, rc}, info, nil
	}
	return nil, compute.FileInfo{}, compute.Errorf(compute.KindInvalid, op, nil, "%s is a symlink loop", name)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// CreateFile implements compute.Files. With a known size the content is
// streamed as a tar entry through the archive API; without one through
// `cat` in an exec (a tar header needs the size first).
func (p *Provider) CreateFile(ctx context.Context, ref compute.Ref, name string, r io.Reader, size int64) error {
	const op = "write file"
	name, err := absPath(op, name)
	if err != nil || name == "/" {
		return compute.Errorf(compute.KindInvalid, op, nil, "path must be an absolute file path, got %q", name)
	}
	dir := path.Dir(name)
	if _, err := p.cli.ContainerStatPath(ctx, ref.ID, dir); err != nil {
		if !cerrdefs.IsNotFound(err) || isNoSuchContainer(err) {
			return fileError(op, name, err)
		}
		if err := p.MakeDir(ctx, ref, dir); err != nil {
			return err
		}
	}
	if size < 0 {
		stderr := compute.CappedBuffer{Max: 4 << 10}
		code, err := p.attach(ctx, ref.ID, streamExec{cmd: []string{"sh", "-c", `cat > "$1"`, "sh", name}, user: "0",
			stdin: r, stdout: io.Discard, stderr: &stderr})
		if err != nil {
			return classify(op, err)
		}
		if code != 0 {
			return compute.Errorf(compute.KindInvalid, op, nil, "could not write %s: %s", name, bytes.TrimSpace(stderr.Bytes()))
		}
		return nil
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Base(name), Mode: 0o644, Size: size, ModTime: time.Now()})
		if err == nil {
			var n int64
			n, err = io.Copy(tw, io.LimitReader(r, size))
			if err == nil && n < size {
				err = io.ErrUnexpectedEOF
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err = p.cli.CopyToContainer(ctx, ref.ID, dir, pr, container.CopyToContainerOptions{})
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer goroutine whatever happened
	if err != nil {
		return fileError(op, name, err)
	}
	return nil
}

// Remove implements compute.Files.
func (p *Provider) Remove(ctx context.Context, ref compute.Ref, name string) error {
	const op = "remove"
	name, err := absPath(op, name)
	if err != nil {
		return err
	}
	return p.helper(ctx, op, ref.ID, []string{"rm", name}, nil, nil, nil)
}

// ListDir implements compute.Files. The helper writes one entry per line,
// read as they come: at most compute.MaxListEntries are held, a listing with
// more is refused (it would hold memory in proportion to what the sandbox
// holds).
func (p *Provider) ListDir(ctx context.Context, ref compute.Ref, name string, depth int) ([]compute.FileInfo, error) {
	const op = "list"
	name, err := absPath(op, name)
	if err != nil {
		return nil, err
	}
	depth = max(depth, 1)
	var list []compute.FileInfo
	lines := &lineWriter{op: op, fn: func(line []byte) error {
		if len(list) == compute.MaxListEntries {
			return compute.Errorf(compute.KindInvalid, op, nil,
				"%s holds more than %d entries at depth %d, the most one listing returns: list a subdirectory or a lower depth, or download it with /archive",
				name, compute.MaxListEntries, depth)
		}
		var e struct {
			compute.FileInfo
			MTime int64 `json:"mtime"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			return compute.Errorf(compute.KindInternal, op, err, "the sandbox helper's listing is not JSON lines: %v", err)
		}
		e.ModifiedAt = time.Unix(0, e.MTime).UTC()
		list = append(list, e.FileInfo)
		return nil
	}}
	if err := p.helper(ctx, op, ref.ID, []string{"ls", name, strconv.Itoa(depth)}, nil, nil, lines); err != nil {
		return nil, err
	}
	return list, nil
}

// MakeDir implements compute.Files.
func (p *Provider) MakeDir(ctx context.Context, ref compute.Ref, name string) error {
	const op = "mkdir"
	name, err := absPath(op, name)
	if err != nil {
		return err
	}
	return p.helper(ctx, op, ref.ID, []string{"mkdir", name}, nil, nil, nil)
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
	return p.helper(ctx, op, ref.ID, []string{"move", from, to}, nil, nil, nil)
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

// WriteArchive implements compute.Files.
func (p *Provider) WriteArchive(ctx context.Context, ref compute.Ref, dir string, r io.Reader) error {
	const op = "upload archive"
	dir, err := absPath(op, dir)
	if err != nil {
		return err
	}
	if err := p.MakeDir(ctx, ref, dir); err != nil {
		return err
	}
	if err := p.cli.CopyToContainer(ctx, ref.ID, dir, r, container.CopyToContainerOptions{}); err != nil {
		if kind := compute.KindOf(classify(op, err)); kind != compute.KindInternal && kind != compute.KindInvalid {
			return classify(op, err)
		}
		return compute.Errorf(compute.KindInvalid, op, err, "the body is not a tar archive the engine could extract into %s: %s", dir, daemonMessage(err))
	}
	return nil
}

// WatchDir implements compute.Files with the helper's polling watcher (no
// inotify tool is in the base image): changes show within about 50 ms. Each
// event is one line, at most compute.MaxLineBytes long.
func (p *Provider) WatchDir(ctx context.Context, ref compute.Ref, dir string, emit func(compute.FileEvent) error) error {
	const op = "watch"
	dir, err := absPath(op, dir)
	if err != nil {
		return err
	}
	lines := &lineWriter{op: op, fn: func(line []byte) error {
		var ev compute.FileEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return compute.Errorf(compute.KindInternal, op, err, "the sandbox helper's watch event is not JSON: %v", err)
		}
		return emit(ev)
	}}
	return p.helper(ctx, op, ref.ID, []string{"watch", dir}, nil, nil, lines)
}

var (
	_ compute.Processes = (*Provider)(nil)
	_ compute.Files     = (*Provider)(nil)
)
