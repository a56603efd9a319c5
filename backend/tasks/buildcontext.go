package tasks

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// buildContext is the build of one service: what its image is made of
// (hashed for the image's tag) and how it is sent to the builder.
type buildContext struct {
	Service string
	Hash    string // sha256 of the build inputs

	context    string
	dockerfile string // path inside the context, or "" when inline/outside
	inline     []byte // Dockerfile text added to the context as dockerfileInTar
	args       map[string]*string
	target     string
	files      []ctxFile
}

type ctxFile struct {
	rel  string
	info fs.FileInfo
	link string
}

const dockerfileInTar = ".dreadnode.Dockerfile"

var (
	repoSafe = regexp.MustCompile(`[^a-z0-9._-]+`)
)

// images computes the image of every service of p. taskName prefixes the
// tags of built images: dreadnode-task/<task>-<service>:<hash>.
func images(p *types.Project, taskName string) (map[string]*compute.Image, error) {
	out := map[string]*compute.Image{}
	for name, s := range p.Services {
		img := &compute.Image{Service: name, Ref: s.Image}
		if s.Build == nil {
			out[name] = img
			continue
		}
		bc := &buildContext{Service: name}
		if err := bc.prepare(s.Build); err != nil {
			return nil, &compute.BuildError{Service: name, Msg: err.Error()}
		}
		repo := "dreadnode-task/" + strings.Trim(repoSafe.ReplaceAllString(strings.ToLower(taskName+"-"+name), "-"), "-._")
		img.Build, img.Hash, img.Ref = true, bc.Hash, repo+":"+bc.Hash[:24]
		img.Dockerfile = bc.dockerfile
		if img.Dockerfile == "" {
			img.Dockerfile = dockerfileInTar
		}
		img.Args, img.Target, img.WriteContext = bc.args, bc.target, bc.writeContext
		out[name] = img
	}
	return out, nil
}

// prepare walks the build context and hashes everything the build reads: the
// context's files (path, mode, content, link target), the Dockerfile, the
// build args and the target.
func (img *buildContext) prepare(b *types.BuildConfig) error {
	img.context = b.Context
	img.target = b.Target
	img.args = map[string]*string(b.Args)
	st, err := os.Stat(b.Context)
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("build context %s is not a directory", b.Context)
	}
	h := sha256.New()
	err = filepath.WalkDir(b.Context, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.Context, path)
		if rel == "." {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := ctxFile{rel: filepath.ToSlash(rel), info: info}
		fmt.Fprintf(h, "F %q %o\n", f.rel, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			f.link, err = os.Readlink(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "L %q\n", f.link)
		case info.Mode().IsRegular():
			fh, err := os.Open(path)
			if err != nil {
				return err
			}
			n, err := io.Copy(h, fh)
			fh.Close()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "\nS %d\n", n)
		case info.IsDir():
		default:
			return nil // sockets, devices: not sent
		}
		img.files = append(img.files, f)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the build context: %w", err)
	}
	switch {
	case b.DockerfileInline != "":
		img.inline = []byte(b.DockerfileInline)
	default:
		df := b.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		abs := df
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(b.Context, df)
		}
		rel, err := filepath.Rel(b.Context, abs)
		if err == nil && !strings.HasPrefix(rel, "..") {
			if _, err := os.Stat(abs); err != nil {
				return fmt.Errorf("dockerfile: %w", err)
			}
			img.dockerfile = filepath.ToSlash(rel)
		} else if img.inline, err = os.ReadFile(abs); err != nil {
			return fmt.Errorf("dockerfile: %w", err)
		}
	}
	fmt.Fprintf(h, "D %q %x\n", img.dockerfile, sha256.Sum256(img.inline))
	keys := make([]string, 0, len(img.args))
	for k := range img.args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v := img.args[k]; v != nil {
			fmt.Fprintf(h, "A %q=%q\n", k, *v)
		} else {
			fmt.Fprintf(h, "A %q\n", k)
		}
	}
	fmt.Fprintf(h, "T %q\n", img.target)
	img.Hash = hex.EncodeToString(h.Sum(nil))
	return nil
}

// writeContext streams the build context as a tar.
func (img *buildContext) writeContext(w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, f := range img.files {
		hdr, err := tar.FileInfoHeader(f.info, f.link)
		if err != nil {
			return err
		}
		hdr.Name = f.rel
		if f.info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if f.info.Mode().IsRegular() {
			fh, err := os.Open(filepath.Join(img.context, filepath.FromSlash(f.rel)))
			if err != nil {
				return err
			}
			_, err = io.CopyN(tw, fh, hdr.Size)
			fh.Close()
			if err != nil {
				return err
			}
		}
	}
	if img.dockerfile == "" {
		if err := tw.WriteHeader(&tar.Header{Name: dockerfileInTar, Mode: 0o644, Size: int64(len(img.inline))}); err != nil {
			return err
		}
		if _, err := tw.Write(img.inline); err != nil {
			return err
		}
	}
	return tw.Close()
}
