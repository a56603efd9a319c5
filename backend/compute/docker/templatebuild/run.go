package templatebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/strslice"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// Exit codes the step wrapper uses to say a limit was hit (read from the
// container's own cgroup files, which no process of the step can forge
// into a success: at worst a step fails itself with a wrong reason).
const (
	exitPids   = 213
	exitMemory = 214
)

// stepWrapper runs "$1" with bash (sh without it) and then checks the
// container's pids and memory cgroups for a hit limit, with shell builtins
// only (a fork bomb's children may still hold every pid). cgroup v1 and v2.
const stepWrapper = `if [ -x /bin/bash ]; then /bin/bash -c "$1"; else /bin/sh -c "$1"; fi
rc=$?
if [ $rc = ` + "213" + ` ] || [ $rc = ` + "214" + ` ]; then rc=1; fi
for f in /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events; do
  if [ -r "$f" ]; then read -r k n < "$f"; if [ "$k" = max ] && [ "$n" != 0 ]; then exit 213; fi; fi
done
for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
  if [ -r "$f" ]; then while read -r k n; do if [ "$k" = oom_kill ] && [ "$n" != 0 ]; then exit 214; fi; done < "$f"; fi
done
exit $rc`

// shellOf runs cmd with bash where the image has it, else sh.
func shellOf(cmd string) []string {
	return []string{"/bin/sh", "-c", `if [ -x /bin/bash ]; then exec /bin/bash -c "$1"; else exec /bin/sh -c "$1"; fi`, "sh", cmd}
}

// run is one Build call's bookkeeping: what it made, for the cleanup.
type run struct {
	b      *Builder
	req    compute.TemplateBuild
	nonce  string // LabelRun of everything this call makes
	log    *logger
	netID  string
	mu     sync.Mutex
	ctrs   []string
	images []string
}

// quiet is ctx for a Docker call whose answer we must get even when the
// build is cancelled (an id we would otherwise never learn, and so leak).
func quiet(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
}

