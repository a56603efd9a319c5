package templatebuild

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// copyStep makes the layer of a COPY step: the files of its archive under
// src, placed at dest, written as a layer and loaded over the parent
// (load.go); no container runs, but one is created (never started) to
// read the image's users when the step names one.
func (r *run) copyStep(ctx context.Context, n int, imageID string, st state, s compute.TemplateStep, key string, dirs []string) (string, error) {
	field := fmt.Sprintf("steps.%d.args", n-1)
	uid, gid := 0, 0
	if len(s.Args) >= 3 && s.Args[2] != "" {
		id, err := r.create(ctx, imageID, st, "", []string{"/bin/true"})
		if err != nil {
			return "", r.engineErr(n, "creating the step's container", err)
		}
		uid, gid, err = r.lookupUser(ctx, id, s.Args[2])
		r.remove(ctx, id)
		if err != nil {
			return "", invalid(n, field, "%v", err)
		}
	}
	mode := int64(-1)
	if len(s.Args) == 4 && s.Args[3] != "" {
		m, _ := strconv.ParseUint(s.Args[3], 8, 32) // checked by checkStep
		mode = int64(m)
	}
	rc, err := r.req.Files(ctx, s.FilesHash)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctxErr(ctx, n, r.req.Limits.BuildTime)
		}
		return "", invalid(n, fmt.Sprintf("steps.%d.filesHash", n-1), "the files %s could not be read: %v (upload them before starting the build)", s.FilesHash, err)
	}
	defer rc.Close()
	layer, err := os.CreateTemp("", "dn-templatebuild-*.tar")
	if err != nil {
		return "", &compute.TemplateBuildError{Kind: compute.KindInternal, Step: n, Err: err, Msg: "could not stage the copied files: " + err.Error()}
	}
	defer func() { layer.Close(); os.Remove(layer.Name()) }()
	if err := writeDirs(tar.NewWriter(layer), dirs); err != nil {
		return "", &compute.TemplateBuildError{Kind: compute.KindInternal, Step: n, Err: err, Msg: "could not stage the copied files: " + err.Error()}
	}
	placed, err := rewrite(rc, layer, s.Args[0], st.resolve(s.Args[1]), strings.HasSuffix(s.Args[1], "/"), uid, gid, mode, r.req.Limits.FilesBytes, dirs...)
	var be *compute.TemplateBuildError
	switch {
	case errors.As(err, &be):
		be.Step = n
		return "", be
	case err != nil:
		return "", invalid(n, fmt.Sprintf("steps.%d.filesHash", n-1), "the uploaded files are not a usable tar archive: %v", err)
	case placed == 0:
		return "", invalid(n, field, "no uploaded file matches %q", s.Args[0])
	}
	r.log.info(fmt.Sprint(n), fmt.Sprintf("copied %d entries to %s", placed, st.resolve(s.Args[1])))
	img, err := r.loadImage(ctx, imageID, imageConfig{st: st, labels: map[string]string{LabelKey: key}}, layer)
	if err != nil {
		return "", r.engineErr(n, "adding the copied files as a layer", err)
	}
	return img, nil
}

// cleanRel is an archive entry's name relative to the archive's root, or
// false when it leaves it.
func cleanRel(name string) (string, bool) {
	p := path.Clean("/" + strings.TrimPrefix(name, "./"))
	if strings.Contains(name, "..") {
		for _, part := range strings.Split(name, "/") {
			if part == ".." {
				return "", false
			}
		}
	}
	return strings.TrimPrefix(p, "/"), true
}

