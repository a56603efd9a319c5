package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// TestE2BFlowOnE2BFake drives the same E2B flow through the backend on the
// E2B provider: /e2b and the host router in front, the E2B fake as E2B's
// control plane and proxy, and as each fake sandbox's envd a real one (our
// agent in a container of the template's image, as E2B runs envd in its
// VM), so the flow's processes and files are real, in dreadnode/base, a
// busybox image and an image with no shell. The fake checks the envd
// routes' answers against envd.yaml.
func TestE2BFlowOnE2BFake(t *testing.T) {
	t.Parallel()
	ensureFlowImages(t)
	// The fake's templates and the image each one's envd container runs.
	images := map[string]string{"base": "dreadnode/base:latest", "flow-busybox": flowBusybox, "flow-noshell": flowNoShell}
	envds := &fakeEnvds{t: t, bin: agentbin.Path(t), byID: map[string]*fakeEnvd{}}
	fake := e2bfake.New(t, e2bfake.WithEnvd(envds.upstream),
		e2bfake.WithTemplate(e2bfake.Template{ID: "flow-busybox", CPUCount: 1, MemoryMB: 256}),
		e2bfake.WithTemplate(e2bfake.Template{ID: "flow-noshell", CPUCount: 1, MemoryMB: 256}))
	envds.image = func(id string) string {
		sb, _ := fake.Sandbox(id)
		return images[sb.TemplateID]
	}
	ta := newTestApp(t, func(c *Config) {
		c.Provider = "e2b"
		c.E2B = &e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
			EnvdURL: fake.EnvdURL, Templates: map[string]compute.Template{
				"base":         {ID: "base", CPUCount: 2, MemoryMB: 512},
				"flow-busybox": {ID: "flow-busybox", CPUCount: 1, MemoryMB: 256},
				"flow-noshell": {ID: "flow-noshell", CPUCount: 1, MemoryMB: 256}},
			Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
	})
	t.Run("flows", func(t *testing.T) {
		for _, img := range flowImages {
			t.Run(img.template, func(t *testing.T) {
				t.Parallel()
				e2bFlow(t, ta, img)
			})
		}
	})
	if n := len(envds.byID); n != len(flowImages) {
		t.Fatalf("the flows reached %d envds, want one per sandbox (%d)", n, len(flowImages))
	}
	// Through E2B's proxy (the fake), not around it.
	for _, route := range []string{e2bfake.RouteProcessStart, e2bfake.RouteFilesGet, e2bfake.RouteFilesPost, "envd POST /process.Process/StreamInput", "envd POST /process.Process/Update"} {
		if fake.Count(route) < len(flowImages) {
			t.Errorf("%s reached the fake %d times, want at least once per flow", route, fake.Count(route))
		}
	}
}

// fakeEnvds starts, on a fake sandbox's first envd request, a container
// of its template's image running the agent as its envd.
type fakeEnvds struct {
	t     *testing.T
	bin   string
	image func(sandboxID string) string
	mu    sync.Mutex
	byID  map[string]*fakeEnvd
}

type fakeEnvd struct {
	once        sync.Once
	base, token string
	err         error
}

func (f *fakeEnvds) upstream(id string) (string, string, error) {
	f.mu.Lock()
	e, ok := f.byID[id]
	if !ok {
		e = &fakeEnvd{}
		f.byID[id] = e
	}
	f.mu.Unlock()
	e.once.Do(func() { e.base, e.token, e.err = f.start(id) })
	return e.base, e.token, e.err
}

func (f *fakeEnvds) start(id string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	cli := dockertest.Client(f.t)
	image := f.image(id)
	ii, err := cli.ImageInspect(ctx, image)
	if err != nil {
		return "", "", fmt.Errorf("the image of %s: %w", id, err)
	}
	// The agent as PID 1, the image's own command as its main process.
	main := append(append([]string{"/dn-agent", "--"}, ii.Config.Entrypoint...), ii.Config.Cmd...)
	c, err := cli.ContainerCreate(ctx, &container.Config{
		Image:      image,
		Entrypoint: main,
		Env:        []string{agent.EnvToken + "=" + token},
		Labels:     map[string]string{"dev.dreadnode.test": "e2bflow-fake", "dev.dreadnode.test.sandbox": id},
	}, &container.HostConfig{Binds: []string{f.bin + ":/dn-agent:ro"}, Init: new(bool)}, nil, nil, "")
	if err != nil {
		return "", "", fmt.Errorf("creating the envd container of %s: %w", id, err)
	}
	f.t.Cleanup(func() {
		if f.t.Failed() { // say how the envd's container ended, if it did
			if in, err := cli.ContainerInspect(context.Background(), c.ID); err == nil && in.State != nil {
				f.t.Logf("envd container of %s (%s): status %s, exit code %d, OOM killed %v, error %q", id, image,
					in.State.Status, in.State.ExitCode, in.State.OOMKilled, in.State.Error)
			}
			if rc, err := cli.ContainerLogs(context.Background(), c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"}); err == nil {
				b, _ := io.ReadAll(io.LimitReader(rc, 8<<10))
				rc.Close()
				f.t.Logf("its last log lines: %q", b)
			}
		}
		_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	})
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return "", "", fmt.Errorf("starting the envd container of %s: %w", id, err)
	}
	in, err := cli.ContainerInspect(ctx, c.ID)
	if err != nil {
		return "", "", err
	}
	ip := ""
	for _, n := range in.NetworkSettings.Networks {
		if ip == "" {
			ip = n.IPAddress
		}
	}
	if ip == "" {
		return "", "", fmt.Errorf("the envd container of %s has no IP address", id)
	}
	return fmt.Sprintf("http://%s:%d", ip, agent.Port), token, nil
}