// labels are the labels of everything the run makes.
func (r *run) labels(extra map[string]string) map[string]string {
	out := map[string]string{LabelBuild: r.req.BuildID, LabelRun: r.nonce}
	for k, v := range r.b.h.Labels {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// create makes a contained container from imageID running entrypoint
// (never started for COPY and configuration-only commits).
func (r *run) create(ctx context.Context, imageID string, st state, user string, entrypoint []string) (string, error) {
	cfg := &container.Config{
		Image: imageID, Env: st.Env, WorkingDir: st.Dir, User: user,
		Entrypoint: entrypoint, Cmd: nil, Labels: r.labels(nil),
		AttachStdout: true, AttachStderr: true,
	}
	pids := r.req.Limits.Pids
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(r.netID),
		Resources: container.Resources{
			NanoCPUs:   int64(r.req.CPUCount) * 1e9,
			Memory:     int64(r.req.MemoryMB) << 20,
			MemorySwap: int64(r.req.MemoryMB) << 20, // no swap: a step over its memory is OOM-killed
			PidsLimit:  &pids,
		},
	}
	hardening.Apply(hc) // the sandboxes' capabilities, no-new-privileges
	hc.LogConfig = container.LogConfig{Type: "none"}
	if r.b.h.StorageOpt != nil {
		hc.StorageOpt = r.b.h.StorageOpt(ctx)
	}
	qctx, cancel := quiet(ctx)
	defer cancel()
	resp, err := r.b.h.Client.ContainerCreate(qctx, cfg, hc, nil, nil, "")
	if resp.ID != "" {
		r.mu.Lock()
		r.ctrs = append(r.ctrs, resp.ID)
		r.mu.Unlock()
	}
	return resp.ID, err
}

// remove force-removes a container the run made.
func (r *run) remove(ctx context.Context, id string) {
	qctx, cancel := quiet(ctx)
	defer cancel()
	if err := r.b.h.Client.ContainerRemove(qctx, id, container.RemoveOptions{Force: true}); err == nil || cerrdefs.IsNotFound(err) {
		r.mu.Lock()
		r.ctrs = removeString(r.ctrs, id)
		r.mu.Unlock()
	}
}

func removeString(s []string, v string) []string {
	out := s[:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// commit makes container id the image of a step, with the image
// configuration st over parent's entrypoint and command (never the
// step's), labelled with its cache key.
func (r *run) commit(ctx context.Context, id string, parent *container.Config, st state, extra map[string]string) (string, error) {
	cfg := &container.Config{Env: st.Env, WorkingDir: st.Dir, User: st.User, Labels: r.labels(extra)}
	if cfg.User == "" {
		cfg.User = "0" // "" would take the step container's user (RUN's [cmd, user])
		if parent != nil && parent.User != "" {
			cfg.User = parent.User
		}
	}
	if cfg.WorkingDir == "" {
		cfg.WorkingDir = "/"
	}
	// The engine fills what the config leaves empty from the container's
	// own (the step's shell): an explicit empty entrypoint and the
	// parent's command keep the image's.
	cfg.Entrypoint = strslice.StrSlice{}
	if parent != nil {
		if len(parent.Entrypoint) > 0 {
			cfg.Entrypoint = parent.Entrypoint
		}
		cfg.Cmd = parent.Cmd
	}
	// A commit diffs the whole filesystem on drivers without a native
	// diff (fuse-overlayfs): minutes on a loaded host.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.req.Limits.StepTime)
	defer cancel()
	resp, err := r.b.h.Client.ContainerCommit(qctx, id, container.CommitOptions{Config: cfg})
	if resp.ID != "" {
		r.mu.Lock()
		r.images = append(r.images, resp.ID)
		r.mu.Unlock()
	}
	return resp.ID, err
}

// runStep runs cmd as user in a contained container from imageID,
// streaming its output to the log, and commits it. It returns the image.
func (r *run) runStep(ctx context.Context, n int, imageID string, parent *container.Config, st state, user, cmd, key string) (string, error) {
	step := fmt.Sprint(n)
	if user == "" {
		user = st.User
	}
	id, err := r.create(ctx, imageID, st, user, []string{"/bin/sh", "-c", stepWrapper, "sh", cmd})
	if err != nil {
		return "", r.engineErr(n, "creating the step's container", err)
	}
	defer r.remove(ctx, id)
	out := &lineWriter{emit: func(s string) { r.log.output(step, s) }}
	errw := &lineWriter{emit: func(s string) { r.log.output(step, s) }}
	code, err := r.attachRun(ctx, id, out, errw)
	out.flush()
	errw.flush()
	if err != nil {
		return "", r.waitErr(ctx, n, err)
	}
	if err := r.exitErr(ctx, n, id, code, cmd); err != nil {
		return "", err
	}
	labels := map[string]string{LabelKey: key}
	layer, ok, err := r.upperLayer(ctx, id)
	if err != nil {
		return "", &compute.TemplateBuildError{Kind: compute.KindInternal, Step: n, Err: err, Msg: "could not read the step's changes: " + err.Error()}
	}
	if ok {
		defer func() { layer.Close(); os.Remove(layer.Name()) }()
		img, err := r.loadImage(ctx, imageID, imageConfig{st: st, labels: labels}, layer)
		if err != nil {
			return "", r.engineErr(n, "adding the step's layer", err)
		}
		return img, nil
	}
	img, err := r.commit(ctx, id, parent, st, labels)
	if err != nil {
		return "", r.engineErr(n, "committing the step's layer", err)
	}
	return img, nil
}

// errStepTime is the cause of a step's context past its time limit.
var errStepTime = errors.New("step time limit")

// attachRun starts a created container with its output attached and waits
// for it to exit (within the step's time limit), returning its exit code.
func (r *run) attachRun(ctx context.Context, id string, stdout, stderr *lineWriter) (int64, error) {
	sctx, cancel := context.WithTimeoutCause(ctx, r.req.Limits.StepTime, errStepTime)
	defer cancel()
	att, err := r.b.h.Client.ContainerAttach(sctx, id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return 0, err
	}
	defer att.Close()
	copied := make(chan struct{})
	go func() {
		_, _ = stdcopy.StdCopy(stdout, stderr, att.Reader)
		close(copied)
	}()
	waitC, errC := r.b.h.Client.ContainerWait(sctx, id, container.WaitConditionNextExit)
	qctx, qcancel := quiet(ctx)
	err = r.b.h.Client.ContainerStart(qctx, id, container.StartOptions{})
	qcancel()
	if err != nil {
		return 0, err
	}
	select {
	case w := <-waitC:
		select { // the output ends with the process; a detached child may hold it open
		case <-copied:
		case <-time.After(5 * time.Second):
		case <-sctx.Done():
		}
		if w.Error != nil {
			return 0, errors.New(w.Error.Message)
		}
		return w.StatusCode, nil
	case err := <-errC:
		if c := context.Cause(sctx); c != nil {
			return 0, c
		}
		return 0, err
	case <-sctx.Done():
		return 0, context.Cause(sctx)
	}
}

// exitErr says why a step's container exited non-zero, naming the limit
// it hit if it hit one.
func (r *run) exitErr(ctx context.Context, n int, id string, code int64, what string) error {
	if code == 0 {
		return nil
	}
	oom := false
	qctx, cancel := quiet(ctx)
	if c, err := r.b.h.Client.ContainerInspect(qctx, id); err == nil && c.State != nil {
		oom = c.State.OOMKilled
	}
	cancel()
	switch {
	case code == exitMemory || oom:
		return &compute.TemplateBuildError{Kind: compute.KindResourceLimit, Step: n, Limit: compute.LimitMemory,
			Msg: fmt.Sprintf("the memory limit of %d MB was exceeded (a process was killed); raise memoryMB or make the step use less", r.req.MemoryMB)}
	case code == exitPids:
		return &compute.TemplateBuildError{Kind: compute.KindResourceLimit, Step: n, Limit: compute.LimitPids,
			Msg: fmt.Sprintf("the pids limit of %d processes was reached (a fork failed); make the step start fewer processes", r.req.Limits.Pids)}
	}
	return &compute.TemplateBuildError{Kind: compute.KindEntrypoint, Step: n,
		Msg: fmt.Sprintf("%s exited with code %d; its output is in the build's log", shorten(what, 200), code)}
}

// waitErr turns a failed wait into the build's terms.
func (r *run) waitErr(ctx context.Context, n int, err error) error {
	switch {
	case errors.Is(err, errStepTime):
		return &compute.TemplateBuildError{Kind: compute.KindResourceLimit, Step: n, Limit: compute.LimitStepTime, Err: err,
			Msg: fmt.Sprintf("the step ran past the step time limit of %s and was stopped", r.req.Limits.StepTime)}
	case ctx.Err() != nil:
		return ctxErr(ctx, n, r.req.Limits.BuildTime)
	}
	return r.engineErr(n, "running the step", err)
}

// errBuildTime is the cause of a build's context past its time limit.
var errBuildTime = errors.New("build time limit")

// ctxErr is the error of a build whose context ended.
func ctxErr(ctx context.Context, n int, limit time.Duration) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, errBuildTime) {
		return &compute.TemplateBuildError{Kind: compute.KindResourceLimit, Step: n, Limit: compute.LimitBuildTime, Err: cause,
			Msg: fmt.Sprintf("the build ran past the build time limit of %s and was stopped", limit)}
	}
	return &compute.TemplateBuildError{Kind: compute.KindUnavailable, Step: n, Err: cause, Msg: "the build was cancelled"}
}

// engineErr is a failure of the Docker engine itself.
func (r *run) engineErr(n int, doing string, err error) error {
	var be *compute.TemplateBuildError
	if errors.As(err, &be) {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), "Error response from daemon: ")
	if cerrdefs.IsNotFound(err) && strings.Contains(strings.ToLower(msg), "no such image") {
		return &compute.TemplateBuildError{Kind: compute.KindImageMissing, Step: n, Err: err, Msg: msg}
	}
	return &compute.TemplateBuildError{Kind: compute.KindUnavailable, Step: n, Err: err,
		Msg: fmt.Sprintf("the Docker engine failed %s: %s", doing, msg)}
}

// cleanup removes every container and image the run made (a failed or
// cancelled build): those it tracked, and any labelled with its nonce
// (a create whose answer was lost).
func (r *run) cleanup(ctx context.Context) {
	qctx, cancel := quiet(ctx)
	defer cancel()
	cli := r.b.h.Client
	r.mu.Lock()
	ctrs, imgs := append([]string(nil), r.ctrs...), append([]string(nil), r.images...)
	r.mu.Unlock()
	if cs, err := cli.ContainerList(qctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelRun+"="+r.nonce))}); err == nil {
		for _, c := range cs {
			ctrs = append(ctrs, c.ID)
		}
	}
	for _, id := range ctrs {
		_ = cli.ContainerRemove(qctx, id, container.RemoveOptions{Force: true})
	}
	// Newest first: a step's image is the parent of the next one's. An
	// image another build already built on is in use and stays.
	for i := len(imgs) - 1; i >= 0; i-- {
		_, _ = cli.ImageRemove(qctx, imgs[i], image.RemoveOptions{})
	}
	if is, err := cli.ImageList(qctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelRun+"="+r.nonce))}); err == nil {
		for _, im := range is {
			_, _ = cli.ImageRemove(qctx, im.ID, image.RemoveOptions{})
		}
	}
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
