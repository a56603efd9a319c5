package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// BuildsImages implements compute.GroupProvider: Docker runs images built
// from the task's sources.
func (e *Groups) BuildsImages() bool { return true }

// Missing returns the images that must be built or are absent (image-only
// services whose image is not present locally are reported by Build).
func (e *Groups) Missing(ctx context.Context, imgs map[string]*compute.Image) ([]*compute.Image, error) {
	var out []*compute.Image
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

func sortedImages(imgs map[string]*compute.Image) []*compute.Image {
	out := make([]*compute.Image, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, img)
	}
	slices.SortFunc(out, func(a, b *compute.Image) int { return strings.Compare(a.Service, b.Service) })
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
func (e *Groups) Build(ctx context.Context, imgs map[string]*compute.Image) (int, error) {
	missing, err := e.Missing(ctx, imgs)
	if err != nil {
		return 0, err
	}
	for _, img := range missing {
		if !img.Build {
			return 0, &compute.BuildError{Service: img.Service,
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

func (e *Groups) build(img *compute.Image) error {
	ctx, cancel := context.WithTimeout(e.ctx, e.buildTO)
	defer cancel()
	// Another process (or an earlier call) may have built it meanwhile.
	if _, err := e.cli.ImageInspect(ctx, img.Ref); err == nil {
		return nil
	}
	if img.WriteContext == nil {
		return &compute.BuildError{Service: img.Service, Msg: "the image has no build context"}
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(img.WriteContext(pw)) }()
	defer pr.Close()
	netMode, err := e.buildNetwork(ctx)
	if err != nil {
		return &compute.BuildError{Service: img.Service, Msg: "the build network is not available: " + err.Error()}
	}
	e.buildCount.Add(1)
	e.log.Info("building task image", "image", img.Ref, "service", img.Service)
	l := hardening.BuildLimits
	resp, err := e.cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{img.Ref},
		Dockerfile:  img.Dockerfile,
		BuildArgs:   img.Args,
		Target:      img.Target,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		Labels:      map[string]string{LabelHash: img.Hash, compute.LabelService: img.Service},
		// Each RUN step's container: memory without swap, CPU, the pids
		// of every task build together (buildCgroup), and a network that
		// reaches neither the host, link-local nor any sandbox.
		Memory:       l.MemoryBytes,
		MemorySwap:   l.MemoryBytes,
		CPUPeriod:    100_000,
		CPUQuota:     l.NanoCPUs / 10_000,
		NetworkMode:  netMode,
		CgroupParent: buildCgroup(ctx, e, l.Pids*4),
	})
	if err != nil {
		if e.ctx.Err() != nil {
			return e.ctx.Err() // the engine is closing: not the task's fault
		}
		if ctx.Err() != nil {
			return &compute.BuildError{Service: img.Service, Msg: "the build did not finish within " + e.buildTO.String()}
		}
		return &compute.BuildError{Service: img.Service, Msg: strings.TrimPrefix(err.Error(), "Error response from daemon: ")}
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
			return &compute.BuildError{Service: img.Service, Step: step, Msg: msg, Output: tail}
		}
	}
	if err := sc.Err(); err != nil {
		if e.ctx.Err() != nil {
			return e.ctx.Err()
		}
		if ctx.Err() != nil {
			return &compute.BuildError{Service: img.Service, Step: step, Msg: "the build did not finish within " + e.buildTO.String()}
		}
		return &compute.BuildError{Service: img.Service, Step: step, Msg: "reading the build output: " + err.Error()}
	}
	if e.ctx.Err() != nil {
		return e.ctx.Err()
	}
	if _, err := e.cli.ImageInspect(ctx, img.Ref); err != nil {
		return &compute.BuildError{Service: img.Service, Step: step, Msg: "the build finished but produced no image " + img.Ref}
	}
	return nil
}

// buildNetwork is the network mode of a build's RUN steps: the one
// GroupConfig.BuildNetwork gives, or none.
func (e *Groups) buildNetwork(ctx context.Context) (string, error) {
	if e.buildNet == nil {
		return "none", nil
	}
	return e.buildNet(ctx)
}

// RemoveImage deletes an image (tests and cleanup); a missing one is fine.
func (e *Groups) RemoveImage(ctx context.Context, ref string) error {
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
