package templatebuild

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Build implements compute.TemplateBuilder.BuildTemplate.
func (b *Builder) Build(ctx context.Context, req compute.TemplateBuild) (res compute.TemplateBuildResult, err error) {
	if err := normalize(&req); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, req.Limits.BuildTime, errBuildTime)
	defer cancel()
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	r := &run{b: b, req: req, nonce: hex.EncodeToString(nonce), log: newLogger(req.Log, req.Limits.LogBytes)}
	defer func() {
		if err != nil {
			r.cleanup(ctx)
		}
	}()
	return r.build(ctx)
}

// group is a run of configuration steps ended by a layer step (or by the
// end of the steps): one commit.
type group struct {
	first, last int // step indexes, inclusive; last < first: no step (the final commit alone)
}

func (r *run) build(ctx context.Context) (compute.TemplateBuildResult, error) {
	req := r.req
	cli := r.b.h.Client
	from, field := req.FromImage, "fromImage"
	if from == "" {
		from, field = req.FromTemplate, "fromTemplate"
	}
	r.log.info("base", "FROM "+from)
	base, err := cli.ImageInspect(ctx, from)
	switch {
	case cerrdefs.IsNotFound(err):
		return compute.TemplateBuildResult{}, &compute.TemplateBuildError{Kind: compute.KindImageMissing, Field: field, Err: err,
			Msg: fmt.Sprintf("image %q is not on the Docker host (nothing is pulled from a registry: build, load or tag it there first)", from)}
	case err != nil:
		return compute.TemplateBuildResult{}, r.engineErr(0, "inspecting the base image", err)
	}
	parentCfg := &container.Config{}
	if c := base.Config; c != nil {
		parentCfg = &container.Config{Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, Entrypoint: c.Entrypoint, Cmd: c.Cmd, Labels: c.Labels}
	}
	st := state{Env: append([]string(nil), parentCfg.Env...), Dir: parentCfg.WorkingDir, User: parentCfg.User}
	var inherited compute.StartCommand
	workdirSet := false // a WORKDIR step set the directory (here or in a parent template)
	if req.FromTemplate != "" {
		inherited = StartOf(parentCfg.Labels)
		workdirSet = parentCfg.Labels[LabelWorkdir] != ""
	}
	for _, s := range req.Steps {
		workdirSet = workdirSet || strings.EqualFold(strings.TrimSpace(s.Type), stepWORKDIR)
	}
	if r.netID, err = r.b.h.Network(ctx); err != nil {
		return compute.TemplateBuildResult{}, &compute.TemplateBuildError{Kind: compute.KindNetwork, Err: err,
			Msg: fmt.Sprintf("the build network is not available: %v", err)}
	}

	cur := base.ID
	res := compute.TemplateBuildResult{Steps: make([]compute.TemplateStepResult, len(req.Steps))}
	total := len(req.Steps)
	forced := req.Force
	var trailingDirs []string
	for _, g := range groups(req.Steps) {
		steps := req.Steps[g.first : g.last+1]
		for _, s := range steps {
			forced = forced || s.Force
		}
		layer := steps[len(steps)-1]
		if !makesLayer(layer) {
			// Trailing configuration steps: folded into the final commit
			// (logged with it, once it is known whether it was cached).
			for _, s := range steps {
				st.apply(s)
				if s.Type == stepWORKDIR {
					trailingDirs = append(trailingDirs, st.Dir)
				}
			}
			break
		}
		started := time.Now()
		key := cacheKey(cur, steps, "")
		hit := ""
		if !forced {
			hit = r.lookup(ctx, key)
		}
		var dirs []string // WORKDIR makes its directory, as a Dockerfile's
		for _, s := range steps[:len(steps)-1] {
			st.apply(s)
			if s.Type == stepWORKDIR {
				dirs = append(dirs, st.Dir)
			}
		}
		n := g.last + 1
		if hit != "" {
			for i, s := range steps {
				r.log.info(fmt.Sprint(g.first+i+1), fmt.Sprintf("CACHED [builder %d/%d] %s", g.first+i+1, total, describe(s)))
				res.Steps[g.first+i].Cached = true
			}
			cur = hit
		} else {
			for i, s := range steps {
				r.log.info(fmt.Sprint(g.first+i+1), fmt.Sprintf("[builder %d/%d] %s", g.first+i+1, total, describe(s)))
			}
			var img string
			var err error
			if layer.Type == stepRUN {
				user := ""
				if len(layer.Args) == 2 {
					user = layer.Args[1]
				}
				img, err = r.runStep(ctx, n, cur, parentCfg, st, user, layer.Args[0], key)
			} else {
				img, err = r.copyStep(ctx, n, cur, st, layer, key, dirs)
			}
			if err != nil {
				return compute.TemplateBuildResult{}, err
			}
			cur = img
			forced = true // later steps build on a new layer: nothing cached can match
		}
		res.Steps[g.last].Duration = time.Since(started)
		if ctx.Err() != nil {
			return compute.TemplateBuildResult{}, ctxErr(ctx, n, req.Limits.BuildTime)
		}
	}

	start := resolveStart(req, inherited, st)
	startJSON, _ := json.Marshal(start)
	workdir := ""
	if workdirSet {
		workdir = st.Dir
	}
	final, cached, err := r.finalImage(ctx, cur, st, finalLabels{start: string(startJSON), workdir: workdir}, req.Steps, forced, trailingDirs)
	if err != nil {
		return compute.TemplateBuildResult{}, err
	}
	if gs := groups(req.Steps); len(gs) > 0 && !makesLayer(req.Steps[gs[len(gs)-1].last]) {
		for i := gs[len(gs)-1].first; i < len(req.Steps); i++ {
			prefix := ""
			if cached {
				prefix, res.Steps[i].Cached = "CACHED ", true
			}
			r.log.info(fmt.Sprint(i+1), fmt.Sprintf("%s[builder %d/%d] %s", prefix, i+1, total, describe(req.Steps[i])))
		}
	}
	if start.Cmd != "" || start.ReadyCmd != "" {
		if err := r.checkStart(ctx, final, start); err != nil {
			return compute.TemplateBuildResult{}, err
		}
	}
	ref := Ref(req.TemplateID, req.BuildID)
	qctx, cancel := quiet(ctx)
	defer cancel()
	if err := cli.ImageTag(qctx, final, ref); err != nil {
		return compute.TemplateBuildResult{}, r.engineErr(0, "tagging the template's image", err)
	}
	if ctx.Err() != nil { // cancelled while tagging: the tag goes with the rest
		_, _ = cli.ImageRemove(qctx, ref, image.RemoveOptions{})
		return compute.TemplateBuildResult{}, ctxErr(ctx, 0, req.Limits.BuildTime)
	}
	ins, err := cli.ImageInspect(qctx, final)
	if err != nil {
		return compute.TemplateBuildResult{}, r.engineErr(0, "inspecting the template's image", err)
	}
	res.Image, res.ImageID, res.SizeBytes, res.Start = ref, ins.ID, ins.Size, start
	r.log.info("finalize", fmt.Sprintf("Template image %s (%d MB)", ref, ins.Size>>20))
	return res, nil
}

