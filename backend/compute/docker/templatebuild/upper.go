package templatebuild

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// upperLayer writes the changes of an exited overlay container (its upper
// directory, read on the engine's host, which the backend shares: see the
// Docker provider's egress) as a layer tar, in the OCI layer format: a
// whiteout device becomes a ".wh." file and an opaque directory gets
// ".wh..wh..opq". It is what the overlay drivers' own diff does, without
// the whole-filesystem walk of a commit on fuse-overlayfs. ok is false when
// the container has no readable upper directory (another driver, an engine
// elsewhere): the caller commits instead.
func (r *run) upperLayer(ctx context.Context, id string) (f *os.File, ok bool, err error) {
	c, err := r.b.h.Client.ContainerInspect(ctx, id)
	if err != nil || c.GraphDriver.Data == nil {
		return nil, false, nil
	}
	switch c.GraphDriver.Name {
	case "overlay2", "fuse-overlayfs":
	default:
		return nil, false, nil
	}
	upper := c.GraphDriver.Data["UpperDir"]
	if upper == "" {
		return nil, false, nil
	}
	if st, err := os.Stat(upper); err != nil || !st.IsDir() {
		return nil, false, nil
	}
	f, err = os.CreateTemp("", "dn-templatebuild-*.tar")
	if err != nil {
		return nil, false, err
	}
	if err := tarUpper(upper, f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, false, err
	}
	return f, true, nil
}

// opaque reports whether an overlay directory hides its lower ones.
func opaque(p string) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.overlay.opaque", "user.overlay.opaque", "user.fuseoverlayfs.opaque"} {
		if n, err := unix.Lgetxattr(p, attr, buf); err == nil && n > 0 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

func tarUpper(root string, w io.Writer) error {
	// The engine refuses a layer naming a path twice ("duplicates of file
	// paths not supported"); fuse-overlayfs marks an opaque directory
	// both with an xattr and with a ".wh..wh..opq" file, so the marker
	// written for the one is skipped for the other.
	tw := &dedupWriter{Writer: tar.NewWriter(w), seen: map[string]bool{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(info.Mode().Perm()), ModTime: info.ModTime(), Format: tar.FormatPAX}
		if st != nil {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
			hdr.Mode |= int64(st.Mode & (syscall.S_ISUID | syscall.S_ISGID | syscall.S_ISVTX))
		}
		mode := info.Mode()
		switch {
		case mode&fs.ModeCharDevice != 0 && st != nil && st.Rdev == 0:
			// A whiteout: the file is deleted in this layer.
			return tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(filepath.Join(filepath.Dir(rel), ".wh."+filepath.Base(rel))),
				Typeflag: tar.TypeReg, Mode: 0o600, ModTime: info.ModTime(), Format: tar.FormatPAX})
		case mode.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if opaque(p) {
				return tw.WriteHeader(&tar.Header{Name: hdr.Name + ".wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o600, Format: tar.FormatPAX})
			}
			return nil
		case mode&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
			return tw.WriteHeader(hdr)
		case mode.IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			fh, err := os.Open(p)
			if err != nil {
				return err
			}
			defer fh.Close()
			_, err = io.CopyN(tw, fh, info.Size())
			return err
		case mode&fs.ModeNamedPipe != 0:
			hdr.Typeflag = tar.TypeFifo
			return tw.WriteHeader(hdr)
		}
		return nil // sockets, devices: never part of an image
	})
	if err != nil {
		return errors.Join(err, tw.Close())
	}
	return tw.Close()
}

// dedupWriter writes each path once: a later header of a path already
// written is dropped with its content.
type dedupWriter struct {
	*tar.Writer
	seen map[string]bool
	skip bool
}

func (d *dedupWriter) WriteHeader(h *tar.Header) error {
	name := strings.TrimSuffix(h.Name, "/")
	if d.skip = d.seen[name]; d.skip {
		return nil
	}
	d.seen[name] = true
	return d.Writer.WriteHeader(h)
}

func (d *dedupWriter) Write(b []byte) (int, error) {
	if d.skip {
		return len(b), nil
	}
	return d.Writer.Write(b)
}
