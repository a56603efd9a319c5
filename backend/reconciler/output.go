package reconciler

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Bounds of what keepOutput keeps of one record's output directory: the
// files' contents and the number of entries (each costs a 512-byte tar
// header). Past either, entries are left out and the output says so.
const (
	maxOutputBytes   = 64 << 20
	maxOutputEntries = 10000
	outputReadLimit  = 2 * time.Minute
)

// keepOutput saves the record's output directory (store.Spec.OutputDir)
// before its instance is removed. Nothing in it is trusted: the tar the
// provider reads out of the sandbox is re-encoded entry by entry (regular
// files, directories and symlinks, as names; never extracted here), within
// maxOutputBytes and maxOutputEntries. A directory that is missing is an
// empty output; one that cannot be read is logged and the stop goes on, so
// a job's output never keeps its instance (and its bill) alive.
func (rc *Reconciler) keepOutput(ctx context.Context, r *store.Record, ref compute.Ref) {
	dir := r.Spec.OutputDir
	files, ok := rc.prov.(compute.Files)
	if dir == "" || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, outputReadLimit)
	defer cancel()
	out := store.Output{SavedAt: rc.now()}
	src, err := files.ReadArchive(ctx, ref, dir)
	if errors.Is(err, errors.ErrUnsupported) {
		src, err = archiveByFiles(ctx, files, ref, dir) // E2B: envd has no archive route
	}
	switch {
	case compute.IsNotFound(err):
		out.Archive, err = emptyTar()
	case err == nil:
		out, err = boundTar(src, out.SavedAt)
		src.Close()
	}
	if err != nil {
		rc.log.Warn("reading a job's output directory failed; the job ends without its output", "record", r.ID, "dir", dir, "err", err)
		return
	}
	if err := rc.db.SaveOutput(ctx, r.ID, out); err != nil {
		rc.log.Warn("keeping a job's output failed", "record", r.ID, "err", err)
	}
}

// boundTar copies the entries of the tar src into a new tar, within the
// bounds.
func boundTar(src io.Reader, now time.Time) (store.Output, error) {
	out := store.Output{SavedAt: now}
	var buf bytes.Buffer
	tr, tw := tar.NewReader(src), tar.NewWriter(&buf)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		default:
			continue // devices, FIFOs, hard links: nothing a download needs
		}
		if name := path.Clean(hdr.Name); path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			continue // a name that would land outside the directory where the download is unpacked
		}
		if out.Files >= maxOutputEntries || out.Bytes+hdr.Size > maxOutputBytes || hdr.Size < 0 {
			out.Truncated = true
			break
		}
		clean := &tar.Header{Typeflag: hdr.Typeflag, Name: hdr.Name, Linkname: hdr.Linkname, Size: hdr.Size,
			Mode: hdr.Mode & 0o777, ModTime: hdr.ModTime, Format: tar.FormatPAX}
		if hdr.Typeflag != tar.TypeReg {
			clean.Size = 0
		}
		if err := tw.WriteHeader(clean); err != nil {
			return out, err
		}
		if clean.Size > 0 {
			if _, err := io.CopyN(tw, tr, clean.Size); err != nil {
				return out, err
			}
		}
		out.Files++
		out.Bytes += clean.Size
	}
	if err := tw.Close(); err != nil {
		return out, err
	}
	out.Archive = buf.Bytes()
	return out, nil
}

func emptyTar() ([]byte, error) {
	var buf bytes.Buffer
	err := tar.NewWriter(&buf).Close()
	return buf.Bytes(), err
}

// archiveByFiles is ReadArchive for a provider without one: dir's tree as a
// tar, listed a directory at a time and read a regular file at a time.
// Symlinks are left out (the listing does not say where they point, and a
// read would follow them); the walk stops past the bounds, which boundTar
// then enforces. A missing dir is compute's not-found, as from ReadArchive.
func archiveByFiles(ctx context.Context, files compute.Files, ref compute.Ref, dir string) (io.ReadCloser, error) {
	top, err := files.ListDir(ctx, ref, dir, 1)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeTree(ctx, files, ref, dir, top, pw))
	}()
	return pr, nil
}

func writeTree(ctx context.Context, files compute.Files, ref compute.Ref, dir string, top []compute.FileInfo, w io.Writer) error {
	tw := tar.NewWriter(w)
	var entries int
	var size int64
	queue := [][]compute.FileInfo{top}
	for len(queue) > 0 && entries <= maxOutputEntries && size <= maxOutputBytes {
		list := queue[0]
		queue = queue[1:]
		slices.SortFunc(list, func(a, b compute.FileInfo) int { return strings.Compare(a.Path, b.Path) })
		for _, fi := range list {
			rel, ok := strings.CutPrefix(fi.Path, strings.TrimSuffix(dir, "/")+"/")
			if !ok || rel == "" {
				continue // the listing of a file path is the file itself; nothing outside dir
			}
			hdr := &tar.Header{Name: "./" + rel, Mode: int64(fi.Mode & 0o777), ModTime: fi.ModifiedAt, Format: tar.FormatPAX}
			switch fi.Type {
			case compute.FileTypeDir:
				sub, err := files.ListDir(ctx, ref, fi.Path, 1)
				if err != nil {
					return err
				}
				queue = append(queue, sub)
				hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
				if err := tw.WriteHeader(hdr); err != nil {
					return err
				}
			case compute.FileTypeFile:
				if size+fi.Size > maxOutputBytes {
					// Past the bound: the header alone says so to boundTar.
					hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size
					_ = tw.WriteHeader(hdr)
					return nil
				}
				rc, _, err := files.OpenFile(ctx, ref, fi.Path, 0, -1)
				if err != nil {
					return err
				}
				// The size the listing gave may have changed since: the
				// entry holds what was read, within the bound.
				body, err := io.ReadAll(io.LimitReader(rc, maxOutputBytes-size+1))
				rc.Close()
				if err != nil {
					return err
				}
				hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(body))
				if err := tw.WriteHeader(hdr); err != nil {
					return err
				}
				if _, err := tw.Write(body); err != nil {
					return err
				}
				size += hdr.Size
			default:
				continue
			}
			if entries++; entries > maxOutputEntries || size > maxOutputBytes {
				break
			}
		}
	}
	return tw.Close()
}