// groups splits steps into commits: configuration steps join the next
// layer step; trailing ones form a last group ending without a layer.
func groups(steps []compute.TemplateStep) []group {
	var out []group
	first := 0
	for i, s := range steps {
		if makesLayer(s) {
			out = append(out, group{first, i})
			first = i + 1
		}
	}
	if first < len(steps) {
		out = append(out, group{first, len(steps) - 1})
	}
	return out
}

// resolveStart is the template's start command: the request's, or the
// parent template's (run in its own context) when the request has none.
func resolveStart(req compute.TemplateBuild, inherited compute.StartCommand, st state) compute.StartCommand {
	start := inherited
	here := func() {
		start.Dir, start.User, start.Env = st.Dir, st.User, append([]string(nil), st.Env...)
	}
	switch {
	case req.StartCmd != nil:
		start = compute.StartCommand{Cmd: *req.StartCmd}
		if req.ReadyCmd != nil {
			start.ReadyCmd = *req.ReadyCmd
		}
		here()
	case req.ReadyCmd != nil:
		start.ReadyCmd = *req.ReadyCmd
		if start.Cmd == "" {
			here()
		}
	}
	if start.Cmd == "" && start.ReadyCmd == "" {
		return compute.StartCommand{}
	}
	return start
}

// finalLabels are what the final image carries for sandboxes.
type finalLabels struct {
	start   string // LabelStart: the start command's JSON ("{}": none)
	workdir string // LabelWorkdir ("": none)
}

