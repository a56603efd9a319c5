package main

// Template builds (issue 31): a 3-step template (RUN, ENV, RUN) built by
// the backend's engine (each RUN step a contained container committed as
// a layer) against `docker build` of the equivalent Dockerfile on the same
// engine (the engine's classic builder, default bridge, no limits), cold
// (no cache on either side) and cached (the same build again).

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/templatebuild"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
)

var templateBuilds = flag.Int("template-n", 5, "builds per side and phase of the template part")

// templateSteps and templateDockerfile are the same build.
var templateSteps = []compute.TemplateStep{
	{Type: "RUN", Args: []string{"echo one > /one"}},
	{Type: "ENV", Args: []string{"STEP", "two"}},
	{Type: "RUN", Args: []string{`echo "$STEP" > /two`}},
}

func templateDockerfile(base string) string {
	return "FROM " + base + "\nRUN echo one > /one\nENV STEP=two\nRUN echo \"$STEP\" > /two\n"
}

func templatePart(ctx context.Context) {
	scope := "bench-tb-" + ids.New()[:8]
	p, err := docker.New(docker.Config{Scope: scope, BaseImage: *baseImage})
	if err != nil {
		fail(err)
	}
	defer p.Close()
	tag := "dreadnode-bench/template:" + scope
	var builds []string
	atExit(func() { removeTemplateBench(context.Background(), builds, tag) })
	ours := func(force bool) time.Duration {
		id := "b" + ids.New()[:12]
		builds = append(builds, id)
		t0 := time.Now()
		_, err := p.BuildTemplate(ctx, compute.TemplateBuild{TemplateID: "bench", BuildID: id, FromImage: *baseImage,
			Steps: templateSteps, Force: force, CPUCount: 1, MemoryMB: 512})
		if err != nil {
			fail(fmt.Errorf("template: %w", err))
		}
		return time.Since(t0)
	}
	raw := func(noCache bool) time.Duration {
		t0 := time.Now()
		if err := dockerBuild(ctx, templateDockerfile(*baseImage), tag, noCache); err != nil {
			fail(fmt.Errorf("template: docker build: %w", err))
		}
		return time.Since(t0)
	}
	var oursCold, rawCold, oursCached, rawCached []time.Duration
	for range *templateBuilds { // interleaved so drift hits both sides alike
		oursCold = append(oursCold, ours(true))
		rawCold = append(rawCold, raw(true))
	}
	for range *templateBuilds {
		oursCached = append(oursCached, ours(false))
		rawCached = append(rawCached, raw(false))
	}
	report("template build (cold)", oursCold, rawCold, 1.10)
	report("template build (cached)", oursCached, rawCached, 1.00)
}

// dockerBuild runs the engine's classic builder on a context holding only
// the Dockerfile, as `docker build` does, reading its output to the end.
func dockerBuild(ctx context.Context, dockerfile, tag string, noCache bool) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))})
	_, _ = tw.Write([]byte(dockerfile))
	_ = tw.Close()
	resp, err := engine.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{tag}, NoCache: noCache, Remove: true, ForceRemove: true,
		Version: build.BuilderV1, Labels: map[string]string{"dev.dreadnode.bench": "template"}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if m.Error != "" {
			return fmt.Errorf("%s", m.Error)
		}
	}
}

// removeTemplateBench removes the images both sides made.
func removeTemplateBench(ctx context.Context, builds []string, tag string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, id := range builds {
		_, _ = engine.ImageRemove(ctx, templatebuild.Ref("bench", id), image.RemoveOptions{})
		f := filters.NewArgs(filters.Arg("label", templatebuild.LabelBuild+"="+id))
		cs, _ := engine.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		for _, c := range cs {
			_ = engine.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
		imgs, _ := engine.ImageList(ctx, image.ListOptions{All: true, Filters: f})
		for i := len(imgs) - 1; i >= 0; i-- {
			_, _ = engine.ImageRemove(ctx, imgs[i].ID, image.RemoveOptions{Force: true})
		}
	}
	_, _ = engine.ImageRemove(ctx, tag, image.RemoveOptions{Force: true, PruneChildren: true})
	imgs, _ := engine.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "dev.dreadnode.bench=template"))})
	for _, im := range imgs {
		_, _ = engine.ImageRemove(ctx, im.ID, image.RemoveOptions{Force: true, PruneChildren: true})
	}
}