// rewrite copies the entries of the (gzip'd or plain) tar in under src to
// out, renamed under dest and owned by uid:gid (mode on files when >= 0).
// A directory src (or ".") copies its contents into dest; a file src goes
// to dest, or into it when dest ends in "/". It returns how many entries it
// wrote; past limit bytes it fails naming the files limit.
// written are the directories already in out (WORKDIR's, writeDirs): the
// engine refuses a layer naming a path twice, so they are not written again.
func rewrite(in io.Reader, out io.Writer, src, dest string, destIsDir bool, uid, gid int, mode, limit int64, written ...string) (int, error) {
	br := bufio.NewReader(in)
	var rd io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return 0, err
		}
		defer gz.Close()
		rd = gz
	}
	srcRel, ok := cleanRel(src)
	if !ok {
		return 0, &compute.TemplateBuildError{Kind: compute.KindInvalid, Msg: fmt.Sprintf("COPY's source %q leaves the uploaded files", src)}
	}
	tr := tar.NewReader(rd)
	tw := &dedupWriter{Writer: tar.NewWriter(out), seen: map[string]bool{}}
	for _, d := range written {
		tw.seen[strings.Trim(path.Clean(d), "/")] = true
	}
	var total int64
	n := 0
	target := func(rel string, isSrc bool, isDir bool) string {
		switch {
		case srcRel == "" || srcRel == ".": // everything, into dest
			return path.Join(dest, rel)
		case isSrc && !isDir && destIsDir:
			return path.Join(dest, path.Base(rel))
		case isSrc:
			return dest
		}
		return path.Join(dest, strings.TrimPrefix(rel, srcRel+"/"))
	}
	match := func(rel string) (in, isSrc bool) {
		switch {
		case srcRel == "" || srcRel == ".":
			return true, rel == ""
		case rel == srcRel:
			return true, true
		}
		return strings.HasPrefix(rel, srcRel+"/"), false
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
		rel, ok := cleanRel(h.Name)
		if !ok {
			return n, &compute.TemplateBuildError{Kind: compute.KindInvalid, Msg: fmt.Sprintf("the uploaded files name %q, which leaves the archive", h.Name)}
		}
		in, isSrc := match(rel)
		if !in {
			continue
		}
		isDir := h.Typeflag == tar.TypeDir
		name := strings.TrimPrefix(target(rel, isSrc, isDir), "/")
		if name == "" {
			continue // the root itself
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		case tar.TypeLink:
			lrel, ok := cleanRel(h.Linkname)
			lin, lsrc := match(lrel)
			if !ok || !lin {
				return n, &compute.TemplateBuildError{Kind: compute.KindInvalid, Msg: fmt.Sprintf("the uploaded hard link %q points outside the copied files", h.Name)}
			}
			h.Linkname = strings.TrimPrefix(target(lrel, lsrc, false), "/")
		default:
			continue // devices, fifos: never copied
		}
		if total += h.Size; total > limit {
			return n, &compute.TemplateBuildError{Kind: compute.KindResourceLimit, Limit: compute.LimitFiles,
				Msg: fmt.Sprintf("the files of the COPY step exceed the files size limit of %d MB", limit>>20)}
		}
		h.Name = name
		if isDir {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = uid, gid, "", ""
		if mode >= 0 && h.Typeflag == tar.TypeReg {
			h.Mode = mode
		}
		h.PAXRecords = nil
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return n, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.CopyN(tw, tr, h.Size); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, tw.Close()
}

// lookupUser resolves user[:group] (names or ids) from the container's
// /etc/passwd and /etc/group.
func (r *run) lookupUser(ctx context.Context, id, spec string) (int, int, error) {
	name, group, _ := strings.Cut(spec, ":")
	uid, gid := -1, -1
	if v, err := strconv.Atoi(name); err == nil {
		uid = v
	}
	if group != "" {
		if v, err := strconv.Atoi(group); err == nil {
			gid = v
		}
	}
	if uid < 0 || (group == "" || gid < 0) {
		passwd, _ := r.readFile(ctx, id, "/etc/passwd")
		for _, line := range strings.Split(passwd, "\n") {
			f := strings.Split(line, ":")
			if len(f) < 4 || (f[0] != name && f[2] != name) {
				continue
			}
			if uid < 0 {
				uid, _ = strconv.Atoi(f[2])
			}
			if group == "" {
				gid, _ = strconv.Atoi(f[3])
			}
			break
		}
	}
	if uid < 0 {
		return 0, 0, fmt.Errorf("user %q does not exist in the image", name)
	}
	if gid < 0 && group != "" {
		groups, _ := r.readFile(ctx, id, "/etc/group")
		for _, line := range strings.Split(groups, "\n") {
			if f := strings.Split(line, ":"); len(f) >= 3 && f[0] == group {
				gid, _ = strconv.Atoi(f[2])
				break
			}
		}
		if gid < 0 {
			return 0, 0, fmt.Errorf("group %q does not exist in the image", group)
		}
	}
	if gid < 0 {
		gid = uid
	}
	return uid, gid, nil
}

// readFile reads a small file of a container (at most 1 MiB).
func (r *run) readFile(ctx context.Context, id, p string) (string, error) {
	qctx, cancel := quiet(ctx)
	defer cancel()
	rc, _, err := r.b.h.Client.CopyFromContainer(qctx, id, p)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
	return string(b), err
}

// writeDirs writes directory entries (root's, 0755) and flushes without
// ending the archive, so more entries may follow.
func writeDirs(tw *tar.Writer, dirs []string) error {
	for _, d := range dirs {
		name := strings.Trim(path.Clean(d), "/")
		if name == "" {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// dirLayer is a layer of just the directories dirs.
func dirLayer(dirs []string) (*os.File, error) {
	f, err := os.CreateTemp("", "dn-templatebuild-*.tar")
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(f)
	err = writeDirs(tw, dirs)
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}