// finalImage is the template's image: cur with the trailing configuration
// and the start and workdir labels, committed (or found in the cache)
// unless cur already is exactly that.
func (r *run) finalImage(ctx context.Context, cur string, st state, fl finalLabels, steps []compute.TemplateStep, forced bool, dirs []string) (img string, cached bool, err error) {
	startJSON := fl.start
	gs := groups(steps)
	var trailing []compute.TemplateStep
	if len(gs) > 0 && !makesLayer(steps[gs[len(gs)-1].last]) {
		g := gs[len(gs)-1]
		trailing = steps[g.first : g.last+1]
	}
	ins, err := r.b.h.Client.ImageInspect(ctx, cur)
	if err != nil {
		return "", false, r.engineErr(0, "inspecting the image", err)
	}
	carried, carriedDir := "", ""
	if ins.Config != nil {
		carried, carriedDir = ins.Config.Labels[LabelStart], ins.Config.Labels[LabelWorkdir]
	}
	if len(trailing) == 0 && (carried == startJSON || (carried == "" && startJSON == "{}")) && carriedDir == fl.workdir {
		return cur, true, nil
	}
	key := cacheKey(cur, trailing, startJSON+"\x00"+fl.workdir)
	if !forced {
		if hit := r.lookup(ctx, key); hit != "" {
			return hit, true, nil
		}
	}
	var layer *os.File
	if len(dirs) > 0 {
		if layer, err = dirLayer(dirs); err != nil {
			return "", false, &compute.TemplateBuildError{Kind: compute.KindInternal, Err: err, Msg: "could not stage the WORKDIR directories: " + err.Error()}
		}
		defer func() { layer.Close(); os.Remove(layer.Name()) }()
	}
	img, err = r.loadImage(ctx, cur, imageConfig{st: st, labels: map[string]string{LabelKey: key, LabelStart: startJSON, LabelWorkdir: fl.workdir}}, layer)
	if err != nil {
		return "", false, r.engineErr(0, "making the final image", err)
	}
	return img, false, nil
}

// lookup returns the newest image labelled with key ("" when none).
func (r *run) lookup(ctx context.Context, key string) string {
	imgs, err := r.b.h.Client.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelKey+"="+key))})
	if err != nil || len(imgs) == 0 {
		return ""
	}
	best := imgs[0]
	for _, im := range imgs[1:] {
		if im.Created > best.Created {
			best = im
		}
	}
	return best.ID
}

// StartOf reads the start command an image carries.
func StartOf(labels map[string]string) compute.StartCommand {
	var s compute.StartCommand
	if v := labels[LabelStart]; v != "" {
		_ = json.Unmarshal([]byte(v), &s)
	}
	return s
}

// Image implements compute.TemplateBuilder.TemplateImage.
func (b *Builder) Image(ctx context.Context, ref string) (compute.TemplateImage, error) {
	ins, err := b.h.Client.ImageInspect(ctx, ref)
	switch {
	case cerrdefs.IsNotFound(err):
		return compute.TemplateImage{}, &compute.TemplateBuildError{Kind: compute.KindNotFound, Err: err, Msg: fmt.Sprintf("image %s does not exist", ref)}
	case err != nil:
		return compute.TemplateImage{}, &compute.TemplateBuildError{Kind: compute.KindUnavailable, Err: err, Msg: err.Error()}
	}
	out := compute.TemplateImage{Image: ref}
	if ins.Config != nil {
		out.Start = StartOf(ins.Config.Labels)
	}
	return out, nil
}

// Remove implements compute.TemplateBuilder.RemoveTemplateImage.
func (b *Builder) Remove(ctx context.Context, ref string) error {
	_, err := b.h.Client.ImageRemove(ctx, ref, image.RemoveOptions{})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return &compute.TemplateBuildError{Kind: compute.KindUnavailable, Err: err, Msg: err.Error()}
	}
	return nil
}

// Sweep removes the step containers of builds that ran longer ago than
// any build may take (those of a backend that crashed mid-build).
func (b *Builder) Sweep(ctx context.Context) error {
	args := filters.NewArgs(filters.Arg("label", LabelRun))
	for k, v := range b.h.Labels {
		args.Add("label", k+"="+v)
	}
	cs, err := b.h.Client.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return err
	}
	for _, c := range cs {
		if time.Since(time.Unix(c.Created, 0)) > 2*DefaultBuildTime {
			_ = b.h.Client.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	}
	return nil
}
