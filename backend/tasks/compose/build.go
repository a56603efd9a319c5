package compose

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
)

// Image is the image one service runs.
type Image struct {
	Service string
	Ref     string // what the container runs: a content-addressed tag, or the compose image
	Build   bool   // built from the task's sources
	Hash    string // sha256 of the build inputs (Build only)

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
	ansiRE   = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
)

// Images computes the image of every service of p. taskName prefixes the
// tags of built images: dreadnode-task/<task>-<service>:<hash>.
func (e *Engine) Images(p *types.Project, taskName string) (map[string]*Image, error) {
	out := map[string]*Image{}
	for name, s := range p.Services {
		img := &Image{Service: name, Ref: s.Image}
		if s.Build == nil {
			out[name] = img
			continue
		}
		img.Build = true
		if err := img.prepare(s.Build); err != nil {
			return nil, &BuildError{Service: name, Msg: err.Error()}
		}
		repo := "dreadnode-task/" + strings.Trim(repoSafe.ReplaceAllString(strings.ToLower(taskName+"-"+name), "-"), "-._")
		img.Ref = repo + ":" + img.Hash[:24]
		out[name] = img
	}
	return out, nil
}

// prepare walks the build context and hashes everything the build reads: the
// context's files (path, mode, content, link target), the Dockerfile, the
// build args and the target.
func (img *Image) prepare(b *types.BuildConfig) error {
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
func (img *Image) writeContext(w io.Writer) error {
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

// BuildError is a failed image build, worded for the environment's error.
type BuildError struct {
	Service string
	Step    string // e.g. "Step 3/4 : RUN make"
	Msg     string
	Output  []string // last lines of build output
}

func (e *BuildError) Error() string {
	s := fmt.Sprintf("service %q", e.Service)
	if e.Step != "" {
		s += ": " + e.Step
	}
	s += ": " + e.Msg
	if len(e.Output) > 0 {
		s += "\nlast build output:\n" + strings.Join(e.Output, "\n")
	}
	return s
}

// Missing returns the images that must be built or are absent (image-only
// services whose image is not present locally are reported by Build).
func (e *Engine) Missing(ctx context.Context, imgs map[string]*Image) ([]*Image, error) {
	var out []*Image
	for _, img := range sortedImages(imgs) {
		_, err := e.cli.ImageInspect(ctx, img.Ref)
		switch {
		case err == nil:
		case errdefs.IsNotFound(err):
			out = append(out, img)
		default:
			return nil, perr(err, "inspecting image %s", img.Ref)
		}
	}
	return out, nil
}

func sortedImages(imgs map[string]*Image) []*Image {
	out := make([]*Image, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, img)
	}
	slices.SortFunc(out, func(a, b *Image) int { return strings.Compare(a.Service, b.Service) })
	return out
}

type buildCall struct {
	done chan struct{}
	err  error
}

// Build builds every missing image of imgs and returns how many it built.
// Builds are shared: concurrent callers wanting the same image wait for one
// build, which runs on the Engine's context (a caller giving up does not
// cancel it for the others). Image-only services must be present locally.
func (e *Engine) Build(ctx context.Context, imgs map[string]*Image) (int, error) {
	missing, err := e.Missing(ctx, imgs)
	if err != nil {
		return 0, err
	}
	for _, img := range missing {
		if !img.Build {
			return 0, &BuildError{Service: img.Service,
				Msg: fmt.Sprintf("image %q is not present locally and no registry is used; give the service a build section", img.Ref)}
		}
	}
	calls := make([]*buildCall, len(missing))
	e.mu.Lock()
	for i, img := range missing {
		call, running := e.builds[img.Ref]
		if !running {
			call = &buildCall{done: make(chan struct{})}
			e.builds[img.Ref] = call
			go func() {
				call.err = e.build(img)
				e.mu.Lock()
				delete(e.builds, img.Ref)
				e.mu.Unlock()
				close(call.done)
			}()
		}
		calls[i] = call
	}
	e.mu.Unlock()
	built := 0
	for _, call := range calls { // in service order, so the first failure reported is stable
		select {
		case <-ctx.Done():
			return built, context.Cause(ctx)
		case <-call.done:
		}
		if call.err != nil {
			return built, call.err
		}
		built++
	}
	return built, nil
}

func (e *Engine) build(img *Image) error {
	ctx, cancel := context.WithTimeout(e.ctx, e.buildTO)
	defer cancel()
	// Another process (or an earlier call) may have built it meanwhile.
	if _, err := e.cli.ImageInspect(ctx, img.Ref); err == nil {
		return nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(img.writeContext(pw)) }()
	defer pr.Close()
	df := img.dockerfile
	if df == "" {
		df = dockerfileInTar
	}
	e.buildCount.Add(1)
	e.log.Info("building task image", "image", img.Ref, "service", img.Service)
	resp, err := e.cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{img.Ref},
		Dockerfile:  df,
		BuildArgs:   img.args,
		Target:      img.target,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		Labels:      map[string]string{LabelHash: img.Hash, LabelService: img.Service},
	})
	if err != nil {
		if e.ctx.Err() != nil {
			return e.ctx.Err() // the engine is closing: not the task's fault
		}
		if ctx.Err() != nil {
			return &BuildError{Service: img.Service, Msg: "the build did not finish within " + e.buildTO.String()}
		}
		return &BuildError{Service: img.Service, Msg: cleanDockerErr(err)}
	}
	defer resp.Body.Close()
	var step string
	var tail []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		for _, line := range strings.Split(strings.TrimRight(m.Stream, "\n"), "\n") {
			line = strings.TrimRight(line, "\r ")
			if line == "" {
				continue
			}
			if strings.HasPrefix(line, "Step ") {
				step, tail = line, nil
				continue
			}
			if strings.HasPrefix(line, " ---> ") || strings.HasPrefix(line, "Removing intermediate") {
				continue
			}
			if line = strings.TrimSpace(ansiRE.ReplaceAllString(line, "")); line == "" {
				continue
			}
			tail = append(tail, truncate(line, 300))
			if len(tail) > 10 {
				tail = tail[1:]
			}
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			msg = strings.TrimSpace(ansiRE.ReplaceAllString(msg, ""))
			// "The command '/bin/sh -c <the step again>' returned a non-zero code: 3"
			if strings.HasPrefix(msg, "The command '") && step != "" {
				if i := strings.LastIndex(msg, "' returned a non-zero code: "); i > 0 {
					msg = "the command" + msg[i+1:]
				}
			}
			return &BuildError{Service: img.Service, Step: step, Msg: msg, Output: tail}
		}
	}
	if err := sc.Err(); err != nil {
		if e.ctx.Err() != nil {
			return e.ctx.Err()
		}
		if ctx.Err() != nil {
			return &BuildError{Service: img.Service, Step: step, Msg: "the build did not finish within " + e.buildTO.String()}
		}
		return &BuildError{Service: img.Service, Step: step, Msg: "reading the build output: " + err.Error()}
	}
	if e.ctx.Err() != nil {
		return e.ctx.Err()
	}
	if _, err := e.cli.ImageInspect(ctx, img.Ref); err != nil {
		return &BuildError{Service: img.Service, Step: step, Msg: "the build finished but produced no image " + img.Ref}
	}
	return nil
}

// RemoveImage deletes an image (tests and cleanup); a missing one is fine.
func (e *Engine) RemoveImage(ctx context.Context, ref string) error {
	_, err := e.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !errdefs.IsNotFound(err) {
		return err
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
